"""Vectors in int8: rounding bounded by each row's scale, and cosines from onnxruntime's integer
product that agree with float32's and with the numpy path's."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from pipeline.graph import quantised
from pipeline.graph.quantised import Cosines, quantise


def _unit_rows(count: int, dims: int, seed: int) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(seed).normal(size=(count, dims)).astype(np.float32)
    unit: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def test_rounding_stays_within_half_a_step_of_each_row() -> None:
    block = _unit_rows(50, 16, 1)
    block[3] = 0.0
    rows, scales = quantise(block)
    assert rows.dtype == np.int8 and scales.dtype == np.float32
    assert np.abs(rows).max() == 127
    assert np.all(np.abs(rows * scales[:, None] - block) <= scales[:, None] / 2 + 1e-7)
    assert not rows[3].any() and scales[3] == 1.0


def test_a_large_scope_runs_the_integer_product_and_agrees_with_float() -> None:
    block = _unit_rows(quantised._SMALL * 3, 384, 2)
    query = _unit_rows(1, 384, 3)[0]
    rows, scales = quantise(block)
    cosines = Cosines()
    found = cosines(rows, scales, query)
    assert cosines._session is not None  # onnxruntime ran it, not the numpy fallback
    assert found.dtype == np.float32 and found.shape == (len(block),)
    assert found == pytest.approx(block @ query, abs=5e-3)
    assert found == pytest.approx(quantised._numpy(rows, scales, query), abs=5e-3)
    best = set(np.argsort(-(block @ query))[:20])
    assert len(best & set(np.argsort(-found)[:20])) >= 18


def test_a_small_scope_and_a_zero_query() -> None:
    block = _unit_rows(10, 8, 4)
    rows, scales = quantise(block)
    cosines = Cosines()
    assert cosines(rows, scales, block[0])[0] == pytest.approx(1.0, abs=2e-3)
    assert cosines._session is None  # too few rows to be worth a session run
    big = np.tile(rows, (quantised._SMALL, 1))
    assert not cosines(big, np.tile(scales, quantised._SMALL), np.zeros(8, np.float32)).any()
