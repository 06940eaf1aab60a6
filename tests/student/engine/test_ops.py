"""The case interpreter: values, every op, output validation, errors and warnings."""

from __future__ import annotations

import importlib
import sys
import textwrap
import types
from typing import Any

import numpy as np
import pytest

from grader.student.engine import ops
from grader.student.engine.ops import BadOutputError, Case, ScriptError, ScriptResult, run_script


class Square:
    """y = x^2 * w (w a parameter); backward dx = 2 x w dout, dw = sum(x^2 dout)."""

    def __init__(self, w: float = 1.0) -> None:
        self.w = np.array([w])
        self.calls = 0

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.x = x
        return x**2 * self.w[0]

    def backward(self, dout: np.ndarray) -> np.ndarray:
        self.dw = np.array([np.sum(self.x**2 * dout)])
        return 2 * self.x * self.w[0] * dout


class Mutator:
    def forward(self, x: np.ndarray) -> np.ndarray:
        x *= 2.0
        return x


class Weird:
    def forward(self, x: np.ndarray):
        return ["a", "b"]

    def none(self, x: np.ndarray):
        return None

    def complex(self, x: np.ndarray):
        return x + 1j

    def exit(self) -> None:
        sys.exit(3)

    def interrupt(self) -> None:
        raise KeyboardInterrupt

    def warn(self) -> np.ndarray:
        return np.exp(np.array([1e4]))

    def ragged(self):
        return [[1.0, 2.0], [3.0]]


def make_ns() -> types.SimpleNamespace:
    topic = types.SimpleNamespace(
        Square=Square,
        Mutator=Mutator,
        Weird=Weird,
        add=lambda a, b=0.0: np.asarray(a) + b,
        make_fn=lambda k: lambda x: k * np.asarray(x),
        pair=lambda: (1.0, 2.0),
    )
    return types.SimpleNamespace(toy=topic)


def run(script: list[dict], arrays: dict | None = None) -> ScriptResult:
    return run_script(make_ns(), script, arrays or {})


def test_new_call_and_out_record_numeric_copies() -> None:
    x = np.arange(6.0).reshape(2, 3)
    res = run(
        [
            {"op": "new", "var": "m", "cls": "toy.Square", "kwargs": {"w": 2.0}},
            {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}], "out": "y"},
            {"op": "call", "var": "m", "method": "backward", "args": [{"array": "x"}], "out": "dx"},
            {"op": "get", "var": "m", "attr": "dw", "out": "dw"},
        ],
        {"x": x},
    )
    assert res.error is None
    np.testing.assert_array_equal(res.outputs["y"], 2 * x**2)
    np.testing.assert_array_equal(res.outputs["dx"], 4 * x * x)
    assert res.outputs["dw"].shape == (1,)


def test_array_values_are_fresh_copies_and_let_watches_mutation() -> None:
    x = np.ones(3)
    res = run(
        [
            {"op": "new", "var": "m", "cls": "toy.Mutator"},
            {"op": "let", "var": "x0", "value": {"array": "x"}},
            {"op": "call", "var": "m", "method": "forward", "args": [{"var": "x0"}], "out": "y"},
            {"op": "output", "value": {"var": "x0"}, "out": "x_after"},
            {"op": "output", "value": {"array": "x"}, "out": "x_fresh"},
        ],
        {"x": x},
    )
    np.testing.assert_array_equal(x, np.ones(3))  # our array untouched
    np.testing.assert_array_equal(res.outputs["x_after"], 2 * np.ones(3))
    np.testing.assert_array_equal(res.outputs["x_fresh"], np.ones(3))


def test_recorded_outputs_do_not_alias_student_arrays() -> None:
    res = run(
        [
            {"op": "new", "var": "m", "cls": "toy.Square"},
            {"op": "set", "var": "m", "attr": "w", "value": [3.0]},
            {"op": "get", "var": "m", "attr": "w", "out": "w_before"},
            {"op": "set", "var": "m", "attr": "w", "value": [5.0]},
            {"op": "get", "var": "m", "attr": "w", "out": "w_after"},
        ]
    )
    assert res.outputs["w_before"].tolist() == [3.0]
    assert res.outputs["w_after"].tolist() == [5.0]


def test_func_to_and_eval_fn_and_values() -> None:
    res = run(
        [
            {"op": "func", "fn": "toy.add", "args": [{"tuple": [1.0, 2.0]}], "kwargs": {"b": 1.0}, "out": "s"},
            {"op": "func", "fn": "toy.make_fn", "args": [3.0], "to": "g"},
            {"op": "eval_fn", "var": "g", "x": {"array": "x"}, "out": "gx"},
            {"op": "let", "var": "d", "value": {"dict": {"a": {"array": "x"}}}},
            {"op": "get", "var": "d", "attr": "a", "out": "from_dict"},
            {"op": "let", "var": "r", "value": {"rng": 5}},
            {"op": "call", "var": "r", "method": "random", "out": "u"},
        ],
        {"x": np.array([1.0, 2.0])},
    )
    assert res.error is None
    assert res.outputs["s"].tolist() == [2.0, 3.0]
    assert res.outputs["gx"].tolist() == [3.0, 6.0]
    assert res.outputs["from_dict"].tolist() == [1.0, 2.0]
    assert float(res.outputs["u"]) == np.random.default_rng(5).random()


def test_is_none_and_dotted_get() -> None:
    res = run(
        [
            {"op": "new", "var": "m", "cls": "toy.Weird"},
            {"op": "set", "var": "m", "attr": "b", "value": None},
            {"op": "is_none", "var": "m", "attr": "b", "out": "b_none"},
            {"op": "new", "var": "outer", "cls": "toy.Square"},
            {"op": "set", "var": "outer", "attr": "inner", "value": {"var": "m"}},
            {"op": "set", "var": "outer", "attr": "inner.c", "value": 4.0},
            {"op": "get", "var": "outer", "attr": "inner.c", "out": "c"},
        ]
    )
    assert res.error is None
    assert bool(res.outputs["b_none"]) is True
    assert float(res.outputs["c"]) == 4.0


def test_numgrad_matches_analytic_gradients() -> None:
    rng = np.random.default_rng(0)
    x, dout = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    res = run(
        [
            {"op": "new", "var": "m", "cls": "toy.Square", "kwargs": {"w": 1.5}},
            {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}]},
            {"op": "call", "var": "m", "method": "backward", "args": [{"array": "dout"}], "out": "dx"},
            {"op": "get", "var": "m", "attr": "dw", "out": "dw"},
            {"op": "numgrad", "var": "m", "x": {"array": "x"}, "dout": {"array": "dout"}, "out": "num_dx"},
            {"op": "numgrad", "var": "m", "x": {"array": "x"}, "dout": {"array": "dout"}, "out": "num_dw", "wrt": "w"},
            {"op": "get", "var": "m", "attr": "w", "out": "w_after"},
        ],
        {"x": x, "dout": dout},
    )
    assert res.error is None
    np.testing.assert_allclose(res.outputs["num_dx"], res.outputs["dx"], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(res.outputs["num_dw"], res.outputs["dw"], rtol=1e-8)
    assert res.outputs["w_after"].tolist() == [1.5]  # the parameter is restored


@pytest.mark.parametrize(
    "method, expected",
    [
        ("forward", "forward returned a list of str: expected a float64 array"),
        ("none", "none returned None: a missing return? (expected a float64 array)"),
        ("complex", "complex returned an array of complex128: expected a float64 array"),
    ],
)
def test_non_numeric_output_is_a_case_error(method: str, expected: str) -> None:
    res = run(
        [
            {"op": "new", "var": "m", "cls": "toy.Weird"},
            {"op": "output", "value": 1.0, "out": "before"},
            {"op": "call", "var": "m", "method": method, "args": [{"array": "x"}], "out": "y"},
        ],
        {"x": np.zeros(2)},
    )
    assert res.error is not None and res.error["type"] == "BadOutputError"
    assert res.error["message"] == expected
    assert "before" in res.outputs and "y" not in res.outputs  # outputs before the error are kept


def test_ragged_output_is_a_case_error() -> None:
    res = run(
        [{"op": "new", "var": "m", "cls": "toy.Weird"}, {"op": "call", "var": "m", "method": "ragged", "out": "y"}]
    )
    assert res.error is not None and res.error["type"] == "BadOutputError"
    assert "expected a float64 array" in res.error["message"]


def test_system_exit_is_an_error_and_keyboard_interrupt_propagates() -> None:
    res = run([{"op": "new", "var": "m", "cls": "toy.Weird"}, {"op": "call", "var": "m", "method": "exit"}])
    assert res.error is not None and res.error["type"] == "SystemExit"
    assert res.error["where"] == "Weird.exit"
    with pytest.raises(KeyboardInterrupt):
        run([{"op": "new", "var": "m", "cls": "toy.Weird"}, {"op": "call", "var": "m", "method": "interrupt"}])


def test_missing_class_is_an_error_not_a_crash() -> None:
    res = run([{"op": "new", "var": "m", "cls": "toy.Nope"}])
    assert res.error is not None and res.error["type"] == "AttributeError"
    assert res.error["where"] == "toy.Nope(...)"


def test_warnings_are_captured_not_raised() -> None:
    res = run([{"op": "new", "var": "m", "cls": "toy.Weird"}, {"op": "call", "var": "m", "method": "warn", "out": "y"}])
    assert res.error is None
    assert res.warnings and res.warnings[0].startswith("RuntimeWarning: overflow")
    assert res.warnings[0].endswith("(in Weird.warn)")  # blamed on the call that raised it


def test_a_warning_names_the_method_and_line_of_the_student_file(tmp_path) -> None:
    """Round 3: a warning raised in backward is blamed on backward and its line, not on the case."""
    import importlib.util

    from grader.student.engine.ops import warning_method, warnings_in

    source = tmp_path / "layers.py"
    source.write_text(
        "import numpy as np\n\n\nclass ELU:\n    def forward(self, x):\n        self.x = x\n"
        "        return np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1)\n\n"
        "    def backward(self, dout):\n        return np.where(self.x > 0, dout, dout * np.exp(self.x))\n"
    )
    spec = importlib.util.spec_from_file_location("layers_for_ops_test", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ns = types.SimpleNamespace(layers=module)
    script: list[dict[str, Any]] = [
        {"op": "new", "var": "m", "cls": "layers.ELU"},
        {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}], "out": "y"},
        {"op": "call", "var": "m", "method": "backward", "args": [{"array": "x"}], "out": "dx"},
    ]
    res = run_script(ns, script, {"x": np.array([1e4, -1.0])})
    assert res.error is None and len(res.warnings) == 1
    assert res.warnings[0] == "RuntimeWarning: overflow encountered in exp (in ELU.backward, line 10 of layers.py)"
    assert warning_method(res.warnings[0]) == "backward"
    assert warnings_in(res, ("forward",)) == [] and warnings_in(res, ("backward",)) == res.warnings


@pytest.mark.parametrize(
    "script",
    [
        [{"op": "frobnicate"}],
        [{"op": "output", "value": 1.0, "out": "a"}, {"op": "output", "value": 2.0, "out": "a"}],
        [{"op": "output", "value": {"array": "missing"}, "out": "a"}],
        [{"op": "new", "var": "m"}],
        [{"op": "target", "var": "f", "name": "no-such-target"}],
    ],
)
def test_malformed_scripts_raise_script_error(script: list[dict]) -> None:
    with pytest.raises(ScriptError):
        run(script)


def test_targets_are_named_functions() -> None:
    res = run([{"op": "target", "var": "f", "name": "sin_2pi"}, {"op": "eval_fn", "var": "f", "x": [0.25], "out": "v"}])
    assert res.outputs["v"].tolist() == pytest.approx([1.0])
    x = np.linspace(-1, 1, 7).reshape(1, 7)
    assert np.allclose(ops.TARGETS["softmax_rows"](x).sum(axis=-1), 1.0)


def test_traceback_keeps_only_the_student_frames(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "student_pkg_tb"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import layers\n")
    (pkg / "layers.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            class Broken:
                def forward(self, x):
                    return helper(x)

            def helper(x):
                return np.reshape(x, (7, 7))
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ns = importlib.import_module("student_pkg_tb")
    res = run_script(
        ns,
        [
            {"op": "new", "var": "m", "cls": "layers.Broken"},
            {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}], "out": "y"},
        ],
        {"x": np.zeros(3)},
    )
    assert res.error is not None and res.error["type"] == "ValueError"
    assert res.error["where"] == "Broken.forward"
    tb = res.error["traceback"]
    assert 'File "layers.py", line 6, in forward' in tb
    assert "in helper" in tb
    assert "numpy" not in tb and "ops.py" not in tb


def test_cl_kernel_is_dispatched_lazily(monkeypatch) -> None:
    seen = {}

    def run_cl_kernel(ns, op, env):
        seen["op"] = op
        env.record(op["out"], np.array([1.0, 2.0], dtype=np.float32), "kernel")

    fake = types.ModuleType("grader.student.engine.ops_opencl")
    vars(fake)["run_cl_kernel"] = run_cl_kernel
    monkeypatch.setitem(sys.modules, "grader.student.engine.ops_opencl", fake)
    res = run([{"op": "cl_kernel", "kernel": "relu_forward", "out": "y"}])
    assert res.error is None and seen["op"]["kernel"] == "relu_forward"
    assert res.outputs["y"].dtype == np.float32


def test_case_holds_name_script_arrays() -> None:
    case = Case("c", [{"op": "output", "value": 1, "out": "one"}], {})
    assert run_script(make_ns(), case.script, case.arrays).outputs["one"] == 1


def test_as_numeric_and_describe() -> None:
    assert ops.as_numeric([1, 2], "f").dtype.kind == "i"
    with pytest.raises(BadOutputError):
        ops.as_numeric({"a": 1}, "forward")
    assert ops.describe((1, "a")) == "a tuple of int/str"
    assert ops.describe(object()) == "an object"


def test_numgrad_shape_mismatch_is_a_numgrad_error_not_a_bad_output() -> None:
    res = run(
        [
            {"op": "new", "var": "m", "cls": "toy.Square"},
            {"op": "numgrad", "var": "m", "x": {"array": "x"}, "dout": {"array": "d"}, "out": "g"},
        ],
        {"x": np.ones(3), "d": np.ones(4)},
    )
    assert res.error is not None and res.error["type"] == "NumgradError"
    assert res.error["message"] == "forward returned shape (3,) while dout has shape (4,)"
    assert res.error["where"] == "central differences of Square.forward"


def test_numpy_error_state_is_reset_for_each_script() -> None:
    with np.errstate(all="ignore"):
        res = run(
            [{"op": "new", "var": "m", "cls": "toy.Weird"}, {"op": "call", "var": "m", "method": "warn", "out": "y"}]
        )
    assert res.warnings and "overflow" in res.warnings[0]
    with np.errstate(all="raise"):
        res = run(
            [{"op": "new", "var": "m", "cls": "toy.Weird"}, {"op": "call", "var": "m", "method": "warn", "out": "y"}]
        )
    assert res.error is None and res.outputs["y"].tolist() == [np.inf]
