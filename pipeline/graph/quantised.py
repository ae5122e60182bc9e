"""Unit vectors held as int8 rows with one scale a row, and their cosines with a query.

A reader's vector cache is read whole on every recall: at 100k episodes an agent's 35k float32
vectors are 55 MB, more than the processor's caches, so the product waits on memory. In int8
the same rows are a quarter of the bytes, and onnxruntime's integer product (AVX2 or AVX-512
VNNI kernels) ranks them in a little over half numpy's time (docs/benchmarks.md). Rounding a
unit vector's components to 1/127 of its largest one moves a cosine by about 0.002: the cache
only proposes candidates, and a vector index's own search is approximate too.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from pipeline import onnxproto as proto

log = logging.getLogger(__name__)

_LEVELS: Final = 127
# The query goes in as uint8 around this zero point: x86's byte multiply-add instructions pair
# an unsigned operand with a signed one.
_ZERO: Final = 128
# Below this many rows numpy's float product of the converted rows costs less than a session
# run's fixed cost.
_SMALL: Final = 2048
_ZERO_POINT: Final = np.array(_ZERO, dtype=np.uint8)
_OPSET: Final = 13


def quantise(
    block: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Rows of `block` as int8 (each row's largest component at +-127) and each row's scale,
    so that row ~= int8 row * scale."""
    top = np.abs(block).max(axis=1)
    scales = np.where(top > 0.0, top / _LEVELS, 1.0).astype(np.float32)
    rows = np.rint(block / scales[:, None]).astype(np.int8)
    return rows, scales


class Cosines:
    """`rows @ query` for int8 rows and their scales: onnxruntime's integer product for large
    scopes, numpy for small ones or where onnxruntime cannot run it. Safe to call from several
    threads at once (one session, made on first use, runs concurrently)."""

    def __init__(self) -> None:
        self._session: Any = None
        self._unavailable = False
        self._lock = threading.Lock()

    def __call__(
        self,
        rows: npt.NDArray[np.int8],
        scales: npt.NDArray[np.float32],
        query: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]:
        session = self._get() if len(rows) > _SMALL else None
        if session is None:
            return _numpy(rows, scales, query)
        top = float(np.abs(query).max())
        if top == 0.0:
            return np.zeros(len(rows), dtype=np.float32)
        step = top / _LEVELS
        right = (np.rint(query / step).astype(np.int16) + _ZERO).astype(np.uint8)[:, None]
        (product,) = session.run(
            None,
            {"rows": np.ascontiguousarray(rows), "query": right, "zero": _ZERO_POINT},
        )
        cosines: npt.NDArray[np.float32] = (product[:, 0] * (scales * np.float32(step))).astype(
            np.float32, copy=False
        )
        return cosines

    def _get(self) -> Any:
        with self._lock:
            if self._session is None and not self._unavailable:
                try:
                    self._session = _session()
                except Exception:
                    # numpy gives the same cosines, only slower.
                    log.warning("int8 product unavailable; numpy computes it", exc_info=True)
                    self._unavailable = True
            return self._session


def _numpy(
    rows: npt.NDArray[np.int8], scales: npt.NDArray[np.float32], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    out = np.empty(len(rows), dtype=np.float32)
    # In slices, so the float copy stays small whatever the scope's size.
    for start in range(0, len(rows), _SMALL):
        part = rows[start : start + _SMALL].astype(np.float32)
        out[start : start + _SMALL] = (part @ query) * scales[start : start + _SMALL]
    return out


def _session() -> Any:
    graph = proto.model(
        "int8-cosines",
        [proto.node("MatMulInteger", ["rows", "query", "", "zero"], ["product"])],
        [],
        [
            proto.value_info("rows", proto.INT8, ["n", "d"]),
            proto.value_info("query", proto.UINT8, ["d", 1]),
            proto.value_info("zero", proto.UINT8, []),
        ],
        [proto.value_info("product", proto.INT32, ["n", 1])],
        opset=_OPSET,
    )
    # One thread a product, as numpy's was held to one BLAS thread: the cores are Neo4j's too,
    # and the cache splits a very large scope over two calls itself.
    return proto.session(graph, threads=1)
