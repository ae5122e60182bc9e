"""Throughput and memory of the pure stages on real conversation data (no services).

Run: `make bench` or `.venv/bin/python -m bench.pipeline [--repeat N]`.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench.shared import shared_data_dir
from pipeline.graph.writer import plan_batch
from pipeline.ingest import ingest_turns
from pipeline.trust import ChannelTrustPolicy
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from schemas.records import SyncJob
from tests.datasets import friends_raw_events, tau_raw_events


def _timed(label: str, count: int, unit: str, repeat: int, fn: Callable[[], Any]) -> None:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"{label:<34} {count:>6} {unit:<9} best {best * 1000:8.1f} ms  "
        f"{count / best:>10,.0f} {unit}/s  peak {peak / 1e6:6.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    try:
        data = shared_data_dir()  # the full sets: the slices in tests/data are too small to time
    except FileNotFoundError as exc:
        parser.error(str(exc))
    policy = ChannelTrustPolicy("strict")
    for name, raws in (
        ("tau-bench", tau_raw_events(data)),
        ("friendsqa (+1 silent agent)", friends_raw_events(observer=True, root=data)),
    ):
        lines = [json.dumps(r) for r in raws]
        messages = sum(len(r["messages"]) for r in raws)
        print(f"\n{name}: {len(raws)} events, {messages} messages")
        events = [validate_event(line) for line in lines]
        jobs = ingest_turns(events, {}, policy).jobs

        def validate_all(lines: list[str] = lines) -> object:
            return [validate_event(line) for line in lines]

        def stages(events: list[TurnEvent] = events) -> object:
            return ingest_turns(events, {}, policy)

        def plan(jobs: list[SyncJob] = jobs) -> object:
            return plan_batch(jobs)

        _timed("validate (JSON -> TurnEvent)", len(lines), "events", args.repeat, validate_all)
        _timed("stages 1-4 (ingest_turns)", len(events), "events", args.repeat, stages)
        _timed("plan writer rows (plan_batch)", len(jobs), "jobs", args.repeat, plan)
        payload = sum(len(json.dumps(j.model_dump(mode="json"))) for j in jobs)
        print(f"{'sync payload':<34} {len(jobs):>6} jobs      {payload / 1e6:8.2f} MB of JSON")


if __name__ == "__main__":
    main()
