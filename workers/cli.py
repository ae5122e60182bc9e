"""The `memsync` command line: worker, emit, graph, recall, services, stats, demo."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.errors import InvalidEvent, MemsyncError
from pipeline.graph.reader import recall
from pipeline.graph.schema import init_schema
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from workers import localstack, runtime
from workers.progress import ProgressBar
from workers.settings import INGEST_QUEUE, SYNC_QUEUE, Settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    settings = Settings()
    runtime.configure(settings)
    try:
        result: int = args.handler(args, settings)
    except MemsyncError as exc:
        print(f"memsync: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memsync", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    worker = sub.add_parser("worker", help="run a Celery worker on the memsync queues")
    worker.add_argument("--concurrency", "-c", type=int, default=None)
    worker.add_argument("--loglevel", "-l", default="INFO")
    worker.add_argument("--queues", "-Q", default=f"{INGEST_QUEUE},{SYNC_QUEUE}")
    worker.set_defaults(handler=_worker)

    emit = sub.add_parser("emit", help="emit turn events from a JSON Lines file")
    emit.add_argument("file", type=Path, help="one TurnEvent per line ('-' for stdin)")
    emit.add_argument("--wait", action="store_true", help="return when every sync is in the graph")
    emit.add_argument("--timeout", type=float, default=600.0, help="seconds --wait may take")
    emit.set_defaults(handler=_emit)

    graph = sub.add_parser("graph", help="graph schema")
    graph_sub = graph.add_subparsers(dest="graph_command", required=True)
    graph_sub.add_parser("init", help="create constraints and indexes (idempotent)").set_defaults(
        handler=_graph_init
    )

    rec = sub.add_parser("recall", help="what an agent remembers")
    rec.add_argument("--agent", required=True, help="agent participant id")
    rec.add_argument("--tenant", default="default")
    rec.add_argument("--channel", default=None, help="only this channel id")
    rec.add_argument("--limit", type=int, default=50)
    rec.add_argument("--json", action="store_true")
    rec.set_defaults(handler=_recall)

    services = sub.add_parser("services", help="local Redis and Neo4j on loopback")
    services.add_argument("action", choices=["install", "up", "down", "status"])
    services.set_defaults(handler=_services)

    stats = sub.add_parser("stats", help="pipeline counters")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(handler=_stats)

    demo = sub.add_parser("demo", help="play a sample conversation and print each agent's memory")
    demo.set_defaults(handler=_demo)
    return parser


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.app import app

    argv = ["worker", "-Q", args.queues, "--loglevel", args.loglevel]
    argv += ["-c", str(args.concurrency or settings.worker_concurrency)]
    app.worker_main(argv)
    return 0


def read_events(path: Path) -> tuple[list[TurnEvent], list[str]]:
    """Validate every line first, so a bad file sends nothing and every problem is reported."""
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    events: list[TurnEvent] = []
    errors: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(validate_event(line))
        except InvalidEvent as exc:
            errors.append(f"{path}:{number}: {exc}")
    return events, errors


def _emit(args: argparse.Namespace, settings: Settings) -> int:
    from workers.producer import Producer

    events, errors = read_events(args.file)
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        print(f"memsync: {len(errors)} invalid event(s); nothing was sent", file=sys.stderr)
        return 2
    producer = Producer(settings)
    for event in events:
        producer.emit(event)
    if not producer.close(timeout=args.timeout):
        print(f"memsync: {producer.pending} event(s) not published", file=sys.stderr)
        return 1
    print(f"emitted {len(events)} event(s)")
    if not args.wait:
        return 0
    bar = ProgressBar(total=len(events), label="syncing")
    statuses = runtime.ledger().wait(
        [(e.tenant, e.event_id) for e in events], timeout=args.timeout, on_progress=bar.update
    )
    bar.close()
    rejected = [s for s in statuses if s.state == "rejected"]
    unfinished = [s for s in statuses if not s.finished]
    synced = sum(s.synced for s in statuses)
    print(f"synced {synced} agent memories for {len(statuses)} event(s)")
    for status in rejected:
        print(f"rejected {status.event_id}: {status.reason}", file=sys.stderr)
    if unfinished:
        print(f"memsync: {len(unfinished)} event(s) not finished in time", file=sys.stderr)
        return 1
    return 1 if rejected else 0


def _graph_init(args: argparse.Namespace, settings: Settings) -> int:
    statements = init_schema(runtime.graph())
    print(f"graph schema ready ({len(statements)} constraints and indexes ensured)")
    return 0


def _recall(args: argparse.Namespace, settings: Settings) -> int:
    episodes = recall(runtime.graph(), args.tenant, args.agent, args.channel, args.limit)
    if args.json:
        print(json.dumps([e.model_dump(mode="json") for e in episodes], indent=2))
        return 0
    for e in episodes:
        when = e.created_at.strftime("%Y-%m-%d %H:%M")
        print(f"[{when}] #{e.channel_title or e.channel_id} {e.speaker_label}: {e.content}")
    if not episodes:
        print(f"{args.agent} remembers nothing yet")
    return 0


def _services(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "install":
        localstack.install(settings)
        print("redis-server and Neo4j are installed")
    elif args.action == "up":
        started = localstack.up(settings)
        print(f"started: {', '.join(started) or 'nothing (already running)'}")
    elif args.action == "down":
        stopped = localstack.down(settings)
        print(f"stopped: {', '.join(stopped) or 'nothing'}")
    for state in localstack.status(settings):
        print(state.describe())
    return 0


def _stats(args: argparse.Namespace, settings: Settings) -> int:
    counters: dict[str, Any] = runtime.ledger().stats()
    if args.json:
        print(json.dumps(counters, indent=2, sort_keys=True))
    else:
        for name, value in counters.items():
            print(f"{name:<32} {value}")
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from workers.demo import run_demo

    return run_demo(settings)


if __name__ == "__main__":
    raise SystemExit(main())
