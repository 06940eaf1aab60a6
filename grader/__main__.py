"""``python -m grader``: the ``grade`` command without the virtual environment's bin/ on PATH."""

from grader.cli import main

if __name__ == "__main__":
    main("python -m grader")
