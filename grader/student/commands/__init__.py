"""The commands both `grade` programs ship, each defined once (gathered into the handout's `grade` by
grader/student/cli.py, and into the instructor's by grader/cli.py): options.py (the shared options and
start-up), edition.py (what each program brings: :class:`~grader.student.commands.edition.Edition`),
work.py (submit, progress, quiz, practice, doctor), reading.py (read, view), account.py (login, logout,
result, regrade)."""
