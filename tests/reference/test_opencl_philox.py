"""Philox4x32-10 (pyopencl's bundled Random123 header) against the published known answers.

The three vectors are the ``philox4x32 10`` lines of Random123's
``tests/kat_vectors`` (counter[4] key[2] -> output[4]). ``philox4x32_10_numpy``
below is an independent pure-NumPy implementation (Salmon et al., SC'11); the
dropout and init tests import it to recompute the device draws on the host.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference.opencl.init import philox4x32_10

KAT_VECTORS = [
    (
        (0x00000000, 0x00000000, 0x00000000, 0x00000000),
        (0x00000000, 0x00000000),
        (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8),
    ),
    (
        (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
        (0xFFFFFFFF, 0xFFFFFFFF),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]

PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85  # key increments (golden ratio, sqrt(3) - 1)
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10_numpy(counters: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Philox4x32 with 10 rounds on rows: counters (m, 4), keys (m, 2) -> (m, 4) uint32.

    One round: (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2 (64-bit products);
    c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); then k += (W0, W1) mod 2^32.
    """
    c = np.asarray(counters, dtype=np.uint64).reshape(-1, 4).copy()
    k = np.asarray(keys, dtype=np.uint64).reshape(-1, 2).copy()
    for _ in range(10):
        p0 = np.uint64(PHILOX_M0) * c[:, 0]
        p1 = np.uint64(PHILOX_M1) * c[:, 2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK32
        c = np.stack([hi1 ^ c[:, 1] ^ k[:, 0], lo1, hi0 ^ c[:, 3] ^ k[:, 1], lo0], axis=1)
        k = (k + np.array([PHILOX_W0, PHILOX_W1], dtype=np.uint64)) & MASK32
    return c.astype(np.uint32)


def unit_float(words: np.ndarray) -> np.ndarray:
    """u = (word >> 8) * 2^-24 in [0, 1), float32 (exact)."""
    return ((np.asarray(words, dtype=np.uint32) >> np.uint32(8)).astype(np.float64) * 2.0**-24).astype(np.float32)


def block_words(n: int, counter_tail: tuple[int, int, int], seed: int) -> np.ndarray:
    """Word i % 4 of philox4x32_10((i // 4, *counter_tail), (seed lo, seed hi)) for i < n, uint32."""
    blocks = -(-n // 4)
    counters = np.zeros((blocks, 4), dtype=np.uint64)
    counters[:, 0] = np.arange(blocks)
    counters[:, 1:] = counter_tail
    keys = np.tile(np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint64), (blocks, 1))
    return philox4x32_10_numpy(counters, keys).reshape(-1)[:n]


def test_numpy_philox_matches_the_known_answers() -> None:
    counters = np.array([v[0] for v in KAT_VECTORS])
    keys = np.array([v[1] for v in KAT_VECTORS])
    expected = np.array([v[2] for v in KAT_VECTORS], dtype=np.uint32)
    np.testing.assert_array_equal(philox4x32_10_numpy(counters, keys), expected)


@pytest.mark.opencl
def test_device_philox_matches_the_known_answers() -> None:
    counters = np.array([v[0] for v in KAT_VECTORS], dtype=np.uint32)
    keys = np.array([v[1] for v in KAT_VECTORS], dtype=np.uint32)
    expected = np.array([v[2] for v in KAT_VECTORS], dtype=np.uint32)
    np.testing.assert_array_equal(philox4x32_10(counters, keys), expected)


@pytest.mark.opencl
def test_device_philox_matches_numpy_on_many_inputs() -> None:
    rng = np.random.default_rng(20240611)
    counters = rng.integers(0, 2**32, size=(1000, 4), dtype=np.uint64).astype(np.uint32)
    keys = rng.integers(0, 2**32, size=(1000, 2), dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(philox4x32_10(counters, keys), philox4x32_10_numpy(counters, keys))


@pytest.mark.opencl
def test_device_philox_rejects_mismatched_keys() -> None:
    with pytest.raises(ValueError, match="one key per counter"):
        philox4x32_10(np.zeros((2, 4), np.uint32), np.zeros((1, 2), np.uint32))
