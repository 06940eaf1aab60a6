"""Reference calls of parameterised questions: each probe builds the reference
layer, initialiser or optimiser a question is about, runs it on the student's
numbers and returns the one number asked for.

A probe holds no formula of its own: it receives the ``reference`` package
(``ref``) and only wires inputs and outputs, so without ``reference`` nothing
here can compute an answer (the student handout ships without it). Probes are
named in the quiz files as ``reference = "probe_name(arg=param, ...)"``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np


class _ScaleRecorder:
    """A stand-in generator: ``normal`` returns its scale, ``uniform`` its upper bound.

    The initialisers draw through it, so the array they return is filled with
    the exact standard deviation or bound they use.
    """

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> np.ndarray:
        return np.full(size, float(scale))

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> np.ndarray:
        return np.full(size, float(high))

    def random(self, size: Any = None) -> np.ndarray:
        """Every u = 1, so dropout keeps every unit (u >= p for every p < 1)."""
        return np.ones(size)


def _row(values: list[float]) -> np.ndarray:
    return np.array([values], dtype=np.float64)


# --- activations ------------------------------------------------------------------


def gelu(ref: ModuleType, x: float) -> float:
    """The exact GELU at x."""
    return float(ref.activations.GELU().forward(_row([x]))[0, 0])


def elu(ref: ModuleType, x: float, alpha: float) -> float:
    """ELU(x) with the given alpha."""
    return float(ref.activations.ELU(alpha=alpha).forward(_row([x]))[0, 0])


def silu_derivative(ref: ModuleType, x: float, beta: float) -> float:
    """d/dx of x·σ(βx) at x (Swish's backward with upstream gradient 1)."""
    act = ref.activations.SiLU(beta=beta)
    act.forward(_row([x]))
    return float(act.backward(_row([1.0]))[0, 0])


def prelu_dalpha(ref: ModuleType, x: list[float], alpha: float) -> float:
    """PReLU's gradient with respect to its single alpha for upstream gradient 1 on every element."""
    act = ref.activations.PReLU(num_parameters=1, init=alpha)
    act.forward(_row(x))
    act.backward(np.ones((1, len(x))))
    return float(act.dalpha[0])


# --- normalization ------------------------------------------------------------------


def layernorm_output(ref: ModuleType, x: list[float], eps: float, index: int) -> float:
    """LayerNorm (γ = 1, β = 0) of one token x: output element ``index``."""
    return float(ref.normalization.LayerNorm(len(x), eps=eps).forward(_row(x))[0, index])


def rmsnorm_output(ref: ModuleType, x: list[float], eps: float, index: int) -> float:
    """RMSNorm (γ = 1) of one token x: output element ``index``."""
    return float(ref.normalization.RMSNorm(len(x), eps=eps).forward(_row(x))[0, index])


def batchnorm_running_var(ref: ModuleType, batches: list[list[float]], momentum: float) -> float:
    """running_var of a one-channel BatchNorm1d (starting at 1) after training forwards on ``batches``."""
    bn = ref.normalization.BatchNorm1d(1, momentum=momentum)
    bn.train()
    for batch in batches:
        bn.forward(np.array(batch, dtype=np.float64).reshape(-1, 1))
    return float(bn.running_var[0])


def batchnorm_running_mean(ref: ModuleType, batches: list[list[float]], momentum: float) -> float:
    """running_mean of a one-channel BatchNorm1d (starting at 0) after training forwards on ``batches``."""
    bn = ref.normalization.BatchNorm1d(1, momentum=momentum)
    bn.train()
    for batch in batches:
        bn.forward(np.array(batch, dtype=np.float64).reshape(-1, 1))
    return float(bn.running_mean[0])


def batchnorm_eval_output(ref: ModuleType, x: float, mean: float, var: float, gamma: float, beta: float) -> float:
    """A one-channel BatchNorm1d in eval mode with these running statistics and parameters, at x."""
    bn = ref.normalization.BatchNorm1d(1)
    bn.running_mean[:] = mean
    bn.running_var[:] = var
    bn.gamma[:] = gamma
    bn.beta[:] = beta
    bn.eval()
    return float(bn.forward(np.array([[x]]))[0, 0])


# --- dropout and weight decay ---------------------------------------------------------


def dropout_kept_value(ref: ModuleType, a: float, p: float) -> float:
    """Inverted dropout in training: the output of a unit with input a that is kept."""
    drop = ref.dropout.Dropout(p=p, rng=_ScaleRecorder())
    drop.train()
    return float(drop.forward(_row([a]))[0, 0])


def dropout_output_variance(ref: ModuleType, a: float, p: float) -> float:
    """Var of inverted dropout's output for a constant input a: kept (probability 1 - p) it is the
    reference's kept value v, dropped it is 0, so Var = (1 - p)·v² - ((1 - p)·v)²."""
    kept = dropout_kept_value(ref, a, p)
    return float((1 - p) * kept**2 - ((1 - p) * kept) ** 2)


def sgd_step(ref: ModuleType, w: float, grad: float, lr: float, weight_decay: float) -> float:
    """w after one PyTorch SGD step (coupled L2, no momentum)."""
    params = {"w": np.array([w])}
    ref.optim.SGD(lr=lr, weight_decay=weight_decay).step(params, {"w": np.array([grad])})
    return float(params["w"][0])


def adamw_first_step(ref: ModuleType, w: float, grad: float, lr: float, weight_decay: float) -> float:
    """w after the first PyTorch AdamW step (decoupled decay, default betas and eps)."""
    params = {"w": np.array([w])}
    ref.optim.AdamW(lr=lr, weight_decay=weight_decay).step(params, {"w": np.array([grad])})
    return float(params["w"][0])


def rel_error(ref: ModuleType, a: float, b: float) -> float:
    """rel_error of two one-element gradients."""
    return float(ref.gradcheck.rel_error(np.array([a]), np.array([b])))


# --- initialisation -------------------------------------------------------------------


def kaiming_normal_std(ref: ModuleType, fan_in: int, fan_out: int, negative_slope: float) -> float:
    """The standard deviation kaiming_normal draws with (mode fan_in)."""
    w = ref.init.kaiming_normal(fan_in, fan_out, _ScaleRecorder(), mode="fan_in", negative_slope=negative_slope)
    return float(w[0, 0])


def kaiming_normal_std_fan_out(ref: ModuleType, fan_in: int, fan_out: int, negative_slope: float) -> float:
    """The standard deviation kaiming_normal draws with in mode fan_out (the backward pass's fan)."""
    w = ref.init.kaiming_normal(fan_in, fan_out, _ScaleRecorder(), mode="fan_out", negative_slope=negative_slope)
    return float(w[0, 0])


def xavier_uniform_bound(ref: ModuleType, fan_in: int, fan_out: int) -> float:
    """The bound a of xavier_uniform's U(-a, a) (gain 1)."""
    return float(ref.init.xavier_uniform(fan_in, fan_out, _ScaleRecorder())[0, 0])


def kaiming_uniform_bound(ref: ModuleType, fan_in: int, fan_out: int, negative_slope: float) -> float:
    """The bound b of kaiming_uniform's U(-b, b) (mode fan_in)."""
    w = ref.init.kaiming_uniform(fan_in, fan_out, _ScaleRecorder(), mode="fan_in", negative_slope=negative_slope)
    return float(w[0, 0])


# --- universal approximation ------------------------------------------------------------


def mlp_parameter_count(ref: ModuleType, inputs: int, width: int, outputs: int) -> float:
    """Weights and biases of Linear(inputs, width) -> activation -> Linear(width, outputs)."""
    rng = np.random.default_rng(0)
    layers = [ref.linear.Linear(inputs, width, rng=rng), ref.linear.Linear(width, outputs, rng=rng)]
    return float(sum(layer.W.size + layer.b.size for layer in layers))


def _two_unit_network(
    ref: ModuleType, activation: Any, w: list[float], b: list[float], alpha: list[float], x: float
) -> float:
    """Σ_i alpha_i act(w_i x + b_i): one input, two hidden units, a linear output without bias."""
    hidden = ref.linear.Linear(1, len(w), rng=np.random.default_rng(0))
    hidden.W[:, 0] = w
    hidden.b[:] = b
    out = ref.linear.Linear(len(w), 1, bias=False, rng=np.random.default_rng(0))
    out.W[0, :] = alpha
    return float(out.forward(activation.forward(hidden.forward(np.array([[x]]))))[0, 0])


def sigmoid_network_output(ref: ModuleType, w: list[float], b: list[float], alpha: list[float], x: float) -> float:
    """Cybenko's sum Σ alpha_i σ(w_i x + b_i) at x, through the reference Linear and Sigmoid."""
    return _two_unit_network(ref, ref.activations.Sigmoid(), w, b, alpha, x)


def relu_network_output(ref: ModuleType, w: list[float], b: list[float], alpha: list[float], x: float) -> float:
    """Σ alpha_i ReLU(w_i x + b_i) at x, through the reference Linear and ReLU."""
    return _two_unit_network(ref, ref.activations.ReLU(), w, b, alpha, x)


Probe = Callable[..., float]
PROBES: dict[str, Probe] = {
    f.__name__: f
    for f in (
        gelu,
        elu,
        silu_derivative,
        prelu_dalpha,
        layernorm_output,
        rmsnorm_output,
        batchnorm_running_var,
        batchnorm_running_mean,
        batchnorm_eval_output,
        dropout_kept_value,
        dropout_output_variance,
        sgd_step,
        adamw_first_step,
        rel_error,
        kaiming_normal_std,
        kaiming_normal_std_fan_out,
        xavier_uniform_bound,
        kaiming_uniform_bound,
        mlp_parameter_count,
        sigmoid_network_output,
        relu_network_output,
    )
}
