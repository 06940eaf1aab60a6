"""normgrade: teach and grade the building blocks of deep networks.

This file ships with the student handout and imports nothing when ``grader``
is imported; its one function, the IPython extension hook behind
``%load_ext grader``, loads the notebook front end only when called.
"""


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext grader``: register ``%grade`` and ``%quiz`` (grader/student/feedback/notebook.py)."""
    from grader.student.feedback.notebook import load_ipython_extension as load

    load(ipython)
