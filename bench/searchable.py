"""How long a turn takes to become searchable by meaning when turns arrive at a conversation's
pace, through the real path: emit -> Redis -> a worker (ingest, sync) -> Neo4j -> an embed
worker, kicked by the sync task as in production (no drain loop of the bench's own).

Starts its own Redis, Neo4j, one worker and one embed worker on free loopback ports, then emits
`--turns` turns of two FriendsQA lines (a scene a group channel, two agents each), one every
`--gap` seconds, and for each records when every agent's memory of it is in the graph (written)
and when every one of its messages also has its vector (searchable). Prints p50 / p95 / max of
both, in seconds.

Run: `.venv/bin/python -m bench.searchable [--turns 60] [--gap 0.5] [--warmup 200] [--data DIR]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.endtoend import turns as friends_turns
from bench.shared import shared_data_dir
from memsync.producer import Producer
from memsync.settings import EMBED_QUEUE, Settings
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
    parser.add_argument("--warmup", type=int, default=200, help="untimed turns first")
    parser.add_argument("--data", type=Path, default=None, help="data tree (../shared/data)")
    args = parser.parse_args()
    try:
        data = args.data or shared_data_dir()
    except FileNotFoundError as exc:
        parser.error(str(exc))

    root = Path(tempfile.mkdtemp(prefix="memsync-bench-"))
    redis_port, neo4j_port = services.free_port(), services.free_port()
    settings = Settings(
        broker_url=f"redis://127.0.0.1:{redis_port}/0",
        neo4j_uri=f"bolt://127.0.0.1:{neo4j_port}",
        spool_dir=root / "spool",
        trust_mode="open",  # the scenes' speakers have no owners or grants
    )
    redis = services.start_redis("127.0.0.1", redis_port, root / "redis", aof=True)
    neo4j = services.start_neo4j("127.0.0.1", neo4j_port, root / "neo4j", Settings().state_dir)
    graph = GraphStore.connect(settings.neo4j_uri, "neo4j", None, "neo4j")
    workers: list[services.Service] = []
    try:
        embedder = make_embedder(settings)
        init_schema(graph, vector_dimensions=embedder.dimensions if embedder else None)
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
        total = args.warmup + args.turns
        load = _small_turns(friends_turns(tenant, total, data), total)
        # Untimed turns first, all at once: the embed worker loads its model on its first batch,
        # and a new Neo4j compiles its plans on the first statements.
        _wait_searchable(producer, ledger, graph, load[: args.warmup])
        load = load[args.warmup :]
        written: list[float] = []
        searchable: list[float] = []
        outstanding: dict[str, tuple[float, list[str]]] = {}
        at_written: dict[str, float] = {}
        start = time.monotonic()
        sent = 0
        while sent < args.turns or outstanding:
            now = time.monotonic()
            if sent < args.turns and now >= start + sent * args.gap:
                turn = load[sent]
                producer.emit(turn)
                outstanding[turn["event_id"]] = (now, _episodes(turn))
                sent += 1
            for event_id, (emitted, keys) in list(outstanding.items()):
                if event_id not in at_written:
                    (status,) = ledger.statuses([(tenant, event_id)])
                    if not status.complete:
                        continue
                    at_written[event_id] = time.monotonic()
                    written.append(at_written[event_id] - emitted)
                if pending_for_episodes(graph, keys) == 0:
                    searchable.append(time.monotonic() - emitted)
                    del outstanding[event_id]
            time.sleep(POLL_SECONDS)
        producer.close()
        print(f"turns {args.turns}, one every {args.gap:g} s; one worker (2 processes) and one "
              f"embed worker (1 process), embedder {settings.embedder}")  # fmt: skip
        print(_figures("emit to written", written))
        print(_figures("emit to searchable", searchable))
    finally:
        for worker in workers:
            worker.stop()
        graph.close()
        neo4j.stop()
        redis.stop()


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
    producer: Producer, ledger: Ledger, graph: GraphStore, turns: list[dict[str, Any]]
) -> None:
    for turn in turns:
        producer.emit(turn)
    keys = [key for turn in turns for key in _episodes(turn)]
    deadline = time.monotonic() + 600
    while not all(_complete(ledger, t) for t in turns) or pending_for_episodes(graph, keys):
        if time.monotonic() > deadline:
            raise SystemExit("the warm-up turns were not searchable within 600 s")
        time.sleep(POLL_SECONDS)


def _complete(ledger: Ledger, turn: dict[str, Any]) -> bool:
    (status,) = ledger.statuses([(turn["tenant"], turn["event_id"])])
    return status.complete


if __name__ == "__main__":
    main()
