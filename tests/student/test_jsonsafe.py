"""Property tests of the one JSON encoding (grader/student/jsonsafe.py) as the store, the wire and the reports use it.

Hypothesis draws arbitrary floats (inf, NaN, subnormals, 1e308), nested
figures, and NumPy arrays of many shapes and dtypes: encoding never raises,
the text is strict JSON, and decoding gives back the plain form's numbers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grader.student import jsonsafe
from grader.student.client.wire import report_from_dict, report_to_dict
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.drawing import figure_html
from grader.student.feedback.report import format_json
from grader.student.store import Store, figure_of_text, figure_text

floats = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True) | st.sampled_from(
    [1e308, -1e308, 1.7976931348623157e308, 5e-324, math.inf, -math.inf, math.nan, -0.0]
)
dtypes = st.sampled_from(
    ["float16", "float32", "float64", "int8", "int64", "uint16", "bool", "complex64", "complex128"]
)
arrays = dtypes.flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)))
leaves = floats | st.integers() | st.text(max_size=8) | st.booleans() | st.none() | arrays
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
figures = st.dictionaries(st.text(max_size=6), values, max_size=6)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, -0.0 to 0.0 (anywhere in nested lists and dicts)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def restored_plain(value: Any) -> Any:
    return jsonsafe.restore(jsonsafe.plain(value))


@SETTINGS
@given(values)
def test_any_value_encodes_to_strict_json_and_decodes_to_its_plain_form(value: Any) -> None:
    text = jsonsafe.dumps(value)
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # no NaN/Infinity tokens
    assert same(jsonsafe.loads(text), restored_plain(value))


@SETTINGS
@given(floats)
def test_every_float_survives_exactly(x: float) -> None:
    back = jsonsafe.loads(jsonsafe.dumps([x]))[0]
    assert same(back, x) and (math.copysign(1, back) == math.copysign(1, x) or math.isnan(x))


@SETTINGS
@given(figures)
def test_the_stores_figure_text_round_trips_and_the_drawing_never_fails(figure: dict[str, Any]) -> None:
    back = figure_of_text(figure_text(figure))
    assert same(back, restored_plain(figure))
    figure_html({**figure, "kind": "elements"})  # whatever it holds, the page is drawn (or says it could not be)


@SETTINGS
@given(figures, floats)
def test_a_report_crosses_the_wire_and_the_json_report(figure: dict[str, Any], score: float) -> None:
    check = CheckResult("forward", False, 0.0, 1.0, "forward returned inf", None, figure, [], figure)
    report = GradeReport("ann", [ExerciseResult("activations.GELU", "failed", 0.0, 10.0, [check])], "h")
    doc = report_to_dict(report, instructor=True)
    json.dumps(doc, allow_nan=False)  # what Starlette's JSONResponse and the queue do with it
    back = report_from_dict(json.loads(json.dumps(doc)))
    assert same(back.exercises[0].checks[0].figure, restored_plain(figure))
    assert same(back.exercises[0].checks[0].instructor_figure, restored_plain(figure))
    json.loads(format_json(report, arrays=True))


@settings(max_examples=12, deadline=None)
@given(arrays)
def test_a_figure_of_any_array_is_recorded(tmp_path_factory: Any, array: np.ndarray) -> None:
    path: Path = tmp_path_factory.mktemp("store") / "p.db"
    figure = {"kind": "elements", "received": array, "summary": "any dtype"}
    check = CheckResult("forward", False, 0.0, 1.0, "", None, figure, [], figure)
    with Store.open(path) as store:
        store.record_report(GradeReport("ann", [ExerciseResult("activations.GELU", "failed", 0.0, 10.0, [check])]), "v")
        row = store.check_results(store.submissions(student="ann")[0]["id"])[0]
    assert same(row["figure"]["received"], restored_plain(array))
