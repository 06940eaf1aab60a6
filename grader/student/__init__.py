"""The student-side engine: everything that may ship to a student (``grade release`` copies this
folder into the handout). Nothing here imports the rest of ``grader`` or ``reference``
(tests/test_layout.py walks every module's imports)."""
