"""The `memsync` command line: worker, emit, graph, recall, dlq, trust, spool, services, demo."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.errors import InvalidEvent, MemsyncError
from pipeline.graph.directory import grant_trust, list_trust, revoke_trust
from pipeline.graph.model import TRUST_KINDS
from pipeline.graph.reader import agent_commitments, agent_facts, recall
from pipeline.graph.schema import init_schema
from pipeline.graph.writer import verify_fact
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from workers import localstack, runtime
from workers.display import describe_memory
from workers.inflight import InFlight
from workers.progress import ProgressBar
from workers.reconcile import sweep
from workers.replay import parse_duration, replay
from workers.settings import INGEST_QUEUE, SYNC_QUEUE, Settings
from workers.spool import Spool


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

    _add_dlq(sub)
    _add_trust(sub)
    _add_facts(sub)

    spool = sub.add_parser("spool", help="the producer's local spool")
    spool.add_argument("action", choices=["status", "flush"])
    spool.set_defaults(handler=_spool)

    rec_cmd = sub.add_parser("reconcile", help="re-send turns left unsettled (a lost message)")
    rec_cmd.add_argument(
        "--older-than", default=None, help="e.g. 10m (default MEMSYNC_RECONCILE_AFTER)"
    )
    rec_cmd.set_defaults(handler=_reconcile)

    demo = sub.add_parser("demo", help="play a sample conversation and print each agent's memory")
    demo.set_defaults(handler=_demo)
    return parser


def _add_dlq(sub: Any) -> None:
    dlq = sub.add_parser("dlq", help="the dead-letter store")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True)
    dlq_list = dlq_sub.add_parser("list", help="entries, oldest failure first")
    dlq_list.add_argument("--json", action="store_true")
    dlq_list.set_defaults(handler=_dlq_list)
    dlq_show = dlq_sub.add_parser("show", help="one entry in full")
    dlq_show.add_argument("id")
    dlq_show.set_defaults(handler=_dlq_show)
    dlq_replay = dlq_sub.add_parser("replay", help="send entries back to their queues")
    dlq_replay.add_argument("ids", nargs="*")
    dlq_replay.add_argument("--all", action="store_true")
    dlq_replay.add_argument("--dry-run", action="store_true")
    dlq_replay.set_defaults(handler=_dlq_replay)
    dlq_purge = dlq_sub.add_parser("purge", help="delete entries for good")
    dlq_purge.add_argument("ids", nargs="*")
    dlq_purge.add_argument("--older-than", default=None, help="e.g. 7d, 12h, 30m")
    dlq_purge.set_defaults(handler=_dlq_purge)


def _add_trust(sub: Any) -> None:
    trust = sub.add_parser("trust", help="the trust directory (strict mode)")
    trust_sub = trust.add_subparsers(dest="trust_command", required=True)
    for name, text in (("grant", "TRUSTER trusts TRUSTEE"), ("revoke", "remove a grant")):
        cmd = trust_sub.add_parser(name, help=text)
        cmd.add_argument("truster", help="agent id, or a human owner's id")
        cmd.add_argument("trustee", help="participant id")
        cmd.add_argument("--tenant", default="default")
        if name == "grant":
            cmd.add_argument("--as", dest="as_", default="connected", choices=TRUST_KINDS)
        cmd.set_defaults(handler=_trust)
    trust_list = trust_sub.add_parser("list", help="grants, optionally of one truster")
    trust_list.add_argument("--truster", default=None)
    trust_list.add_argument("--tenant", default="default")
    trust_list.add_argument("--json", action="store_true")
    trust_list.set_defaults(handler=_trust)


def _add_facts(sub: Any) -> None:
    facts = sub.add_parser("facts", help="what agents know: facts and commitments")
    facts_sub = facts.add_subparsers(dest="facts_command", required=True)
    listing = facts_sub.add_parser("list", help="an agent's facts and commitments")
    listing.add_argument("--agent", required=True)
    listing.add_argument("--tenant", default="default")
    listing.add_argument("--all", action="store_true", help="include superseded facts")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_facts)
    verify = facts_sub.add_parser("verify", help="mark a fact verified (the only way to get it)")
    verify.add_argument("key")
    verify.set_defaults(handler=_facts)


def _facts(args: argparse.Namespace, settings: Settings) -> int:
    graph = runtime.graph()
    if args.facts_command == "verify":
        if verify_fact(graph, args.key):
            print(f"verified {args.key}")
            return 0
        print(f"memsync: no fact {args.key}", file=sys.stderr)
        return 1
    facts = agent_facts(graph, args.tenant, args.agent, include_superseded=args.all)
    commitments = agent_commitments(graph, args.tenant, args.agent)
    if args.json:
        print(
            json.dumps(
                {
                    "facts": [f.model_dump(mode="json") for f in facts],
                    "commitments": [c.model_dump(mode="json") for c in commitments],
                },
                indent=2,
            )
        )
        return 0
    for line in describe_memory(facts, commitments):
        print(line)
    return 0


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
    try:
        for event in events:
            producer.emit(event)
        if not producer.flush(timeout=args.timeout):
            print(f"memsync: {producer.pending} event(s) not published", file=sys.stderr)
            return 1
        print(f"emitted {len(events)} event(s)")
        if not args.wait:
            return 0
        # The producer keeps draining its spool while we wait, should the broker be away.
        bar = ProgressBar(total=len(events), label="syncing")
        statuses = runtime.ledger().wait(
            [(e.tenant, e.event_id) for e in events], timeout=args.timeout, on_progress=bar.update
        )
        bar.close()
    finally:
        producer.close(timeout=5)
        spooled = producer.spool_status().events
        if spooled:
            print(
                f"memsync: {spooled} event(s) wait in the spool ({settings.spool_dir}); "
                "`memsync spool flush` publishes them",
                file=sys.stderr,
            )
    failed = [s for s in statuses if s.finished and not s.complete]
    unfinished = [s for s in statuses if not s.finished]
    synced = sum(s.synced for s in statuses)
    print(f"synced {synced} agent memories for {len(statuses)} event(s)")
    for status in failed:
        why = status.reason or f"{status.dead} agent sync(s) dead-lettered"
        print(f"{status.state} {status.event_id}: {why}", file=sys.stderr)
    if unfinished:
        print(f"memsync: {len(unfinished)} event(s) not finished in time", file=sys.stderr)
        return 1
    return 1 if failed else 0


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


def _dlq_list(args: argparse.Namespace, settings: Settings) -> int:
    letters = runtime.deadletters().entries()
    if args.json:
        print(json.dumps([json.loads(x.model_dump_json()) for x in letters], indent=2))
        return 0
    print(f"{len(letters)} dead letter(s)")
    for x in letters:
        when = datetime.fromtimestamp(x.last_failed_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        what = "/".join(p for p in (x.tenant, x.event_id, x.agent_id) if p) or "-"
        print(f"{x.id}  {when}  {x.stage:<6} {what:<40} x{x.attempts}  {x.error_type}: {x.error}")
    return 0


def _dlq_show(args: argparse.Namespace, settings: Settings) -> int:
    letter = runtime.deadletters().get(args.id)
    if letter is None:
        print(f"memsync: no dead letter {args.id}", file=sys.stderr)
        return 1
    print(json.dumps(json.loads(letter.model_dump_json()), indent=2))
    return 0


def _dlq_replay(args: argparse.Namespace, settings: Settings) -> int:
    from workers.app import app

    if not args.ids and not args.all:
        print("memsync: name entry ids or --all", file=sys.stderr)
        return 2
    store = runtime.deadletters()
    total = store.count() if args.all else len(args.ids)
    bar = ProgressBar(total=total, label="replaying")
    report = replay(
        store, app, None if args.all else args.ids, dry_run=args.dry_run, on_progress=bar.update
    )
    bar.close()
    verb = "would replay" if args.dry_run else "replayed"
    print(f"{verb} {len(report.sent)} dead letter(s)")
    for entry_id, why in report.skipped:
        print(f"skipped {entry_id}: {why}", file=sys.stderr)
    for entry_id in report.missing:
        print(f"no dead letter {entry_id}", file=sys.stderr)
    return 1 if report.missing else 0


def _dlq_purge(args: argparse.Namespace, settings: Settings) -> int:
    store = runtime.deadletters()
    if args.older_than is None and not args.ids:
        print("memsync: name entry ids or --older-than DURATION", file=sys.stderr)
        return 2
    ids = list(args.ids)
    if args.older_than is not None:
        try:
            ids += store.ids_older_than(parse_duration(args.older_than))
        except ValueError as exc:
            print(f"memsync: {exc}", file=sys.stderr)
            return 2
    print(f"purged {store.remove(ids)} dead letter(s)")
    return 0


def _trust(args: argparse.Namespace, settings: Settings) -> int:
    graph = runtime.graph()
    if args.trust_command == "grant":
        grant_trust(graph, args.tenant, args.truster, args.trustee, args.as_)
        print(f"{args.truster} trusts {args.trustee} as {args.as_}")
        return 0
    if args.trust_command == "revoke":
        revoked = revoke_trust(graph, args.tenant, args.truster, args.trustee)
        print(f"revoked: {args.truster} -> {args.trustee}" if revoked else "no such grant")
        return 0 if revoked else 1
    edges = list_trust(graph, args.tenant, args.truster)
    if args.json:
        print(json.dumps([e.model_dump() for e in edges], indent=2))
    for e in [] if args.json else edges:
        print(f"{e.truster} -> {e.trustee} as {e.as_} (since {e.granted_at})")
    return 0


def _spool(args: argparse.Namespace, settings: Settings) -> int:
    from workers.producer import Producer

    if args.action == "flush":
        producer = Producer(settings)
        published = producer.flush_spool()
        producer.close(timeout=5)
        print(f"published {published} spooled event(s)")
    status = Spool(settings.spool_dir).status()
    oldest = "-" if status.oldest_at is None else f"{time.time() - status.oldest_at:.0f}s ago"
    print(
        f"spool {status.path}: {status.events}/{status.max_events} events, "
        f"{status.bytes}/{status.max_bytes} bytes, oldest {oldest}"
    )
    return 0 if args.action == "status" or status.events == 0 else 1


def _reconcile(args: argparse.Namespace, settings: Settings) -> int:
    from workers.app import app

    older = parse_duration(args.older_than) if args.older_than else settings.reconcile_after
    client = runtime.redis_client()

    def send(payload: list[dict[str, Any]]) -> None:
        app.send_task("memsync.ingest", args=(payload,), queue=INGEST_QUEUE)

    report = sweep(InFlight(client), runtime.ledger(), send, older)
    print(f"re-sent {len(report.resent)} unsettled turn(s); {len(report.settled)} already settled")
    print(f"{InFlight(client).count()} turn(s) in flight")
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from workers.demo import run_demo

    return run_demo(settings)


if __name__ == "__main__":
    raise SystemExit(main())
