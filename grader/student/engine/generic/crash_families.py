"""The generic families named from a crash's error alone (:data:`grader.student.engine.generic.claims.CRASH_ORDER`),
on the case it stops where the reference does not stop: ``generic-none`` (a value left None: an unset variable, a
missing return), ``generic-call`` (an argument missing or misplaced), ``generic-shape`` (operands whose shapes do
not fit), ``generic-key`` (a value read back under another key), ``generic-validation`` (the student's own check
rejecting a valid input). Each error's words are matched against the marks below.
"""

from __future__ import annotations

from grader.student.engine.diagnosis import error_signature
from grader.student.engine.generic.claims import Claim, Context


NONE_MARKS = ("NoneType", "returned None", "array of object", "not None", "None as")
SHAPE_MARKS = (
    "could not be broadcast",
    "cannot reshape",
    "not aligned",
    "mismatch in its core dimension",
    "is out of bounds for axis",
    "tuple index out of range",
    "index out of range",
)
CALL_MARKS = (
    "missing 1 required",
    "missing 2 required",
    "missing 3 required",
    "missing required argument",
    "positional argument",
    "either both or neither",
    "unexpected keyword argument",
    "required positional",
)


def crash_claims(ctx: "Context", case: str) -> list[Claim]:
    """What a crash's error says about its cause, on the case it stops (where the reference does not stop):

    ``generic-none`` (a value left None: an unset variable, a missing return), ``generic-shape`` (operands whose
    shapes do not fit: a reshape for the wrong axes, a transpose, a reduction without keepdims), ``generic-call``
    (a function called with an argument missing or misplaced), ``generic-key`` (a value read back under a key it
    was not stored under), ``generic-validation`` (the student's own input check rejecting a valid input).
    """
    error = ctx.student_result(case).error
    reference = ctx.reference.get(case)
    if (
        not error
        or error.get("type")
        in ("NotImplementedError", "NoResult", "MemoryError", "KeyboardInterrupt", "Timeout", "SystemExit")
        or (reference is not None and error_signature(reference) is not None)
    ):
        return []
    kind, text = error.get("type", ""), error.get("message", "")
    message = f"{kind}: {text}"[:160]
    where = error.get("where") or "your code"
    claims = []

    def here(name: str) -> bool | None:
        return True if name == case else None

    if any(mark in message for mark in NONE_MARKS):
        claims.append(
            Claim(
                "generic-none",
                f"{where} used a value that is None ({message}): a variable never"
                " assigned, an attribute forward did not set, or a function that"
                " returns nothing.",
                holds_on=here,
            )
        )
    if kind in ("TypeError", "ValueError") and any(mark in text for mark in CALL_MARKS):
        claims.append(
            Claim(
                "generic-call",
                f"{where} called a function with an argument missing or in the wrong place ({message}).",
                holds_on=here,
            )
        )
    if kind in ("ValueError", "IndexError", "AxisError") and any(mark in text for mark in SHAPE_MARKS):
        claims.append(
            Claim(
                "generic-shape",
                f"{where} combined arrays whose shapes do not fit ({message}): an"
                " operand reshaped for the wrong axes, transposed, or reduced without"
                " keepdims.",
                holds_on=here,
            )
        )
    if kind == "KeyError":
        claims.append(
            Claim(
                "generic-key",
                f"{where} read back a value under a key it was never stored under"
                f" ({message}): the name used to store it differs.",
                holds_on=here,
            )
        )
    lines = (error.get("traceback") or "").rstrip().splitlines()
    frames = [line for line in lines if line.strip().startswith("File ")]
    own_file = f'"{ctx.exercise_id.split(".")[0]}.py"' in (frames[-1] if frames else "")
    if kind == "ValueError" and lines and lines[-1].strip().startswith("raise") and own_file:
        # the exercise's own check raised, in its own file (not another exercise's check that a wrong call tripped)
        claims.append(
            Claim(
                "generic-validation",
                f"{where} raised ValueError on a valid input ({message}): its"
                " check of the arguments or of the input's shape is wrong.",
                holds_on=here,
            )
        )
    return claims
