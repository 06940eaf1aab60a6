"""The student stubs in ``exercises/`` against the reference and the spec.

- every exercise of the spec (sections 3 and 5) exists in ``exercises/`` and
  ``reference/``, with the same signatures (parameter names, kinds, defaults);
- ``exercises/base.py`` and ``reference/base.py`` are identical;
- every stub raises ``NotImplementedError`` whose message is its exercise id
  (and the same call succeeds on the reference, so the arguments are valid);
- each stub ``__init__`` builds the reference's parameters, buffers and
  hyper-parameters (names, shapes, dtypes, values);
- the kernel stubs declare exactly the spec's kernels and build on the device.

``exercises`` is not an installed package: it is loaded from its path, as the
grader loads a student's folder. The tests on the loaded stubs run on
``exercises/`` itself and on its rendering at each scaffolding level
(``contract``, ``derive``, ``guided``: grader/course/scaffold.py).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from grader.course.scaffold import LEVELS, render_tree
from grader.student.engine.catalogue import EXERCISES
from grader.student.engine.loader import unload
import reference
from reference.base import Module as ReferenceModule

ROOT = Path(__file__).resolve().parents[1]
EXERCISES_DIR = ROOT / "exercises"
REFERENCE_DIR = ROOT / "reference"
PACKAGE_NAME = "_layout_exercises"  # private name: never clashes with another test's `exercises`

SEED = 20240607

# Spec section 3: the CPU exercises, by topic.
CLASSES: dict[str, list[str]] = {
    "activations": ["Sigmoid", "Tanh", "ReLU", "LeakyReLU", "PReLU", "ELU", "GELU", "SiLU"],
    "linear": ["Linear"],
    "normalization": ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm2d"],
    "dropout": ["Dropout"],
    "optim": ["SGD", "AdamW"],
    "blocks": ["MLPBlock"],
}
FUNCTIONS: dict[str, list[str]] = {
    "init": ["xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal"],
    "gradcheck": ["numerical_gradient", "rel_error"],
    "blocks": ["fold_batchnorm"],
    "approximation": ["fit_function"],
}
TOPICS = sorted(set(CLASSES) | set(FUNCTIONS))
CLASS_IDS = [f"{topic}.{name}" for topic, names in CLASSES.items() for name in names]
FUNCTION_IDS = [f"{topic}.{name}" for topic, names in FUNCTIONS.items() for name in names]
METHODS = ("__init__", "forward", "backward", "step", "train", "eval")

# Spec section 5: file -> kernel -> parameter list.
KERNELS: dict[str, dict[str, list[str]]] = {
    "activations.cl": {
        "relu_forward": ["__global const float *x", "__global float *y", "const int n"],
        "relu_backward": ["__global const float *x", "__global const float *dy", "__global float *dx", "const int n"],
        "gelu_forward": ["__global const float *x", "__global float *y", "const int n"],
        "gelu_backward": ["__global const float *x", "__global const float *dy", "__global float *dx", "const int n"],
    },
    "dropout.cl": {
        "dropout_forward": [
            "__global const float *x",
            "__global const float *u",
            "__global float *y",
            "const float p",
            "const int n",
        ],
    },
    "rmsnorm.cl": {
        "rmsnorm_forward": [
            "__global const float *x",
            "__global const float *gamma",
            "__global float *y",
            "__global float *rstd",
            "const int D",
            "const float eps",
            "__local float *scratch",
        ],
    },
    "layernorm.cl": {
        "layernorm_forward": [
            "__global const float *x",
            "__global const float *gamma",
            "__global const float *beta",
            "__global float *y",
            "__global float *mean",
            "__global float *rstd",
            "const int D",
            "const float eps",
            "__local float *scratch",
        ],
    },
}


def load_exercises(path: Path, name: str) -> ModuleType:
    """Import the folder ``path`` as the package ``name`` (relative imports between its files work)."""
    spec = importlib.util.spec_from_file_location(name, path / "__init__.py", submodule_search_locations=[str(path)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    try:
        spec.loader.exec_module(package)
    except BaseException:
        del sys.modules[name]
        raise
    return package


@pytest.fixture(scope="module", params=["source", *LEVELS])
def stubs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """``exercises/`` as it is, then rendered at each scaffolding level (grader/course/scaffold.py)."""
    folder, name = EXERCISES_DIR, PACKAGE_NAME
    if request.param != "source":
        folder, name = tmp_path_factory.mktemp(request.param) / "exercises", f"{PACKAGE_NAME}_{request.param}"
        render_tree(EXERCISES_DIR, folder, {}, request.param)
    package = load_exercises(folder, name)
    yield package
    unload(name)


def resolve(ns: ModuleType, exercise_id: str) -> Any:
    topic, name = exercise_id.split(".")
    return getattr(getattr(ns, topic), name)


def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def params_of(fn: Callable[..., Any]) -> list[tuple[str, str, Any]]:
    """(name, kind, default) of every parameter; annotations are not compared."""
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values()]


def public_names(module: ModuleType) -> set[str]:
    """Classes and functions defined (not imported) in ``module`` with a public name."""
    return {
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__ == module.__name__
    }


# ---------------------------------------------------------------- existence


def test_the_catalogue_holds_every_cpu_exercise_of_the_spec() -> None:
    """The contract's names are all in the catalogue; a course may add more (docs/authoring.md), never drop one."""
    spec = CLASS_IDS + FUNCTION_IDS
    assert len(set(spec)) == len(spec)
    assert not set(spec) - set(EXERCISES), sorted(set(spec) - set(EXERCISES))


def test_the_package_imports_every_topic_by_name(stubs: ModuleType) -> None:
    for topic in TOPICS:
        module = getattr(stubs, topic, None)
        assert isinstance(module, ModuleType), f"exercises/__init__.py does not import {topic}"
        assert module.__name__ == f"{stubs.__name__}.{topic}"


@pytest.mark.parametrize("topic", TOPICS)
def test_stub_topic_defines_exactly_the_spec_exercises(stubs: ModuleType, topic: str) -> None:
    expected = set(CLASSES.get(topic, [])) | set(FUNCTIONS.get(topic, []))
    assert public_names(getattr(stubs, topic)) == expected


@pytest.mark.parametrize("topic", TOPICS)
def test_reference_topic_defines_every_spec_exercise(topic: str) -> None:
    expected = set(CLASSES.get(topic, [])) | set(FUNCTIONS.get(topic, []))
    missing = expected - public_names(getattr(reference, topic))
    assert not missing, f"reference/{topic}.py lacks {sorted(missing)}"


@pytest.mark.parametrize("exercise_id", CLASS_IDS)
def test_classes_are_classes_and_layers_are_modules(stubs: ModuleType, exercise_id: str) -> None:
    stub_cls = resolve(stubs, exercise_id)
    ref_cls = resolve(reference, exercise_id)
    assert inspect.isclass(stub_cls) and inspect.isclass(ref_cls)
    stub_module = issubclass(stub_cls, stubs.base.Module)
    ref_module = issubclass(ref_cls, ReferenceModule)
    assert stub_module == ref_module
    assert stub_module == (not exercise_id.startswith("optim."))


# ---------------------------------------------------------------- signatures


@pytest.mark.parametrize("exercise_id", CLASS_IDS)
def test_class_signatures_match_the_reference(stubs: ModuleType, exercise_id: str) -> None:
    stub_cls = resolve(stubs, exercise_id)
    ref_cls = resolve(reference, exercise_id)
    for method in METHODS:
        stub_fn = getattr(stub_cls, method, None)
        ref_fn = getattr(ref_cls, method, None)
        assert (stub_fn is None) == (ref_fn is None), f"{exercise_id}.{method} exists on one side only"
        if stub_fn is not None and ref_fn is not None:
            assert params_of(stub_fn) == params_of(ref_fn), f"{exercise_id}.{method}"


@pytest.mark.parametrize("exercise_id", FUNCTION_IDS)
def test_function_signatures_match_the_reference(stubs: ModuleType, exercise_id: str) -> None:
    stub_fn = resolve(stubs, exercise_id)
    ref_fn = resolve(reference, exercise_id)
    assert inspect.isfunction(stub_fn) and inspect.isfunction(ref_fn)
    assert params_of(stub_fn) == params_of(ref_fn)


def test_spec_signatures_spelled_out() -> None:
    """A few signatures written out from the spec, so stub and reference cannot drift together."""
    expected = {
        "linear.Linear": "(self, in_features, out_features, bias=True, rng=None)",
        "normalization.LayerNorm": "(self, normalized_shape, eps=1e-05)",
        "normalization.RMSNorm": "(self, dim, eps=1e-06)",
        "normalization.BatchNorm1d": "(self, num_features, eps=1e-05, momentum=0.1)",
        "normalization.GroupNorm": "(self, num_groups, num_channels, eps=1e-05)",
        "activations.GELU": "(self, approximate='none')",
        "activations.SiLU": "(self, beta=1.0)",
        "activations.PReLU": "(self, num_parameters=1, init=0.25)",
        "dropout.Dropout": "(self, p=0.5, rng=None)",
        "optim.SGD": "(self, lr, momentum=0.0, weight_decay=0.0)",
        "optim.AdamW": "(self, lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01)",
        "blocks.MLPBlock": "(self, in_features, out_features, p=0.2, rng=None)",
        "init.xavier_uniform": "(fan_in, fan_out, rng, gain=1.0)",
        "init.kaiming_normal": "(fan_in, fan_out, rng, mode='fan_in', negative_slope=0.0)",
        "gradcheck.numerical_gradient": "(f, x, dout, h=1e-05)",
        "gradcheck.rel_error": "(a, b)",
        "blocks.fold_batchnorm": "(linear, bn)",
        "approximation.fit_function": "(f, n_hidden, rng, steps=2000)",
    }
    for exercise_id, text in expected.items():
        obj = resolve(reference, exercise_id)
        fn = obj.__init__ if inspect.isclass(obj) else obj
        sig = inspect.signature(fn)
        plain = sig.replace(
            parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
            return_annotation=inspect.Signature.empty,
        )
        assert str(plain) == text, exercise_id


def test_base_files_are_identical() -> None:
    assert (EXERCISES_DIR / "base.py").read_bytes() == (REFERENCE_DIR / "base.py").read_bytes()


@pytest.mark.parametrize("path", sorted(EXERCISES_DIR.glob("*.py")), ids=lambda p: p.name)
def test_stub_files_import_neither_reference_nor_grader(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots = [node.module.split(".")[0]]
        else:
            continue
        assert not {"reference", "grader"} & set(roots), f"{path.name}:{node.lineno} imports {roots}"


# ---------------------------------------------------------------- NotImplementedError

# exercise id -> (constructor args, constructor kwargs factory, input shape)
LAYERS: dict[str, tuple[tuple[Any, ...], Callable[[], dict[str, Any]], tuple[int, ...]]] = {
    "activations.Sigmoid": ((), dict, (2, 3, 4)),
    "activations.Tanh": ((), dict, (2, 3, 4)),
    "activations.ReLU": ((), dict, (2, 3, 4)),
    "activations.LeakyReLU": ((0.1,), dict, (2, 3, 4)),
    "activations.PReLU": ((3,), dict, (2, 3, 4)),
    "activations.ELU": ((), dict, (2, 3, 4)),
    "activations.GELU": ((), dict, (2, 3, 4)),
    "activations.SiLU": ((), dict, (2, 3, 4)),
    "linear.Linear": ((3, 2), lambda: {"rng": rng()}, (4, 3)),
    "normalization.BatchNorm1d": ((3,), dict, (4, 3)),
    "normalization.BatchNorm2d": ((3,), dict, (2, 3, 4, 5)),
    "normalization.LayerNorm": ((5,), dict, (2, 3, 5)),
    "normalization.RMSNorm": ((5,), dict, (2, 3, 5)),
    "normalization.GroupNorm": ((2, 4), dict, (2, 4, 3)),
    "normalization.InstanceNorm2d": ((3,), dict, (2, 3, 4, 5)),
    "dropout.Dropout": ((0.3,), lambda: {"rng": rng()}, (4, 5)),
    "blocks.MLPBlock": ((3, 4), lambda: {"rng": rng()}, (5, 3)),
}


def test_every_layer_has_a_case() -> None:
    assert sorted(LAYERS) == sorted(i for i in CLASS_IDS if not i.startswith("optim."))


def _layer_and_inputs(ns: ModuleType, exercise_id: str) -> tuple[Any, np.ndarray, np.ndarray]:
    args, kwargs, shape = LAYERS[exercise_id]
    layer = resolve(ns, exercise_id)(*args, **kwargs())
    gen = np.random.default_rng(SEED + 1)
    x = gen.standard_normal(shape)
    out_shape = {"linear.Linear": (shape[0], 2), "blocks.MLPBlock": (shape[0], 4)}.get(exercise_id, shape)
    dout = gen.standard_normal(out_shape)
    return layer, x, dout


def assert_not_implemented(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(NotImplementedError) as excinfo:
        call()
    assert str(excinfo.value) == message


@pytest.mark.parametrize("exercise_id", sorted(LAYERS))
def test_layer_stub_raises_with_its_exercise_id(stubs: ModuleType, exercise_id: str) -> None:
    layer, x, dout = _layer_and_inputs(stubs, exercise_id)
    assert_not_implemented(lambda: layer.forward(x), f"{exercise_id}.forward")
    assert_not_implemented(lambda: layer(x), f"{exercise_id}.forward")
    assert_not_implemented(lambda: layer.backward(dout), f"{exercise_id}.backward")


@pytest.mark.parametrize("exercise_id", sorted(LAYERS))
def test_the_same_layer_calls_succeed_on_the_reference(exercise_id: str) -> None:
    layer, x, dout = _layer_and_inputs(reference, exercise_id)
    y = layer.forward(x)
    assert y.shape == dout.shape
    assert layer.backward(dout).shape == x.shape


def test_mlpblock_train_and_eval_are_left_to_the_student(stubs: ModuleType) -> None:
    block = stubs.blocks.MLPBlock(3, 4, rng=rng())
    assert_not_implemented(block.train, "blocks.MLPBlock.train")
    assert_not_implemented(block.eval, "blocks.MLPBlock.eval")


def _optimizer_call(ns: ModuleType, exercise_id: str) -> tuple[Any, dict[str, np.ndarray], dict[str, np.ndarray]]:
    opt = resolve(ns, exercise_id)(0.1, momentum=0.9) if exercise_id == "optim.SGD" else resolve(ns, exercise_id)()
    gen = np.random.default_rng(SEED + 2)
    params = {"W": gen.standard_normal((3, 2)), "b": gen.standard_normal(3)}
    grads = {k: gen.standard_normal(v.shape) for k, v in params.items()}
    return opt, params, grads


@pytest.mark.parametrize("exercise_id", ["optim.SGD", "optim.AdamW"])
def test_optimizer_stub_raises_with_its_exercise_id(stubs: ModuleType, exercise_id: str) -> None:
    opt, params, grads = _optimizer_call(stubs, exercise_id)
    assert_not_implemented(lambda: opt.step(params, grads), f"{exercise_id}.step")


@pytest.mark.parametrize("exercise_id", ["optim.SGD", "optim.AdamW"])
def test_the_same_optimizer_call_succeeds_on_the_reference(exercise_id: str) -> None:
    opt, params, grads = _optimizer_call(reference, exercise_id)
    before = {k: v.copy() for k, v in params.items()}
    opt.step(params, grads)
    assert not np.array_equal(params["W"], before["W"])


def _function_call(ns: ModuleType, exercise_id: str) -> Callable[[], Any]:
    fn = resolve(ns, exercise_id)
    gen = np.random.default_rng(SEED + 3)
    if exercise_id.startswith("init."):
        return lambda: fn(4, 3, rng())
    if exercise_id == "gradcheck.numerical_gradient":
        x, dout = gen.standard_normal((2, 3)), gen.standard_normal((2, 3))
        return lambda: fn(np.tanh, x, dout)
    if exercise_id == "gradcheck.rel_error":
        a, b = gen.standard_normal(4), gen.standard_normal(4)
        return lambda: fn(a, b)
    if exercise_id == "blocks.fold_batchnorm":
        linear = ns.linear.Linear(3, 4, rng=rng())
        bn = ns.normalization.BatchNorm1d(4)
        return lambda: fn(linear, bn)
    if exercise_id == "approximation.fit_function":
        return lambda: fn(np.sin, 4, rng(), steps=2)
    raise AssertionError(f"no call for {exercise_id}")


@pytest.mark.parametrize("exercise_id", FUNCTION_IDS)
def test_function_stub_raises_with_its_exercise_id(stubs: ModuleType, exercise_id: str) -> None:
    assert_not_implemented(_function_call(stubs, exercise_id), exercise_id)


@pytest.mark.parametrize("exercise_id", FUNCTION_IDS)
def test_the_same_function_call_succeeds_on_the_reference(exercise_id: str) -> None:
    _function_call(reference, exercise_id)()


# ---------------------------------------------------------------- constructors


def assert_same_state(stub: Any, ref: Any, where: str) -> None:
    """The stub's attributes equal the reference's (names, types, shapes, dtypes, values).

    A reference attribute that is None after __init__ (a cache or gradient that
    forward/backward fills in) may be missing from the stub: creating it is
    the student's part.
    """
    if isinstance(ref, np.ndarray):
        assert isinstance(stub, np.ndarray), f"{where}: {type(stub).__name__}, expected an ndarray"
        assert stub.shape == ref.shape, f"{where}: shape {stub.shape}, expected {ref.shape}"
        assert stub.dtype == ref.dtype, f"{where}: dtype {stub.dtype}, expected {ref.dtype}"
        assert np.array_equal(stub, ref), f"{where}: values differ"
    elif isinstance(ref, np.random.Generator):
        assert isinstance(stub, np.random.Generator), f"{where}: {type(stub).__name__}, expected a Generator"
        assert stub.bit_generator.state == ref.bit_generator.state, f"{where}: generator in another state"
    elif isinstance(ref, ReferenceModule):
        assert type(stub).__name__ == type(ref).__name__, f"{where}: {type(stub).__name__}"
        assert_same_attributes(stub, ref, where)
    elif isinstance(ref, dict):
        assert isinstance(stub, dict) and stub.keys() == ref.keys(), f"{where}: {stub!r}, expected {ref!r}"
        for key in ref:
            assert_same_state(stub[key], ref[key], f"{where}[{key!r}]")
    else:
        assert type(stub) is type(ref) and stub == ref, f"{where}: {stub!r}, expected {ref!r}"


def assert_same_attributes(stub: Any, ref: Any, where: str) -> None:
    stub_attrs, ref_attrs = vars(stub), vars(ref)
    extra = set(stub_attrs) - set(ref_attrs)
    assert not extra, f"{where}: the stub sets {sorted(extra)}, the reference does not"
    missing = {k for k, v in ref_attrs.items() if k not in stub_attrs and v is not None}
    assert not missing, f"{where}: the stub does not set {sorted(missing)}"
    for name in stub_attrs:
        assert_same_state(stub_attrs[name], ref_attrs[name], f"{where}.{name}")


# (exercise id, args, kwargs factory): several configurations per class; a fresh
# seeded generator for each side, so seeded draws (Linear.W) must be identical.
CONSTRUCTORS: list[tuple[str, tuple[Any, ...], Callable[[], dict[str, Any]]]] = [
    ("activations.Sigmoid", (), dict),
    ("activations.Tanh", (), dict),
    ("activations.ReLU", (), dict),
    ("activations.LeakyReLU", (), dict),
    ("activations.LeakyReLU", (0.2,), dict),
    ("activations.PReLU", (), dict),
    ("activations.PReLU", (3, 0.1), dict),
    ("activations.ELU", (), dict),
    ("activations.ELU", (0.5,), dict),
    ("activations.GELU", (), dict),
    ("activations.GELU", ("tanh",), dict),
    ("activations.SiLU", (), dict),
    ("activations.SiLU", (1.702,), dict),
    ("linear.Linear", (5, 3), lambda: {"rng": rng()}),
    ("linear.Linear", (4, 6), lambda: {"bias": False, "rng": rng()}),
    ("normalization.BatchNorm1d", (3,), dict),
    ("normalization.BatchNorm1d", (4,), lambda: {"eps": 1e-3, "momentum": 0.2}),
    ("normalization.BatchNorm2d", (3,), dict),
    ("normalization.LayerNorm", (5,), dict),
    ("normalization.LayerNorm", ((3, 4),), lambda: {"eps": 1e-6}),
    ("normalization.RMSNorm", (5,), dict),
    ("normalization.RMSNorm", (2,), lambda: {"eps": 1e-8}),
    ("normalization.GroupNorm", (2, 6), dict),
    ("normalization.InstanceNorm2d", (3,), dict),
    ("dropout.Dropout", (), lambda: {"rng": rng()}),
    ("dropout.Dropout", (0.0,), lambda: {"rng": rng()}),
    ("dropout.Dropout", (1.0,), lambda: {"rng": rng()}),
    ("optim.SGD", (0.1,), dict),
    ("optim.SGD", (0.01,), lambda: {"momentum": 0.9, "weight_decay": 1e-4}),
    ("optim.AdamW", (), dict),
    ("optim.AdamW", (3e-4,), lambda: {"betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.0}),
    ("blocks.MLPBlock", (3, 4), lambda: {"rng": rng()}),
    ("blocks.MLPBlock", (2, 5), lambda: {"p": 0.5, "rng": rng()}),
]


def test_every_class_has_a_constructor_case() -> None:
    assert {case[0] for case in CONSTRUCTORS} == set(CLASS_IDS)


@pytest.mark.parametrize(("exercise_id", "args", "kwargs"), CONSTRUCTORS, ids=[f"{c[0]}{c[1]}" for c in CONSTRUCTORS])
def test_stub_init_builds_the_reference_state(
    stubs: ModuleType, exercise_id: str, args: tuple[Any, ...], kwargs: Callable[[], dict[str, Any]]
) -> None:
    stub = resolve(stubs, exercise_id)(*args, **kwargs())
    ref = resolve(reference, exercise_id)(*args, **kwargs())
    assert_same_attributes(stub, ref, exercise_id)
    if isinstance(ref, ReferenceModule):
        assert stub.training is True and ref.training is True


def test_stub_defaults_without_rng(stubs: ModuleType) -> None:
    """rng=None gives a fresh np.random.Generator; the shapes still match the reference."""
    linear = stubs.linear.Linear(5, 3)
    assert linear.W.shape == (3, 5) and linear.W.dtype == np.float64
    assert np.all(np.abs(linear.W) <= 1 / np.sqrt(5))
    assert isinstance(stubs.dropout.Dropout().rng, np.random.Generator)
    block = stubs.blocks.MLPBlock(3, 4)
    assert block.linear.b is None and block.linear.W.shape == (4, 3)
    assert block.drop.p == 0.2


@pytest.mark.parametrize(
    ("exercise_id", "args"),
    [
        ("dropout.Dropout", (-0.1,)),
        ("dropout.Dropout", (1.5,)),
        ("normalization.GroupNorm", (4, 6)),
        ("activations.GELU", ("erf",)),
    ],
)
def test_invalid_hyper_parameters_raise_value_error_in_both(
    stubs: ModuleType, exercise_id: str, args: tuple[Any, ...]
) -> None:
    with pytest.raises(ValueError):
        resolve(stubs, exercise_id)(*args)
    with pytest.raises(ValueError):
        resolve(reference, exercise_id)(*args)


# ---------------------------------------------------------------- OpenCL kernel stubs


def kernel_declarations(source: str) -> dict[str, list[str]]:
    """Kernel name -> parameter list, each parameter normalised to 'qualifiers type *name'."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    source = re.sub(r"//[^\n]*", " ", source)
    found: dict[str, list[str]] = {}
    for match in re.finditer(r"\b(?:__)?kernel\s+void\s+(\w+)\s*\(([^)]*)\)", source):
        name, params = match.group(1), match.group(2)
        assert name not in found, f"kernel {name} declared twice"
        found[name] = [re.sub(r"\s*\*\s*", " *", " ".join(p.split())) for p in params.split(",")]
    return found


def test_kernel_parser_normalises_spacing() -> None:
    text = "/* __kernel void hidden(int a) */\n__kernel void k(__global   const float*x,\n const int n) { }"
    assert kernel_declarations(text) == {"k": ["__global const float *x", "const int n"]}


def test_kernel_stub_files_are_exactly_the_spec_files() -> None:
    assert sorted(p.name for p in (EXERCISES_DIR / "kernels").glob("*.cl")) == sorted(KERNELS)


@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_kernel_stub_declares_exactly_the_spec_kernels(filename: str) -> None:
    source = (EXERCISES_DIR / "kernels" / filename).read_text()
    assert kernel_declarations(source) == KERNELS[filename]


@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_kernel_stub_bodies_are_empty(filename: str) -> None:
    """The student writes the body: the stub's body holds only comments."""
    source = (EXERCISES_DIR / "kernels" / filename).read_text()
    bodies = re.findall(r"\)\s*\{(.*?)\n\}", source, flags=re.S)
    assert len(bodies) == len(KERNELS[filename])
    for body in bodies:
        assert "TODO: implement" in body
        assert re.sub(r"/\*.*?\*/", "", body, flags=re.S).strip() == ""


@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_reference_kernels_have_the_spec_signatures(filename: str) -> None:
    path = REFERENCE_DIR / "opencl" / filename
    assert path.exists(), f"reference/opencl/{filename} is missing"
    declared = kernel_declarations(path.read_text())
    for name, params in KERNELS[filename].items():
        assert declared.get(name) == params, f"reference/opencl/{filename}: {name}"


@pytest.mark.opencl
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_kernel_stub_builds_on_the_opencl_device(filename: str) -> None:
    import pyopencl as cl

    device = next(d for p in cl.get_platforms() for d in p.get_devices())
    context = cl.Context([device])
    program = cl.Program(context, (EXERCISES_DIR / "kernels" / filename).read_text()).build()
    kernels = {k.function_name: k for k in program.all_kernels()}
    assert set(kernels) == set(KERNELS[filename])
    for name, params in KERNELS[filename].items():
        assert kernels[name].num_args == len(params), name
