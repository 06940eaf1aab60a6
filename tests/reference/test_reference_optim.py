"""Reference optimisers: trajectories against steps computed by hand, in-place updates, per-key state."""

from __future__ import annotations

import numpy as np
import pytest

from reference.optim import SGD, AdamW

GRADS = [np.array([0.5, -1.0]), np.array([0.2, 0.4]), np.array([-0.1, 0.3])]


def test_sgd_momentum_weight_decay_trajectory() -> None:
    """lr 0.1, momentum 0.9, weight decay 0.01 from p = [1, -2]; by hand:

    step 1: g = [0.51, -1.02], b = g, p = [0.949, -1.898]
    step 2: g = [0.20949, 0.38102], b = 0.9 b + g = [0.66849, -0.53698], p = [0.882151, -1.844302]
    step 3: g = [-0.09117849, 0.28155698], b = [0.51046251, -0.20172502], p = [0.831104749, -1.824129498]
    """
    p = np.array([1.0, -2.0])
    opt = SGD(lr=0.1, momentum=0.9, weight_decay=0.01)
    expected = [[0.949, -1.898], [0.882151, -1.844302], [0.831104749, -1.824129498]]
    buffers = [[0.51, -1.02], [0.66849, -0.53698], [0.51046251, -0.20172502]]
    for g, want, buf in zip(GRADS, expected, buffers, strict=True):
        opt.step({"w": p}, {"w": g})
        np.testing.assert_allclose(p, want, rtol=1e-13)
        np.testing.assert_allclose(opt.buffers["w"], buf, rtol=1e-13)


def test_sgd_plain_step_is_in_place() -> None:
    p = np.array([[1.0, 2.0], [3.0, 4.0]])
    same = p
    g = np.array([[1.0, -1.0], [0.5, 0.0]])
    g_before = g.copy()
    SGD(lr=0.5).step({"w": p}, {"w": g})
    assert p is same
    np.testing.assert_array_equal(p, [[0.5, 2.5], [2.75, 4.0]])
    np.testing.assert_array_equal(g, g_before)


def test_sgd_first_momentum_buffer_is_a_copy_of_the_gradient() -> None:
    p = np.array([1.0])
    g = np.array([2.0])
    opt = SGD(lr=0.1, momentum=0.5)
    opt.step({"w": p}, {"w": g})
    opt.step({"w": p}, {"w": g})
    np.testing.assert_array_equal(g, [2.0])
    # step 1: b = 2, p = 0.8; step 2: b = 0.5 * 2 + 2 = 3, p = 0.8 - 0.3 = 0.5
    np.testing.assert_allclose(p, [0.5], rtol=1e-14)


def test_adamw_trajectory() -> None:
    """lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.1 from p = 1, grads 0.5, -0.25, 1.0; by hand:

    step 1: p = 0.99; m = 0.05, v = 0.00025; m_hat = 0.5, v_hat = 0.25;
            p = 0.99 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.890000002
    step 2: p = 0.88110000198; m = 0.02, v = 0.00031225; m_hat = 0.02 / 0.19, v_hat = 0.00031225 / 0.001999;
            p = 0.8544662987
    step 3: p *= 0.99; m = 0.118, v = 0.00131193775; m_hat = 0.118 / 0.271, v_hat = 0.00131193775 / 0.002997001;
            p = 0.7801104767
    """
    p = np.array([1.0])
    opt = AdamW(lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    expected = [0.890000002, 0.8544662986878, 0.7801104766702]
    moments = [(0.05, 0.00025), (0.02, 0.00031225), (0.118, 0.00131193775)]
    for g, want, (m, v) in zip([0.5, -0.25, 1.0], expected, moments, strict=True):
        opt.step({"w": p}, {"w": np.array([g])})
        np.testing.assert_allclose(p, [want], rtol=1e-12)
        np.testing.assert_allclose(opt.m["w"], [m], rtol=1e-12)
        np.testing.assert_allclose(opt.v["w"], [v], rtol=1e-12)
    assert opt.t["w"] == 3


def test_adamw_defaults_and_per_key_step_counts() -> None:
    opt = AdamW()
    assert (opt.lr, opt.betas, opt.eps, opt.weight_decay) == (1e-3, (0.9, 0.999), 1e-8, 1e-2)
    a, b = np.array([1.0, -1.0]), np.array([2.0])
    ga, gb = np.array([3.0, -0.01]), np.array([-5.0])
    opt.step({"a": a}, {"a": ga})
    opt.step({"a": a, "b": b}, {"a": ga, "b": gb})
    assert opt.t == {"a": 2, "b": 1}
    # b's first step: decay then a bias-corrected step of size lr in the gradient's opposite direction
    assert b[0] == pytest.approx(2.0 * (1 - 1e-5) + 1e-3 * 5.0 / (5.0 + 1e-8), rel=1e-14)
    np.testing.assert_array_equal(ga, [3.0, -0.01])
    np.testing.assert_array_equal(gb, [-5.0])


def test_adamw_updates_in_place() -> None:
    p = np.ones((2, 3))
    same = p
    AdamW(lr=0.01).step({"w": p}, {"w": np.full((2, 3), 0.5)})
    assert p is same
    assert np.all(p < 1.0)
