"""How long a turn takes to become searchable by meaning when turns arrive at a conversation's
pace, through the real path: emit -> Redis -> a worker (ingest, sync) -> Neo4j -> an embed
worker, kicked by the sync task as in production (no drain loop of the bench's own).

Starts its own Redis, Neo4j, one worker and one embed worker on free loopback ports, writes
`--warmup` turns at once and waits until all is idle, then emits turns of two FriendsQA lines (a
scene a group channel, two agents each), one every `--gap` seconds: `--settle` of them not
counted, then `--turns`. For each it records when every agent's memory of it is in the graph
(written) and when every one of its messages also has its vector (searchable). Prints p50 / p95
/ max of both, in seconds.

Run: `.venv/bin/python -m bench.searchable [--turns 60] [--gap 0.5] [--warmup 200] [--settle 60]
[--data DIR] [--json PATH]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from redis import Redis

from bench.endtoend import turns as friends_turns
from bench.localservices import start_local
from bench.shared import shared_data_dir
from memsync.producer import Producer
from memsync.settings import EMBED_QUEUE, FOLD_QUEUE, INGEST_QUEUE, SYNC_QUEUE
from pipeline.embedder import make_embedder
from pipeline.graph.embeddings import pending_for_episodes
from pipeline.graph.schema import init_schema
from pipeline.graph.store import GraphStore
from schemas.keys import episode_key
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.ledger import Ledger
from workers.worker import runtime

POLL_SECONDS = 0.05


def _figures(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"{name:<22} p50 {statistics.median(ordered):6.2f} s   p95 {p95:6.2f} s   "
        f"max {ordered[-1]:6.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between two emits")
    parser.add_argument("--warmup", type=int, default=200, help="untimed turns first, at once")
    parser.add_argument("--settle", type=int, default=60, help="paced turns not counted")
    parser.add_argument("--json", type=Path, default=None, help="write each turn's figures here")
    parser.add_argument("--data", type=Path, default=None, help="data tree (../shared/data)")
    args = parser.parse_args()
    try:
        data = args.data or shared_data_dir()
    except FileNotFoundError as exc:
        parser.error(str(exc))

    root = Path(tempfile.mkdtemp(prefix="memsync-bench-"))
    local = start_local(root)
    settings, graph = local.settings, local.graph
    workers: list[services.Service] = []
    try:
        embedder = make_embedder(settings)
        init_schema(graph, vector_dimensions=embedder.dimensions if embedder else None)
        vectors = embedder is not None  # MEMSYNC_EMBEDDER=none: written is searchable (keyword)
        env = worker_env(settings)
        workers.append(
            services.start_worker(
                env, root / "embed.log", name="embed", queues=[EMBED_QUEUE], concurrency=1
            )
        )
        workers.append(services.start_worker(env, root / "worker.log"))
        runtime.configure(settings)
        ledger = runtime.ledger()
        producer = Producer(settings)
        tenant = f"s{uuid.uuid4().hex[:8]}"
        paced = args.settle + args.turns
        load = _small_turns(friends_turns(tenant, args.warmup + paced, data), args.warmup + paced)
        # Untimed turns first, all at once: the embed worker loads its model on its first batch,
        # and a new Neo4j compiles its plans on the first statements. Then `--settle` paced turns
        # not counted: the first seconds at a new pace ran several times slower.
        _wait_searchable(producer, ledger, graph if vectors else None, load[: args.warmup])
        load = load[args.warmup :]
        client = Redis.from_url(settings.broker_url)
        _wait_idle(client)
        client.close()
        seen: list[dict[str, Any]] = []
        outstanding: dict[str, tuple[int, float, list[str]]] = {}
        at_written: dict[str, float] = {}
        start = time.monotonic()
        sent = 0
        while sent < len(load) or outstanding:
            now = time.monotonic()
            if sent < len(load) and now >= start + sent * args.gap:
                turn = load[sent]
                producer.emit(turn)
                outstanding[turn["event_id"]] = (sent, now, _episodes(turn))
                sent += 1
            waiting = [e for e in outstanding if e not in at_written]
            statuses = ledger.statuses([(tenant, e) for e in waiting]) if waiting else []
            for event_id, status in zip(waiting, statuses, strict=True):
                if status.complete:
                    at_written[event_id] = time.monotonic()
            for event_id, (index, emitted, keys) in list(outstanding.items()):
                if event_id not in at_written:
                    continue
                if not vectors or pending_for_episodes(graph, keys) == 0:
                    seen.append(
                        {
                            "event_id": event_id,
                            "counted": index >= args.settle,
                            "emitted_s": round(emitted - start, 3),
                            "written_s": round(at_written[event_id] - emitted, 3),
                            "searchable_s": round(time.monotonic() - emitted, 3),
                        }
                    )
                    del outstanding[event_id]
            time.sleep(POLL_SECONDS)
        producer.close()
        counted = [t for t in seen if t["counted"]]
        print(f"turns {args.turns} after {args.settle} not counted, one every {args.gap:g} s; "
              "one worker (2 processes) and one embed worker (1 process), embedder "
              f"{settings.embedder}")  # fmt: skip
        print(_figures("emit to written", [t["written_s"] for t in counted]))
        print(_figures("emit to searchable", [t["searchable_s"] for t in counted]))
        if args.json is not None:
            args.json.write_text(json.dumps(sorted(seen, key=lambda t: t["emitted_s"])))
    finally:
        for worker in workers:
            worker.stop()
        local.stop()


def _small_turns(scenes: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """Turns of two messages (a line and the next), each scene a channel, in scene order."""
    result: list[dict[str, Any]] = []
    for scene in scenes:
        for i in range(0, len(scene["messages"]) - 1, 2):
            turn = dict(scene, event_id=f"{scene['event_id']}-{i}")
            turn["messages"] = scene["messages"][i : i + 2]
            result.append(turn)
            if len(result) == count:
                return result
    return result


def _episodes(turn: dict[str, Any]) -> list[str]:
    return [episode_key(turn["tenant"], turn["channel"]["id"], m["id"]) for m in turn["messages"]]


def _wait_searchable(
    producer: Producer, ledger: Ledger, graph: GraphStore | None, turns: list[dict[str, Any]]
) -> None:
    """Emit `turns` at once and wait until all are written (and embedded, given `graph`)."""
    for turn in turns:
        producer.emit(turn)
    deadline = time.monotonic() + 600
    statuses = ledger.wait([(t["tenant"], t["event_id"]) for t in turns], timeout=600)
    if not all(s.complete for s in statuses):
        raise SystemExit("the warm-up turns were not written within 600 s")
    keys = [key for turn in turns for key in _episodes(turn)]
    while graph is not None and pending_for_episodes(graph, keys):
        if time.monotonic() > deadline:
            raise SystemExit("the warm-up turns were not searchable within 600 s")
        time.sleep(POLL_SECONDS)


def _wait_idle(client: Redis) -> None:
    """Until no task is queued or delivered unacked, twice running: the warm-up's folds and
    embed runs are over before the timed turns start."""
    idle = 0
    deadline = time.monotonic() + 600
    while idle < 2:
        if time.monotonic() > deadline:
            raise SystemExit("the workers were still busy 600 s after the warm-up")
        pipe = client.pipeline(transaction=True)
        for queue in (INGEST_QUEUE, SYNC_QUEUE, FOLD_QUEUE, EMBED_QUEUE):
            pipe.llen(queue)
        pipe.hlen("unacked")  # kombu's hash of delivered, not yet acked messages
        idle = idle + 1 if sum(pipe.execute()) == 0 else 0
        time.sleep(0.5)


if __name__ == "__main__":
    main()
