"""reference.opencl SGD and AdamW (float32 kernels) against the CPU reference (float64).

Ten steps from the same start with the same gradients (float32 values, float64
on the CPU). Tolerance on the parameters after every step: rtol 1e-5,
atol 1e-5 (a handful of float32 roundings per step, on values of order 1).
Parameter sizes (1, 67, 5 x 13) are not multiples of the work-group size.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import optim as cpu
from reference.opencl import optim as gpu

pytestmark = pytest.mark.opencl

SHAPES = {"W": (5, 13), "b": (67,), "s": (1,)}
CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.01}),
    ("AdamW", {}),
    ("AdamW", {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
]


def start(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}


def to_device(params: dict[str, np.ndarray]) -> dict:
    import pyopencl.array as cl_array

    from reference.opencl import get_queue

    return {k: cl_array.to_device(get_queue(), v) for k, v in params.items()}


@pytest.mark.parametrize("name,kwargs", CASES)
@pytest.mark.parametrize("where", ["numpy", "device"])
def test_ten_steps_match_cpu(name: str, kwargs: dict, where: str) -> None:
    host = start(1)
    ref = {k: v.astype(np.float64) for k, v in host.items()}
    params = host if where == "numpy" else to_device(host)
    originals = dict(params)  # the same objects must be updated in place
    opt, ref_opt = getattr(gpu, name)(**kwargs), getattr(cpu, name)(**kwargs)
    rng = np.random.default_rng(2)
    for _ in range(10):
        grads = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
        before = {k: g.copy() for k, g in grads.items()}
        opt.step(params, grads)
        ref_opt.step(ref, {k: g.astype(np.float64) for k, g in grads.items()})
        for k in SHAPES:
            assert params[k] is originals[k]
            value = params[k]
            if not isinstance(value, np.ndarray):  # where == "device": a pyopencl Array
                value = value.get()
            np.testing.assert_allclose(value, ref[k], rtol=1e-5, atol=1e-5, err_msg=f"param {k}")
            np.testing.assert_array_equal(grads[k], before[k])  # grads are not modified


def test_device_gradients_for_numpy_parameters() -> None:
    params = start(3)
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    grads = start(4)
    gpu.AdamW(lr=0.01).step(params, to_device(grads))
    cpu.AdamW(lr=0.01).step(ref, {k: g.astype(np.float64) for k, g in grads.items()})
    for k in SHAPES:
        np.testing.assert_allclose(params[k], ref[k], rtol=1e-5, atol=1e-5)


def test_state_is_kept_per_key() -> None:
    opt = gpu.AdamW(lr=0.1)
    a, b = start(5), start(5)
    opt.step({"W": a["W"]}, {"W": np.ones((5, 13), np.float32)})
    opt.step({"W": a["W"], "b": b["b"]}, {"W": np.ones((5, 13), np.float32), "b": np.ones(67, np.float32)})
    assert opt.t == {"W": 2, "b": 1}


def test_errors_name_the_parameter() -> None:
    with pytest.raises(gpu.ParameterError, match=r"grads\['W'\] has shape"):
        gpu.SGD(lr=0.1).step({"W": np.zeros((2, 3), np.float32)}, {"W": np.zeros((3, 2), np.float32)})
    with pytest.raises(gpu.ParameterError, match="NumPy or pyopencl array"):
        gpu.SGD(lr=0.1).step({"W": [1.0, 2.0]}, {"W": np.zeros(2, np.float32)})
