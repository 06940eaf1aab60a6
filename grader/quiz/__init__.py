"""Comprehension checkpoints: chapter quizzes with locked answer keys.

Authors write plaintext answers in ``quizzes/source/<chapter>.toml``; ``grade
quiz lock`` turns each source into ``quizzes/<chapter>.json``, the file a
student reads, which keeps the question, its choices, tolerance and
explanation but stores the answer only as salted digests (as okpy locks its
conceptual questions):

    digest = HMAC-SHA256(key = salt, msg = canonical answer)

with a random 16-byte salt per question. Canonical answers:

- single choice: ``choice:<id>``; multiple select: ``choices:<id>,<id>`` with the
  ids sorted (ids are stable, independent of display order);
- short answer: ``short:<normalised text>``, one digest per accepted form
  (normalised for case, spaces and simple notation, see ``normalise_text``);
  a question that declares ``symbols`` also stores, per form that is a
  formula, the digest of its fingerprint (``grader.student.quiz.expr``: its values at
  sample points drawn from the salt), so ``2/fan_in``, ``Var(W) = 2/n`` and
  ``4/(2 n_in)`` all match ``2/n_in``;
- numeric, tolerance t: ``num:<k>`` with k = round(value * QUANT_STEPS / t).
  A candidate x is accepted when one of the bins k_x - (QUANT_STEPS + 1) ...
  k_x + (QUANT_STEPS + 1) matches, so every |x - answer| <= t is accepted and
  every |x - answer| > (1 + 2 / QUANT_STEPS) * t is rejected.

A *parameterised* numeric question (``params`` and ``reference``,
``grader.quiz.params``) has no key at all: its locked form keeps the prompt
template, the parameter ranges and the reference call, and it is judged by
running the reference on the student's numbers (|x - answer| <= t).

Each student sees a question *posed* (``pose``): parameters drawn and the
prompt rendered, choices shuffled in a stable per-student order. A question
allows ``attempts`` tries in a session (default 2 for a checkpoint, else 1);
an unreadable answer costs none. A chapter is complete when each of its
checkpoint questions has at least one correct recorded attempt.

The package is split by concern: ``model`` (the data), ``bank`` (locked files,
chapters, answers files), ``locking`` (authors' sources and ``grade quiz
lock``), ``params`` and ``probes`` (drawn numbers and the reference calls),
``judging`` (posing and judging, bounded in size and time), ``graded`` (the
attempt and explanation rules where quizzes are graded), ``sessions`` (the
interactive quiz and standings), and the leak audit, ``leaks`` (what a student
reads before answering, tried with every graded judge) with ``reading`` (the
candidate answers a text holds). Import the public names from here.
"""

from __future__ import annotations

from grader.quiz import params as params_lib  # noqa: F401
from grader.quiz.bank import (  # noqa: F401
    answers_for,
    chapter_ids,
    default_quiz_dir,
    load_all,
    load_answers,
    load_quiz,
    resolve_chapter,
)
from grader.quiz.errors import (  # noqa: F401
    AnswerFormatError,
    QuizError,
    QuizFileError,
    ReferenceUnavailableError,
    UnknownChapterError,
)
from grader.quiz.judging import (  # noqa: F401
    check_answer,
    grade_answer,
    grade_answers,
    judge,
    pose,
    recorded_form,
)
from grader.quiz.locking import (  # noqa: F401
    LockOutcome,
    _answer_forms,
    _formula_form,
    dump_locked,
    load_source,
    lock_all,
    lock_quiz,
    source_digests,
)
from grader.quiz.model import (  # noqa: F401
    CHAPTER_ORDER,
    CHECKPOINT_ATTEMPTS,
    FORMAT,
    KIND_HINTS,
    KINDS,
    LOCKED_FIELDS,
    QUIZ_DIR_ENV,
    SALT_BYTES,
    SOURCE_FIELDS,
    ChapterProgress,
    Choice,
    Posed,
    Question,
    Quiz,
    QuizResult,
    SourceQuestion,
    SourceQuiz,
    Verdict,
)
from grader.quiz.sessions import (  # noqa: F401
    AnswerHook,
    answer_hint,
    ask_question,
    attempt_label,
    chapter_progress,
    correct_questions,
    feedback_line,
    format_listing,
    needs_reference,
    run_session,
    session_intro,
    show_question,
    summary_line,
    summary_text,
)
from grader.student.quiz.answers import (  # noqa: F401  (re-exported: the quiz's public names)
    MAX_ANSWER_CHARS,
    QUANT_STEPS,
    canonical_answers,
    digest,
    formula_message,
    normalise_text,
    parse_number,
    symbol_table,
)
