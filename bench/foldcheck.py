"""What a fold check's segment pass costs on one long channel, by how far back it looks for late
messages (pipeline/graph/segments.py, workers/state/latemessages.py).

A private Neo4j; one channel of N episodes, 30 s apart (bench/reanchor.py's tenant), one
observing agent, every message segmented first. Then the pass with nothing new, medians of
`--repeats`:

- through the whole channel (EVER): what every fold check cost before writes noted their
  earliest time, and what the hourly audit costs now;
- nothing written out of order (None): the steady state of a channel written in order;
- back to a message 1 hour, 1 day late: a replayed dead letter or a drained spool.

    .venv/bin/python -m bench.foldcheck --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from bench.bulkload import EPOCH
from bench.reanchor import grown_channel
from pipeline.graph.segments import EVER, extend_segments
from pipeline.graph.store import GraphStore

SPACING = timedelta(seconds=30)  # OneChannel's


def median_ms(
    graph: GraphStore, pair: tuple[str, str, str], since: datetime | None, repeats: int
) -> float:
    """Median milliseconds of one pass that finds nothing new, looking back to `since`."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = extend_segments(graph, *pair, late_since=since)
        seconds.append(time.perf_counter() - start)
        if done.appended:
            raise RuntimeError(f"the pass appended {done.appended}: the channel was not caught up")
    return statistics.median(seconds) * 1000


def run(sizes: Sequence[int], repeats: int, data: Path) -> None:
    for graph, tenant, size in grown_channel("foldcheck", sizes, data):
        start = time.perf_counter()
        caught_up = extend_segments(graph, *tenant.pair, late_since=None)
        segmenting = time.perf_counter() - start
        last = EPOCH + SPACING * (size - 1)
        looks = {
            "whole channel": EVER,
            "none": None,
            "1 h back": last - timedelta(hours=1),
            "1 day back": last - timedelta(days=1),
        }
        figures = " | ".join(
            f"{name} {median_ms(graph, tenant.pair, since, repeats):6.0f} ms"
            for name, since in looks.items()
        )
        print(
            f"{size:>9,} episodes ({caught_up.appended:,} segmented in {segmenting:.0f} s):"
            f" {figures}",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--sizes", default="10000,100000", help="episodes in the channel")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    run([int(s) for s in args.sizes.split(",")], args.repeats, args.data)


if __name__ == "__main__":
    main()
