"""Every marked claim of the course text (``<!-- claim: ID -->`` after a piece of maths) is computed here from
the reference implementations (reference/). A number claim is read from the text, so editing the number
breaks its test; a formula claim must be the LaTeX registered below (editing it breaks the test until the new
formula is checked here) and its check evaluates that formula against the reference."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from reference import activations as act
from reference import dropout as drop
from reference import normalization as norm
from reference import optim
from grader.student.coursetext import load_chapters

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(46)
Z = np.linspace(-12.0, 12.0, 240001)  # E over N(0, 1): a fine grid weighted by the density (ReLU has a kink)
W = np.exp(-(Z**2) / 2) / math.sqrt(2 * math.pi) * (Z[1] - Z[0])


def number(latex: str) -> float:
    """A number as the text writes it in maths: -0.8, 5 \\times 10^{-4}."""
    latex = latex.replace(" ", "")
    match = re.fullmatch(r"(-?[\d.]+)(?:\\times10\^\{(-?\d+)\})?", latex)
    assert match, f"not a number: {latex!r}"
    return float(match.group(1)) * 10.0 ** int(match.group(2) or 0)


def gelu_minimum() -> tuple[float, float]:
    """GELU's minimum from the reference: bisection on its backward (the derivative) between -1 and -1/2."""

    def slope(x: float) -> float:
        layer = act.GELU()
        layer.forward(np.array([x]))
        return float(layer.backward(np.array([1.0]))[0])

    lo, hi = -1.0, -0.5
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
    return lo, float(act.GELU().forward(np.array([lo]))[0])


def grad(layer: object, x: np.ndarray, dout: np.ndarray) -> np.ndarray:
    layer.forward(x)  # type: ignore[attr-defined]
    return layer.backward(dout)  # type: ignore[attr-defined]


def check_gelu_derivatives() -> None:
    x = np.linspace(-4, 4, 801)
    layer = act.GELU()
    first = grad(layer, x, np.ones_like(x))
    phi = np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi)
    Phi = act._phi_cdf(x)
    assert np.allclose(first, Phi + x * phi)
    h = 1e-5
    second = (grad(act.GELU(), x + h, np.ones_like(x)) - grad(act.GELU(), x - h, np.ones_like(x))) / (2 * h)
    assert np.allclose(second, phi * (2 - x**2), atol=1e-7)


def check_convex_interval() -> None:
    h = 1e-4

    def second(x: float) -> float:
        f = lambda v: float(act.GELU().forward(np.array([v]))[0])  # noqa: E731
        return (f(x + h) - 2 * f(x) + f(x - h)) / h**2

    edge = math.sqrt(2)
    assert all(second(x) > 0 for x in np.linspace(-edge + 0.01, edge - 0.01, 50))
    assert second(edge + 0.05) < 0 and second(-edge - 0.05) < 0


def check_elu_derivative() -> None:
    for alpha in (0.5, 1.0, 2.0):
        x = np.linspace(-5, 5, 101)
        layer = act.ELU(alpha)
        y = layer.forward(x)
        d = layer.backward(np.ones_like(x))
        assert np.allclose(d[x <= 0], alpha * np.exp(x[x <= 0])) and np.allclose(d[x <= 0], y[x <= 0] + alpha)
        assert np.allclose(d[x > 0], 1.0)


def check_swish_derivative() -> None:
    for beta in (0.5, 1.0, 2.5):
        x = np.linspace(-6, 6, 121)
        s = 1 / (1 + np.exp(-beta * x))
        assert np.allclose(grad(act.SiLU(beta), x, np.ones_like(x)), s + beta * x * s * (1 - s))


def check_tanh_error(written: float) -> None:
    x = np.linspace(-10, 10, 400001)
    err = np.abs(act.GELU().forward(x) - act.GELU("tanh").forward(x))
    assert round(err.max(), 4) == written  # "about 5e-4": the largest difference rounded to one digit
    assert abs(abs(x[err.argmax()]) - 2.7) < 0.05


def check_relu_moments() -> None:
    for s in (0.5, 1.0, 3.0):
        a = act.ReLU().forward(s * Z)
        assert math.isclose(float(W @ a), s / math.sqrt(2 * math.pi), rel_tol=1e-3)
        assert math.isclose(float(W @ a**2), s**2 / 2, rel_tol=1e-3)
        # what the text asks the student to compute from them: Var(ReLU(z)) = s^2 (1/2 - 1/(2 pi))
        assert math.isclose(float(W @ a**2 - (W @ a) ** 2), s**2 * (0.5 - 1 / (2 * math.pi)), rel_tol=1e-3)


def check_linear_variance() -> None:
    n_in, var_w = 64, 0.03
    w = RNG.normal(0, math.sqrt(var_w), size=(20000, n_in))
    x = RNG.normal(0.5, 1.0, size=(20000, n_in))  # inputs with a mean: the formula uses E[x^2]
    z = (w * x).sum(axis=1)
    assert math.isclose(z.var(), n_in * var_w * 1.25, rel_tol=0.05)


def check_bn_running_update() -> None:
    bn = norm.BatchNorm1d(3, momentum=0.2)
    x = RNG.normal(2.0, 3.0, size=(7, 3))
    bn.forward(x)
    m = x.shape[0]
    assert np.allclose(bn.running_mean, 0.8 * 0 + 0.2 * x.mean(0))
    assert np.allclose(bn.running_var, 0.8 * 1 + 0.2 * m / (m - 1) * x.var(0))


def _bn_case(eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, norm.BatchNorm1d]:
    bn = norm.BatchNorm1d(4, eps=eps)
    bn.gamma = RNG.normal(1.0, 0.3, size=4)
    x = RNG.normal(0.5, 2.0, size=(9, 4))
    g = RNG.normal(size=(9, 4))
    dx = grad(bn, x, g)
    xhat = (x - x.mean(0)) / np.sqrt(x.var(0) + eps)
    return x, g, dx, xhat, bn


def check_bn_backward() -> None:
    x, g, dx, xhat, bn = _bn_case(1e-5)
    m, s = x.shape[0], np.sqrt(x.var(0) + 1e-5)
    assert np.allclose(dx, bn.gamma / (m * s) * (m * g - g.sum(0) - xhat * (g * xhat).sum(0)))


def check_bn_identities() -> None:
    for eps in (0.0, 1e-5):
        x, _, dx, xhat, _ = _bn_case(eps)
        assert np.allclose(dx.sum(0), 0, atol=1e-12)
        assert np.allclose((xhat * dx).sum(0), 0, atol=1e-12 if eps == 0 else 1e-4)


def check_rmsnorm_backward() -> None:
    D = 6
    layer = norm.RMSNorm(D)
    layer.gamma = RNG.normal(1.0, 0.3, size=D)
    x = RNG.normal(size=(5, D))
    g = RNG.normal(size=(5, D))
    dx = grad(layer, x, g)
    r = np.sqrt((x**2).mean(-1, keepdims=True) + layer.eps)
    expected = layer.gamma * g / r - x / (D * r**3) * (g * layer.gamma * x).sum(-1, keepdims=True)
    assert np.allclose(dx, expected)
    assert layer.dgamma is not None
    assert np.allclose(layer.dgamma, (g * x / r).sum(0))


def check_dropout_expectation() -> None:
    for p in (0.2, 0.6):
        layer = drop.Dropout(p, rng=np.random.default_rng(1))
        out = layer.forward(np.full(400000, 1.5))
        assert abs(out.mean() - 1.5) < 0.02
        assert abs(out.var() - p / (1 - p) * 1.5**2) < 0.05 * (p / (1 - p) * 1.5**2)


def check_sgd_l2() -> None:
    w, g = np.array([1.5, -0.7]), np.array([0.3, 0.2])
    params = {"w": w.copy()}
    optim.SGD(lr=0.1, weight_decay=0.05).step(params, {"w": g})
    assert np.allclose(params["w"], w - 0.1 * (g + 0.05 * w))
    assert np.allclose(params["w"], (1 - 0.1 * 0.05) * w - 0.1 * g)


def check_adam_step() -> None:
    params = {"w": np.array([0.8, -1.2])}
    opt = optim.AdamW(lr=0.01, weight_decay=0.0)
    w = params["w"].copy()
    m = v = np.zeros(2)
    for t in (1, 2, 3):
        g = np.array([0.3, -0.5]) * t
        opt.step(params, {"w": g})
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g**2
        w = w - 0.01 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        assert np.allclose(params["w"], w)


def check_shifted_sums() -> None:
    x = RNG.normal(1e3, 2.0, size=50)
    for K in (0.0, x[0], -7.0):
        t1, t2 = (x - K).sum(), ((x - K) ** 2).sum()
        assert math.isclose(K + t1 / x.size, x.mean(), rel_tol=1e-12)
        assert math.isclose(t2 / x.size - (t1 / x.size) ** 2, x.var(), rel_tol=1e-6)


XSTAR, YSTAR = gelu_minimum()
# claim id -> (the LaTeX it must be, or None for a number) and its check (a number claim's check gets the number)
Check = Callable[..., None]
CLAIMS: dict[str, tuple[str | None, Check]] = {
    "gelu-argmin-above": (None, lambda v: None if v < XSTAR else pytest.fail(f"{v} is not below {XSTAR}")),
    "gelu-argmin-below": (None, lambda v: None if XSTAR < v else pytest.fail(f"{v} is not above {XSTAR}")),
    "gelu-min-above": (None, lambda v: None if v < YSTAR else pytest.fail(f"{v} is not below {YSTAR}")),
    "gelu-min-below": (None, lambda v: None if YSTAR < v else pytest.fail(f"{v} is not above {YSTAR}")),
    "gelu-tanh-error": (None, check_tanh_error),
    "gelu-derivatives": (
        r"\operatorname{GELU}'(x) = \Phi(x) + x\,\varphi(x), \qquad \operatorname{GELU}''(x) = "
        r"\varphi(x)\,(2 - x^2).",
        check_gelu_derivatives,
    ),
    "gelu-convex-bound": (r"(-\sqrt{2}, \sqrt{2})", check_convex_interval),
    "elu-derivative": (
        r"\operatorname{ELU}(z) = \begin{cases} z & z > 0 \\ \alpha\,(e^{z} - 1) & z \le 0 "
        r"\end{cases} \qquad \operatorname{ELU}'(z) = \begin{cases} 1 & z > 0 \\ \alpha e^{z} = "
        r"\operatorname{ELU}(z) + \alpha & z \le 0. \end{cases}",
        check_elu_derivative,
    ),
    "swish-derivative": (
        r"f'(x) = \sigma(\beta x) + \beta x\,\sigma(\beta x)\,\bigl(1 - \sigma(\beta x)\bigr).",
        check_swish_derivative,
    ),
    "relu-moments": (
        r"\operatorname{E}[\operatorname{ReLU}(z)] = \frac{s}{\sqrt{2\pi}}, \qquad "
        r"\operatorname{E}[\operatorname{ReLU}(z)^2] = \frac{s^2}{2}.",
        check_relu_moments,
    ),
    "linear-variance": (
        r"\operatorname{Var}(z) = n_\text{in}\,\operatorname{Var}(W)\,\operatorname{E}[x^2],",
        check_linear_variance,
    ),
    "bn-running-update": (
        r"\hat{\mu} \leftarrow (1 - \rho)\,\hat{\mu} + \rho\,\mu_B, \qquad \hat{\sigma}^2 "
        r"\leftarrow (1 - \rho)\,\hat{\sigma}^2 + \rho\,\frac{m}{m - 1}\,\sigma_B^2.",
        check_bn_running_update,
    ),
    "bn-backward": (
        r"\frac{\partial L}{\partial x_i} = \frac{\gamma}{m\,s}\left[m\,g_i - \sum_{j=1}^m g_j - "
        r"\hat{x}_i\sum_{j=1}^m g_j\,\hat{x}_j\right].",
        check_bn_backward,
    ),
    "bn-backward-identities": (
        r"\sum_{i=1}^m \frac{\partial L}{\partial x_i} = 0 \qquad\text{and}\qquad "
        r"\sum_{i=1}^m \hat{x}_i\,\frac{\partial L}{\partial x_i} = 0,",
        check_bn_identities,
    ),
    "rmsnorm-backward": (
        r"\frac{\partial L}{\partial x_j} = \frac{\gamma_j\,g_j}{r} - \frac{x_j}{D\,r^3}"
        r"\sum_{i=1}^D g_i\,\gamma_i\,x_i, \qquad \frac{\partial L}{\partial \gamma_i} = "
        r"\sum_{\text{rows}} g_i\,\frac{x_i}{r}.",
        check_rmsnorm_backward,
    ),
    "dropout-expectation": (
        r"\operatorname{E}[\tilde{a}] = \frac{\operatorname{E}[r]\,a}{1 - p} = a.",
        check_dropout_expectation,
    ),
    "dropout-variance": (r"\operatorname{Var}(\tilde{a}) = \frac{p}{1 - p}\,a^2,", check_dropout_expectation),
    "sgd-l2": (
        r"\theta \leftarrow \theta - \eta\,(\nabla L + \lambda\theta) = (1 - \eta\lambda)\,\theta - "
        r"\eta\,\nabla L,",
        check_sgd_l2,
    ),
    "adam-step": (
        r"m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad v \leftarrow \beta_2 v + (1 - \beta_2) g^2, "
        r"\quad \theta \leftarrow \theta - \eta\,\frac{m/(1 - \beta_1^t)}{\sqrt{v/(1 - \beta_2^t)} + "
        r"\epsilon}.",
        check_adam_step,
    ),
    "shifted-sums": (
        r"\mu = K + \frac{t_1}{D}, \qquad \sigma^2 = \frac{t_2}{D} - \left(\frac{t_1}{D}\right)^2.",
        check_shifted_sums,
    ),
}

TEXT_CLAIMS = {
    claim.id: (section.address, claim.latex)
    for chapter in load_chapters(ROOT / "text").values()
    for section in chapter.sections
    for claim in section.claims
}


def test_every_claim_of_the_text_is_checked_here_and_every_check_is_in_the_text() -> None:
    assert len(TEXT_CLAIMS) == sum(len(s.claims) for c in load_chapters(ROOT / "text").values() for s in c.sections)
    assert sorted(TEXT_CLAIMS) == sorted(CLAIMS)


@pytest.mark.parametrize("claim", sorted(TEXT_CLAIMS))
def test_the_claim_matches_the_reference(claim: str) -> None:
    latex, check = CLAIMS[claim]
    where, written = TEXT_CLAIMS[claim]
    if latex is None:
        check(number(written))
    else:
        assert written == " ".join(latex.split()), f"{where}: the formula of claim '{claim}' changed: check it here"
        check()


def test_the_gelu_minimum_is_where_the_quizzes_put_it() -> None:
    assert round(XSTAR, 4) == -0.7518 and round(YSTAR, 3) == -0.170


def test_a_changed_number_fails_its_claim() -> None:
    with pytest.raises(pytest.fail.Exception):
        CLAIMS["gelu-argmin-below"][1](-0.76)
    with pytest.raises(AssertionError):
        check_tanh_error(6e-4)
