"""The reference's results as sums of named terms, and its reductions over other axes (live only).

``terms(exercise_id, case) -> {key: ([(name, array), ...], groups)} | None``: for a case that runs the
layer's training forward on array ``x`` (and its backward on ``dout``; parameters ``param_gamma``,
``param_beta``), the terms whose sum is the reference's ``y`` (a normalisation: gamma x / sigma -
gamma mu / sigma + beta) and ``dx``, each named as the exercise's docstring writes it, and the axes
that index the normalised groups (a per-group factor is constant over the others; None: no groups),
for the generic diagnosis ``generic-terms``. The formulas are the reference's
(reference/normalization.py, reference/activations.py), term by term:

- normalisation over axes A (BatchNorm: every axis but 1; LayerNorm: the trailing ones; InstanceNorm2d:
  2 and 3; GroupNorm: each group of channels), g = dout * gamma:
  dx = g / sigma - mean_A(g) / sigma - x_hat * mean_A(g * x_hat) / sigma;
- RMSNorm: dx = dout gamma / RMS - x sum(dout gamma x) / (D RMS^3);
- Sigmoid: dout y - dout y^2; Tanh: dout - dout y^2; SiLU: dout s + dout beta x s (1 - s);
  GELU: dout Phi(x) + dout x phi(x) (exact), dout (1 + t) / 2 + dout x (1 - t^2) c (1 + 3 k x^2) / 2 (tanh).

This module states the answers: it stays on the instructor's side (a case pack has no terms).
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np

from grader.student.engine.ops import Case

Terms = dict[str, tuple[list[tuple[str, np.ndarray]], tuple[int, ...] | None]]


def _layer_op(exercise_id: str, case: Case, backward: bool = True) -> dict[str, Any] | None:
    """The case's ``new`` op of the exercise's layer, when the case runs that layer's training forward on
    array ``x`` (and, with ``backward``, its backward on ``dout``), with no state set beforehand."""
    op = next(
        (o for o in case.script if o.get("op") == "new" and o.get("cls") == exercise_id and o.get("var") == "m"), None
    )
    methods = [o.get("method") for o in case.script if o.get("op") == "call" and o.get("var") == "m"]
    if (
        op is None
        or "forward" not in methods
        or "eval" in methods
        or "x" not in case.arrays
        or backward
        and ("backward" not in methods or "dout" not in case.arrays)
    ):
        return None
    if any(
        o.get("op") == "set" and o.get("var") == "m" and o.get("attr") not in ("gamma", "beta", "W", "b")
        for o in case.script
    ):
        return None
    return op


def _setting(exercise_id: str, op: dict[str, Any], name: str) -> Any:
    """A constructor setting of the case's layer: given, else the reference's default."""
    kwargs = op.get("kwargs") or {}
    if name in kwargs:
        return kwargs[name]
    import reference

    topic, cls = exercise_id.split(".")
    return inspect.signature(getattr(getattr(reference, topic), cls).__init__).parameters[name].default


def _normalised(
    x: np.ndarray,
    dout: np.ndarray,
    gamma: np.ndarray,
    eps: float,
    axes: tuple[int, ...],
    groups: tuple[int, ...] | None,
) -> tuple[list[tuple[str, np.ndarray]], tuple[int, ...] | None]:
    """dx = g / sigma - mean(g) / sigma - x_hat mean(g x_hat) / sigma, g = dout gamma, means over ``axes``."""
    mean = x.mean(axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    x_hat = (x - mean) * inv_std
    g = dout * gamma
    named = [
        ("g/sigma", inv_std * g),
        ("-mean(g)/sigma", -inv_std * g.mean(axis=axes, keepdims=True)),
        ("-x_hat*mean(g*x_hat)/sigma", -inv_std * x_hat * (g * x_hat).mean(axis=axes, keepdims=True)),
    ]
    return [(name, np.broadcast_to(term, x.shape).copy()) for name, term in named], groups


def terms(exercise_id: str, case: Case, student: dict[str, np.ndarray] | None = None) -> Terms | None:
    """The named terms of the reference's y and dx on ``case`` (see the module docstring), and of BatchNorm's running
    statistics after each step, from the student's own previous values (``student``: their outputs), or None."""
    found: Terms = {}
    forward = _forward_terms(exercise_id, case)
    if forward:
        found["y"] = forward
    backward = _backward_terms(exercise_id, case)
    if backward:
        found["dx"] = backward
    found.update(_running_terms(exercise_id, case, student or {}))
    return found or None


def _running_terms(exercise_id: str, case: Case, student: dict[str, np.ndarray]) -> Terms:
    """BatchNorm's running statistics after step k as (1 - momentum) * (the student's own value after step k - 1)
    + momentum * the batch's statistic (the variance unbiased: times m / (m - 1)); initial zeros and ones."""
    if exercise_id not in ("normalization.BatchNorm1d", "normalization.BatchNorm2d"):
        return {}
    op = next((o for o in case.script if o.get("op") == "new" and o.get("cls") == exercise_id), None)
    if op is None or any(o.get("op") in ("set", "let") or o.get("method") in ("eval", "backward") for o in case.script):
        return {}
    momentum = _setting(exercise_id, op, "momentum")
    found: Terms = {}
    steps = [o for o in case.script if o.get("op") == "call" and o.get("method") == "forward"]
    previous: dict[str, np.ndarray | None] = {"running_mean": None, "running_var": None}
    for k, call in enumerate(steps, start=1):
        source = (call.get("args") or [{}])[0]
        x = case.arrays.get(source.get("array", "")) if isinstance(source, dict) else None
        if x is None:
            return found
        axes = tuple(a for a in range(x.ndim) if a != 1)
        m = x.size // x.shape[1]
        if m <= 1:
            return found  # (training raises there: no running statistics to explain)
        stats = {
            "running_mean": ("batch_mean", x.mean(axis=axes)),
            "running_var": ("batch_var*m/(m-1)", x.var(axis=axes) * m / (m - 1)),
        }
        for name, (said, value) in stats.items():
            before = previous[name]
            if before is None:
                before = (
                    np.zeros(x.shape[1])
                    if name == "running_mean" and k == 1
                    else np.ones(x.shape[1])
                    if k == 1
                    else None
                )
            if before is None or np.shape(before) != value.shape:
                continue
            found[f"{name}_{k}"] = (
                [
                    (f"(1-momentum)*{name}", (1.0 - momentum) * np.asarray(before, dtype=np.float64)),
                    (f"momentum*{said}", momentum * value),
                ],
                None,
            )
            previous[name] = student.get(f"{name}_{k}")
    return found


def _forward_terms(exercise_id: str, case: Case) -> tuple[list[tuple[str, np.ndarray]], tuple[int, ...] | None] | None:
    """A normalisation's training forward as y = gamma x / sigma - gamma mu / sigma + beta (statistics over its
    axes; GroupNorm's per group of channels)."""
    op = _layer_op(exercise_id, case, backward=False)
    name = exercise_id.split(".")[1]
    if op is not None and name == "Linear" and "param_W" in case.arrays and "param_b" in case.arrays:
        x = np.asarray(case.arrays["x"], dtype=np.float64)
        y = x @ case.arrays["param_W"].T
        return [("x@W.T", y), ("b", np.broadcast_to(case.arrays["param_b"], y.shape).copy())], None
    gamma, beta = case.arrays.get("param_gamma"), case.arrays.get("param_beta")
    if (
        op is None
        or name not in ("BatchNorm1d", "BatchNorm2d", "LayerNorm", "InstanceNorm2d", "GroupNorm")
        or gamma is None
        or beta is None
    ):
        return None
    x = np.asarray(case.arrays["x"], dtype=np.float64)
    eps = _setting(exercise_id, op, "eps")
    channel = (1, -1) + (1,) * (x.ndim - 2)
    if name == "GroupNorm":
        grouped = x.reshape(x.shape[0], int(_setting(exercise_id, op, "num_groups")), -1)
        mean = np.broadcast_to(grouped.mean(axis=2, keepdims=True), grouped.shape).reshape(x.shape)
        sigma = np.broadcast_to(np.sqrt(grouped.var(axis=2, keepdims=True) + eps), grouped.shape).reshape(x.shape)
        g, b, groups = np.reshape(gamma, channel), np.reshape(beta, channel), None
    else:
        if name == "LayerNorm":
            axes = tuple(range(x.ndim - np.ndim(gamma), x.ndim))
            g, b, groups = gamma, beta, tuple(range(x.ndim - np.ndim(gamma)))
        else:
            axes = (2, 3) if name == "InstanceNorm2d" else tuple(a for a in range(x.ndim) if a != 1)
            g, b = np.reshape(gamma, channel), np.reshape(beta, channel)
            groups = (0, 1) if name == "InstanceNorm2d" else (1,)
        mean = x.mean(axis=axes, keepdims=True)
        sigma = np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    named = [("gamma*x/sigma", g * x / sigma), ("-gamma*mean/sigma", -g * mean / sigma), ("beta", b)]
    return [(n, np.broadcast_to(t, x.shape).copy()) for n, t in named], groups


def _backward_terms(exercise_id: str, case: Case) -> tuple[list[tuple[str, np.ndarray]], tuple[int, ...] | None] | None:
    """The reference's dx on ``case`` as named terms (see the module docstring)."""
    op = _layer_op(exercise_id, case)
    if op is None:
        return None
    x = np.asarray(case.arrays["x"], dtype=np.float64)
    dout = np.asarray(case.arrays["dout"], dtype=np.float64)
    gamma = case.arrays.get("param_gamma")
    name = exercise_id.split(".")[1]
    if exercise_id.startswith("normalization.") and gamma is None:
        return None
    if gamma is None:  # (not a normalisation layer: every one of them has gamma)
        return _activation_terms(exercise_id, name, op, x, dout)
    if name in ("BatchNorm1d", "BatchNorm2d"):
        view = (1, -1) + (1,) * (x.ndim - 2)
        axes = tuple(a for a in range(x.ndim) if a != 1)
        return _normalised(x, dout, np.reshape(gamma, view), _setting(exercise_id, op, "eps"), axes, (1,))
    if name == "LayerNorm":
        k = np.ndim(gamma)
        axes = tuple(range(x.ndim - k, x.ndim))
        return _normalised(x, dout, gamma, _setting(exercise_id, op, "eps"), axes, tuple(range(x.ndim - k)))
    if name == "InstanceNorm2d":
        return _normalised(x, dout, np.reshape(gamma, (1, -1, 1, 1)), _setting(exercise_id, op, "eps"), (2, 3), (0, 1))
    if name == "GroupNorm":
        groups = int(_setting(exercise_id, op, "num_groups"))
        grouped = x.reshape(x.shape[0], groups, -1)
        g = (dout * np.reshape(gamma, (1, -1) + (1,) * (x.ndim - 2))).reshape(grouped.shape)
        found, _ = _normalised(grouped, g, np.ones(1), _setting(exercise_id, op, "eps"), (2,), None)
        return [(n, t.reshape(x.shape)) for n, t in found], None
    if name == "RMSNorm":
        eps = _setting(exercise_id, op, "eps")
        rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps)
        total = np.sum(dout * gamma * x, axis=-1, keepdims=True)
        return (
            [
                ("dout*gamma/RMS", dout * gamma / rms),
                ("-x*sum(dout*gamma*x)/(D*RMS^3)", -x / (x.shape[-1] * rms**3) * total),
            ],
            tuple(range(x.ndim - 1)),
        )
    return _activation_terms(exercise_id, name, op, x, dout)


def _activation_terms(
    exercise_id: str, name: str, op: dict[str, Any], x: np.ndarray, dout: np.ndarray
) -> tuple[list[tuple[str, np.ndarray]], tuple[int, ...] | None] | None:
    from reference.activations import _phi_cdf, _sigmoid

    if name == "Sigmoid":
        y = _sigmoid(x)
        return [("dout*y", dout * y), ("-dout*y^2", -dout * y * y)], None
    if name == "Tanh":
        y = np.tanh(x)
        return [("dout", dout), ("-dout*y^2", -dout * y * y)], None
    if name == "SiLU":
        beta = _setting(exercise_id, op, "beta")
        s = _sigmoid(beta * x)
        return [("dout*s", dout * s), ("dout*beta*x*s*(1-s)", dout * beta * x * s * (1 - s))], None
    if name == "GELU":
        if _setting(exercise_id, op, "approximate") == "tanh":
            c = math.sqrt(2.0 / math.pi)
            t = np.tanh(c * (x + 0.044715 * x**3))
            return [
                ("dout*(1+t)/2", dout * 0.5 * (1 + t)),
                ("dout*x*(1-t^2)*c*(1+3*0.044715*x^2)/2", dout * 0.5 * x * (1 - t**2) * c * (1 + 3 * 0.044715 * x**2)),
            ], None
        with np.errstate(under="ignore"):
            pdf = np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
        return [("dout*Phi(x)", dout * _phi_cdf(x)), ("dout*x*phi(x)", dout * x * pdf)], None
    return None


# --------------------------------------------------------------------------- reduction axes (generic-axes)

# Reduction axes by rule, for an input of ndim axes: what a student may have written instead of the right ones.
AXIS_RULES: dict[str, Any] = {
    "axis 0 only": lambda nd: (0,),
    "axis 1 only": lambda nd: (1,) if nd > 1 else None,
    "the last axis only": lambda nd: (nd - 1,),
    "every axis": lambda nd: tuple(range(nd)),
    "every axis but 1": lambda nd: tuple(a for a in range(nd) if a != 1) if nd > 1 else None,
    "every axis but 0": lambda nd: tuple(range(1, nd)) if nd > 1 else None,
    "every axis but the last": lambda nd: tuple(range(nd - 1)) if nd > 1 else None,
    "axes 2 and after": lambda nd: tuple(range(2, nd)) if nd > 2 else None,
}


# The backward's means that may be taken over other axes (dx = (g - mean(g) - x_hat mean(g x_hat)) / sigma).
BACKWARD_MEANS = ("backward means", "the mean of g", "the mean of g * x_hat")
# What may be reduced over other axes: the forward's statistics, the parameter gradients' sums, the backward's means.
REDUCTIONS = ("statistics", "mean", "variance", "parameter gradients", "dgamma", "dbeta", "db") + BACKWARD_MEANS
# The outputs each reduction changes.
REDUCTION_KEYS = {
    "statistics": ("y",),
    "mean": ("y",),
    "variance": ("y",),
    "parameter gradients": ("dgamma", "dbeta"),
    "dgamma": ("dgamma",),
    "dbeta": ("dbeta",),
    "db": ("db",),
    **{what: ("dx",) for what in BACKWARD_MEANS},
}
SUMS = ("parameter gradients", "dgamma", "dbeta", "db")  # reductions whose right axes are the parameters' sums


def axis_variant(exercise_id: str, case: Case, rule: str, what: str) -> dict[str, np.ndarray] | None:
    """The reference's results of ``case`` with one reduction over the axes of ``rule`` (see AXIS_RULES).

    ``what``: 'statistics' (mean and variance; RMSNorm: the mean square), 'mean' (the mean only),
    'variance' (the variance only): the forward's y; 'parameter gradients' (dgamma and dbeta), 'dgamma',
    'dbeta', 'db' (Linear): those sums over those axes (their shape follows); 'backward means', 'the mean
    of g', 'the mean of g * x_hat': dx with those means over those axes. GroupNorm's statistics' axes are
    those of x reshaped (N, groups, -1). None when the rule gives the right axes or does not apply.
    """
    op = _layer_op(exercise_id, case)
    name = exercise_id.split(".")[1]
    if op is None:
        return None
    x = np.asarray(case.arrays["x"], dtype=np.float64)
    dout = np.asarray(case.arrays["dout"], dtype=np.float64)
    axes = AXIS_RULES[rule](x.ndim)
    if name == "Linear":  # db sums dout over every axis but the last
        if what != "db" or axes is None or tuple(sorted(axes)) == tuple(range(x.ndim - 1)):
            return None
        return {"db": np.sum(dout, axis=axes)}
    gamma, beta = case.arrays.get("param_gamma"), case.arrays.get("param_beta")
    if (
        gamma is None
        or what == "db"
        or name not in ("BatchNorm1d", "BatchNorm2d", "LayerNorm", "InstanceNorm2d", "RMSNorm", "GroupNorm")
    ):
        return None
    if name == "GroupNorm" and what not in SUMS:
        return _grouped_variant(
            x,
            dout,
            gamma,
            beta,
            int(_setting(exercise_id, op, "num_groups")),
            _setting(exercise_id, op, "eps"),
            rule,
            what,
        )
    right, summed = _right_axes(name, x, gamma)
    if axes is None or tuple(sorted(axes)) == (summed if what in SUMS else right):
        return None
    view = (
        (1, -1) + (1,) * (x.ndim - 2) if name in ("BatchNorm1d", "BatchNorm2d", "InstanceNorm2d") else np.shape(gamma)
    )
    g, b = np.reshape(gamma, view), (0.0 if beta is None else np.reshape(beta, view))
    eps = _setting(exercise_id, op, "eps")
    if name == "RMSNorm":
        if what not in ("statistics", "dgamma"):
            return None  # (the mean square is its only statistic, dgamma its only sum)
        rms = np.sqrt(np.mean(x**2, axis=axes if what == "statistics" else right, keepdims=True) + eps)
        return {"y": x / rms * g} if what == "statistics" else {"dgamma": np.sum(dout * x / rms, axis=axes)}
    if what in BACKWARD_MEANS:  # dx with its mean of g, of g * x_hat or both over ``axes``; the forward right
        inv_std = 1.0 / np.sqrt(x.var(axis=right, keepdims=True) + eps)
        x_hat = (x - x.mean(axis=right, keepdims=True)) * inv_std
        gg = dout * g
        first = axes if what in ("backward means", "the mean of g") else right
        second = axes if what in ("backward means", "the mean of g * x_hat") else right
        return {
            "dx": inv_std
            * (gg - gg.mean(axis=first, keepdims=True) - x_hat * (gg * x_hat).mean(axis=second, keepdims=True))
        }
    mean_axes = axes if what in ("statistics", "mean") else right
    var_axes = axes if what in ("statistics", "variance") else right
    x_hat = (x - x.mean(axis=mean_axes, keepdims=True)) / np.sqrt(x.var(axis=var_axes, keepdims=True) + eps)
    if what in SUMS:
        found = {}
        if what in ("parameter gradients", "dgamma"):
            found["dgamma"] = np.sum(dout * x_hat, axis=axes)
        if what in ("parameter gradients", "dbeta") and beta is not None:
            found["dbeta"] = np.sum(dout, axis=axes)
        return found or None
    return {"y": g * x_hat + b}


def _grouped_variant(
    x: np.ndarray,
    dout: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray | None,
    groups: int,
    eps: float,
    rule: str,
    what: str,
) -> dict[str, np.ndarray] | None:
    """GroupNorm's :func:`axis_variant`: the rule's axes are those of x reshaped (N, groups, -1) (right: axis 2)."""
    grouped = x.reshape(x.shape[0], groups, -1)
    axes = AXIS_RULES[rule](grouped.ndim)
    if axes is None or tuple(sorted(axes)) == (2,):
        return None
    view = (1, -1) + (1,) * (x.ndim - 2)
    g, b = np.reshape(gamma, view), (0.0 if beta is None else np.reshape(beta, view))
    right = (2,)
    if what in BACKWARD_MEANS:
        inv_std = 1.0 / np.sqrt(grouped.var(axis=right, keepdims=True) + eps)
        x_hat = (grouped - grouped.mean(axis=right, keepdims=True)) * inv_std
        gg = (dout * g).reshape(grouped.shape)
        first = axes if what in ("backward means", "the mean of g") else right
        second = axes if what in ("backward means", "the mean of g * x_hat") else right
        dx = inv_std * (gg - gg.mean(axis=first, keepdims=True) - x_hat * (gg * x_hat).mean(axis=second, keepdims=True))
        return {"dx": dx.reshape(x.shape)}
    mean_axes = axes if what in ("statistics", "mean") else right
    var_axes = axes if what in ("statistics", "variance") else right
    x_hat = (grouped - grouped.mean(axis=mean_axes, keepdims=True)) / np.sqrt(
        grouped.var(axis=var_axes, keepdims=True) + eps
    )
    return {"y": g * x_hat.reshape(x.shape) + b}


def _right_axes(name: str, x: np.ndarray, gamma: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The reference's reduction axes of a normalisation layer on ``x``: (statistics, parameter gradients' sums)."""
    if name in ("BatchNorm1d", "BatchNorm2d", "GroupNorm"):  # (GroupNorm: its parameter gradients' sums)
        every_but_1 = tuple(a for a in range(x.ndim) if a != 1)
        return every_but_1, every_but_1
    if name == "InstanceNorm2d":
        return (2, 3), (0, 2, 3)
    k = np.ndim(gamma)
    return tuple(range(x.ndim - k, x.ndim)), tuple(range(x.ndim - k))
