"""What the reader's vector cache pays for one recall's cosines: an agent's scope in float32
(numpy on one BLAS thread, as the cache ran it before) against the same scope in int8 (the
cache's rows and onnxruntime's integer product, pipeline/graph/quantised.py), whole and split in
two halves on two threads as the cache splits a very large scope. Also each form's memory.

Several agents' scopes take turns, so each product reads its matrix from memory as a reader
serving many agents would, not from the processor's cache. Random unit vectors: the cost does
not depend on the values.

Run: `.venv/bin/python -m bench.vectorproduct [--rows 35600,333000] [--dims 384] [--agents 6]
[--repeat 60]` (35.6k: an agent of the 100k-episode bench tenant; 333k: of the 1M one).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from pipeline.graph.quantised import Cosines, quantise


def _timed(run: Callable[[int], object], agents: int, repeat: int) -> tuple[float, float]:
    """p50 and p95 in ms of `run(agent)`, agents in turn, after one warm-up pass."""
    for agent in range(agents):
        run(agent)
    times = []
    for i in range(repeat):
        start = time.perf_counter()
        run(i % agents)
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def measure(rows: int, dims: int, agents: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    floats: list[npt.NDArray[np.float32]] = []
    held: list[tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]] = []
    for _ in range(agents):
        block = rng.standard_normal((rows, dims), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        floats.append(block)
        held.append(quantise(block))
    query = rng.standard_normal(dims, dtype=np.float32)
    query /= np.linalg.norm(query)
    cosines = Cosines()
    error = float(np.abs(cosines(*held[0], query) - floats[0] @ query).max())
    half = rows // 2
    helper = ThreadPoolExecutor(max_workers=1)

    def split_float(agent: int) -> object:
        second = helper.submit(np.matmul, floats[agent][half:], query)
        return floats[agent][:half] @ query, second.result()

    def split_int8(agent: int) -> object:
        matrix, scales = held[agent]
        second = helper.submit(cosines, matrix[half:], scales[half:], query)
        return cosines(matrix[:half], scales[:half], query), second.result()

    with threadpool_limits(limits=1, user_api="blas"):
        runs = {
            "float32, numpy": lambda agent: floats[agent] @ query,
            "int8, onnxruntime": lambda agent: cosines(*held[agent], query),
            "float32, two halves": split_float,
            "int8, two halves": split_int8,
        }
        results = {name: _timed(run, agents, repeat) for name, run in runs.items()}
    helper.shutdown()
    mb_float = floats[0].nbytes / 2**20
    mb_int8 = (held[0][0].nbytes + held[0][1].nbytes) / 2**20
    print(
        f"\n{rows:,} x {dims} a scope, {agents} scopes in turn ({mb_float:.1f} MB float32, "
        f"{mb_int8:.1f} MB int8 with scales); int8 cosines within {error:.4f} of float32's"
    )
    for name, (p50, p95) in results.items():
        print(f"  {name:<22} p50 {p50:6.2f} ms   p95 {p95:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="35600,333000", help="rows a scope, comma-separated")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--agents", type=int, default=6, help="scopes taking turns")
    parser.add_argument("--repeat", type=int, default=60)
    args = parser.parse_args()
    for rows in (int(r) for r in args.rows.split(",") if r):
        measure(rows, args.dims, args.agents, args.repeat)


if __name__ == "__main__":
    main()
