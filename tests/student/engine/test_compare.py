"""Array comparison and its teaching messages."""

from __future__ import annotations

import numpy as np

from grader.student.engine.compare import close_mask, compare, format_pair, same_as, scale_of


def test_equal_arrays_pass_with_empty_message() -> None:
    a = np.linspace(0, 1, 6).reshape(2, 3)
    assert compare(a, a + 1e-12).ok
    assert compare(a, a).message == ""


def test_shape_mismatch_names_both_shapes() -> None:
    c = compare(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not c.ok and c.message == "shape (2, 3), expected (3, 2)"


def test_dtype_mismatch() -> None:
    c = compare(np.zeros(3, dtype=np.float32), np.zeros(3))
    assert not c.ok and c.message == "dtype float32, expected float64"
    assert compare(np.zeros(3, dtype=np.float32), np.zeros(3), check_dtype=False).ok
    assert not compare(np.array(["a"]), np.zeros(1)).ok


def test_nan_where_finite_expected() -> None:
    r = np.array([[0.0, 1.0], [np.nan, np.inf]])
    c = compare(r, np.zeros((2, 2)) + 0.5)
    assert not c.ok
    assert c.message.startswith("received nan at index (1, 0) where 0.5 was expected")
    assert "(2 of 4 values are nan or inf: 1 inf, 1 nan)" in c.message


def test_nan_matches_nan() -> None:
    assert compare(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])).ok


def test_first_significant_difference_message() -> None:
    expected = np.full((6, 10), 0.816496580927726)
    received = expected.copy()
    received[1, 2] += 3.2e-3
    received[4, 5:] -= 1e-4
    c = compare(received, expected)
    assert not c.ok
    assert c.message.startswith("first significant difference at index (1, 2): received 0.819697, expected 0.816497")
    assert c.message.endswith("max abs error 3.2e-03 over 6 of 60 values")


def test_close_values_get_enough_digits_to_differ() -> None:
    a, b = format_pair(0.8164965809, 0.8164966809)
    assert a != b
    c = compare(np.array([1.0 + 1e-5]), np.array([1.0]))
    assert "received 1.00001, expected 1" in c.message


def test_scalar_has_no_index() -> None:
    c = compare(np.array(0.5), np.array(0.7))
    assert c.message.startswith("first significant difference: received 0.5, expected 0.7")


def test_tolerances_are_relative_and_absolute() -> None:
    assert compare(np.array([1e6 + 0.5]), np.array([1e6]), rtol=1e-6).ok
    assert not compare(np.array([1e6 + 2.0]), np.array([1e6]), rtol=1e-6).ok
    assert compare(np.array([5e-9]), np.array([0.0]), atol=1e-8).ok
    assert not compare(np.array([5e-8]), np.array([0.0]), atol=1e-8).ok


def test_same_as_is_scale_aware_and_shape_strict() -> None:
    big = np.array([1e4, -3e4])
    assert same_as(big + 1e-6, big)
    assert not same_as(big * 1.001, big)
    assert not same_as(np.zeros((2, 1)), np.zeros(2))
    assert not same_as(None, np.zeros(2))
    assert scale_of([0.1, -0.2]) == 1.0 and scale_of([np.inf, -40.0]) == 40.0


def test_an_expected_inf_asks_for_that_inf_and_never_widens_the_tolerance() -> None:
    """rtol * |inf| is inf: without the rule every number would match an expected inf (an overflow's variant)."""
    assert not compare(np.array([1e4, 1.0]), np.array([np.inf, 1.0])).ok
    assert not same_as(np.array([1e4]), np.array([np.inf]))  # a reference's 1e4 is not an overflow's inf
    assert not same_as(np.array([-np.inf]), np.array([np.inf]))
    assert same_as(np.array([np.inf, np.nan, 2.0]), np.array([np.inf, np.nan, 2.0]))
    assert not compare(np.array([np.inf]), np.array([3.0])).ok  # an inf where a finite value is expected fails
    assert close_mask(np.array([1e300, np.inf]), np.array([np.inf, np.inf]), 1e-6, 1e-8).tolist() == [False, True]
