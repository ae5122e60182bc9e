"""End-to-end throughput: emit -> Redis -> celery workers -> Neo4j, on local real services.

Starts its own Redis, Neo4j and one worker (prefork, `--concurrency`) on free loopback ports,
emits `--turns` FriendsQA group turns (two agents each) through the producer and times until
every agent's memory of every turn is in the graph.

Run: `.venv/bin/python -m bench.endtoend [--turns 1000] [--batch 50] [--concurrency 2]`.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.localservices import start_local
from bench.shared import shared_data_dir
from memsync.producer import Producer
from pipeline.graph.reader import tenant_counts
from pipeline.graph.schema import init_schema
from tests.datasets import friends_raw_events
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.ledger import Ledger
from workers.worker import runtime
from workers.worker.runtime import ledger as runtime_ledger

AGENTS = [
    {"id": "a-one", "kind": "agent", "display_name": "One", "handle": "one"},
    {"id": "a-two", "kind": "agent", "display_name": "Two", "handle": "two"},
]


def turns(tenant: str, count: int, data: Path) -> list[dict[str, Any]]:
    scenes = friends_raw_events(root=data)
    result = []
    for i in range(count):
        turn = copy.deepcopy(scenes[i % len(scenes)])
        turn.update(tenant=tenant, event_id=f"ev-{i}")
        turn["channel"] = {"id": f"ch-{i}", "kind": "group"}
        turn["participants"] = [*turn["participants"], *AGENTS]
        result.append(turn)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50, help="events per ingest task")
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    try:
        data = shared_data_dir()  # the full FriendsQA set, before any service is started
    except FileNotFoundError as exc:
        parser.error(str(exc))

    root = Path(tempfile.mkdtemp(prefix="memsync-bench-"))
    local = start_local(root, producer_batch=args.batch, worker_concurrency=args.concurrency)
    settings, graph = local.settings, local.graph
    worker = None
    try:
        init_schema(graph)
        worker = services.start_worker(
            worker_env(settings), root / "worker.log", concurrency=args.concurrency
        )
        tenant = f"b{uuid.uuid4().hex[:8]}"
        load = turns(tenant, args.turns, data)
        messages = sum(len(t["messages"]) for t in load)
        producer = Producer(settings)
        runtime.configure(settings)  # the ledger below reads these settings, not the environment
        ledger: Ledger = runtime_ledger()
        start = time.perf_counter()
        for turn in load:
            producer.emit(turn)
        emitted = time.perf_counter() - start
        producer.flush(timeout=300)
        keys = [(t["tenant"], t["event_id"]) for t in load]
        statuses = ledger.wait(keys, timeout=1200)
        elapsed = time.perf_counter() - start
        producer.close()
        counts = tenant_counts(graph, tenant)
        complete = sum(1 for s in statuses if s.complete)
        print(f"turns {args.turns}  messages {messages}  batch {args.batch}  "
              f"worker concurrency {args.concurrency}")  # fmt: skip
        print(f"emit() total           {emitted * 1000:9.1f} ms  "
              f"({emitted / args.turns * 1e6:.0f} us per call)")  # fmt: skip
        print(f"all memories written   {elapsed:9.2f} s   complete turns {complete}/{args.turns}")
        print(f"throughput             {args.turns / elapsed:9.1f} turns/s  "
              f"{counts['observed'] / elapsed:9.0f} agent memories/s")  # fmt: skip
        print(f"graph                  {counts}")
    finally:
        if worker is not None:
            worker.stop()
        local.stop()


if __name__ == "__main__":
    main()
