"""Reads at once: how many recalls a second one reading process and its Neo4j serve, and the
latency callers see, as more callers ask at the same time.

A platform calls `memsync.Memory` from many request threads (the HTTP API's `asyncio.to_thread`
does the same), so the figure an operator sizes a reader box by is the throughput at
saturation and the latency on the way there, not one caller's latency alone. For each kind
(recall hybrid, recall keyword, build_context) and each number of concurrent callers, a fixed
count of the latency bench's queries is shared among that many threads, each calling one
shared `Memory` in a closed loop (a caller asks again as soon as it has its answer). Printed per
level: calls a second, p50 / p95 / p99 of each call, and CPU per call of this process (every
thread: the query's embedding, the vector product, the driver) and of Neo4j.

Run on a graph that `bench.latency` holds (its own Neo4j, one tenant of 10k or 100k episodes):
`.venv/bin/python -m bench.latency --sizes 100000 --queries 200 --rates "" --hold FILE`, then
`.venv/bin/python -m bench.readload --attach FILE [--concurrency 1,2,4,8] [--calls 400]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.bulkload import Tenant, load_corpus
from bench.latency import TENANT, Ask, _cpu_seconds, asks, settle, summary
from bench.shared import shared_data_dir
from memsync.reading import Memory
from memsync.settings import Settings
from pipeline.embedder import make_embedder, query_precision
from pipeline.graph.store import GraphStore
from schemas.recall import RecallMode, RecallQuery
from tests.datasets import TESTS_DATA_DIR

Call = Callable[[Ask], object]
KINDS = ("recall hybrid", "recall keyword", "build_context")


def calls(memory: Memory) -> dict[str, Call]:
    """Each kind as a platform makes it, through the public reading API."""

    def recall_in(mode: RecallMode) -> Call:
        def run(ask: Ask) -> object:
            return memory.recall(
                RecallQuery(
                    tenant=TENANT,
                    agent_id=ask.agent_id,
                    channel_id=ask.channel_id,
                    query=ask.text,
                    mode=mode,
                )
            )

        return run

    def context(ask: Ask) -> object:
        return memory.build_context(
            ask.agent_id, ask.context_channel, tenant=TENANT, query=ask.text
        )

    return {
        "recall hybrid": recall_in("hybrid"),
        "recall keyword": recall_in("keyword"),
        "build_context": context,
    }


def run_level(call: Call, queries: Sequence[Ask], callers: int, neo4j_pid: int) -> dict[str, Any]:
    """`queries` shared among `callers` threads, each asking in a closed loop; throughput,
    latency and CPU per call."""
    took: list[float] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    pending = iter(queries)

    def caller() -> None:
        while True:
            with lock:
                ask = next(pending, None)
            if ask is None:
                return
            started = time.perf_counter()
            try:
                call(ask)
            except Exception as exc:  # counted and reported; the level still finishes
                with lock:
                    failures.append(exc)
                continue
            with lock:
                took.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=caller, name=f"caller-{i}") for i in range(callers)]
    cpu, neo4j_cpu = time.process_time(), _cpu_seconds(neo4j_pid)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    done = max(len(took), 1)
    return {
        **(summary(took) if took else {}),
        "callers": callers,
        "calls": len(took),
        "failed": len(failures),
        "calls_per_second": len(took) / wall,
        "reader_cpu_ms": (time.process_time() - cpu) * 1000 / done,
        "neo4j_cpu_ms": (_cpu_seconds(neo4j_pid) - neo4j_cpu) * 1000 / done,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attach", type=Path, required=True, help="a graph bench.latency holds")
    parser.add_argument("--concurrency", default="1,2,4,8", help="callers at once, per level")
    parser.add_argument("--calls", type=int, default=400, help="calls per kind and level")
    parser.add_argument("--warmup", type=int, default=200, help="calls per kind before timing")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    parser.add_argument("--vector-cache-mb", type=int, default=512)
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",") if c]
    kinds = [k for k in args.kinds.split(",") if k]
    if not levels or min(levels) < 1:
        parser.error(f"--concurrency: whole numbers of at least 1 (got {args.concurrency!r})")
    if set(kinds) - set(KINDS):
        parser.error(f"--kinds: of {', '.join(KINDS)} (got {args.kinds!r})")
    out = sys.stderr if args.json == "-" else sys.stdout

    def say(*parts: object) -> None:
        print(*parts, file=out, flush=True)

    try:
        root = shared_data_dir()
    except FileNotFoundError:
        root = TESTS_DATA_DIR
    corpus = load_corpus(root)
    held = json.loads(args.attach.read_text())
    # Every call pays its query's embedding, as in bench.latency.
    settings = Settings(recall_query_vectors=0)
    graph = GraphStore.connect(
        held["uri"], "neo4j", None, "neo4j", vector_cache_mb=args.vector_cache_mb
    )
    memory = Memory(
        graph,
        embedder=make_embedder(settings),
        dm_policy=settings.dm_memory_policy,
        owns_graph=True,
    )
    report: dict[str, Any] = {"size": held["size"], "levels": {}}
    try:
        say(
            f"attached to the {held['size']:,}-episode graph at {held['uri']}; queries embedded "
            f"in {query_precision(settings)}; Neo4j settled in {settle(held['pid']):.1f} s"
        )
        tenant = Tenant(TENANT, corpus)
        warm = asks(tenant, corpus, args.warmup, 11)
        queries = asks(tenant, corpus, args.calls, 12)
        run = calls(memory)
        for kind in kinds:
            for ask in warm:
                run[kind](ask)
            # Every agent's scope in the reader's vector cache before timing (steady state).
            for ask in {ask.agent_id: ask for ask in queries}.values():
                run[kind](ask)
            graph.vectors.wait_for_loads(600)
            say(f"\n{kind}, {held['size']:,} episodes, {len(queries)} calls a level")
            say(
                "  callers   calls/s     p50     p95     p99   reader cpu  neo4j cpu"
                "  (ms; cpu per call)"
            )
            rows = []
            for callers in levels:
                row = run_level(run[kind], queries, callers, held["pid"])
                rows.append(row)
                failed = f"  {row['failed']} failed" if row["failed"] else ""
                say(
                    f"  {callers:>7} {row['calls_per_second']:>9.1f} {row['p50']:>7.1f} "
                    f"{row['p95']:>7.1f} {row['p99']:>7.1f} {row['reader_cpu_ms']:>12.1f} "
                    f"{row['neo4j_cpu_ms']:>10.1f}{failed}"
                )
            report["levels"][kind] = rows
    finally:
        memory.close()
    if args.json is not None:
        text = json.dumps(report, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
