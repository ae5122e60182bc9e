"""The `memsync` command line: worker, emit, graph, recall, dlq, trust, spool, services, health,
demo, serve.

Every failure ends as one line on stderr (`memsync: ...`, never a traceback nor a password) and
a non-zero exit: 1 the operation failed or is incomplete, 2 bad usage, input or settings,
3 a service (Redis, Neo4j) is unreachable, 130 interrupted. See workers/cli/errors.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.logs import use_json
from memsync.settings import (
    EMBED_QUEUE,
    FOLD_QUEUE,
    INGEST_QUEUE,
    SYNC_QUEUE,
    Settings,
    unknown_variables,
)
from memsync.spool import Spool
from pipeline.errors import InvalidEvent
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from workers.cli.errors import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    describe,
    redact_url,
)
from workers.cli.graph import add_graph_commands
from workers.cli.health import add_health_command
from workers.cli.privacy import add_privacy_commands
from workers.cli.progress import ProgressBar
from workers.cli.replay import parse_duration, replay
from workers.local import localstack
from workers.state.inflight import InFlight
from workers.state.ledger import TurnStatus
from workers.worker import runtime
from workers.worker.reconcile import ingest_sender, sweep

if TYPE_CHECKING:
    from celery import Celery

    from memsync.producer import Producer


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure becomes one line on stderr and a documented exit code."""
    args = _parser().parse_args(argv)
    if args.command != "worker":  # Celery sets up a worker's logging itself
        # Commands report outcomes themselves; library warnings (the producer spooling, say)
        # would only repeat them, so they show with --debug alone.
        logging.basicConfig(
            level=logging.DEBUG if args.debug else logging.CRITICAL,
            format="%(levelname)s %(name)s: %(message)s",
        )
    for name, closest in unknown_variables(os.environ):
        hint = f"; did you mean {closest}?" if closest else ""
        print(f"memsync: warning: {name} is not a memsync setting{hint} (ignored)", file=sys.stderr)
    settings: Settings | None = None
    try:
        settings = Settings()
        if settings.log_format == "json":
            for handler in logging.getLogger().handlers:
                use_json(handler)
        runtime.configure(settings)
        return int(args.handler(args, settings))
    except (Exception, KeyboardInterrupt) as exc:
        if args.debug:
            traceback.print_exc()
        code, line = describe(exc, settings)
        print(f"memsync: {line}", file=sys.stderr)
        return code


def _version() -> str:
    try:
        return metadata.version("memsync")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memsync",
        description=__doc__,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memsync {_version()}")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of failures")
    sub = parser.add_subparsers(dest="command", required=True)

    worker = sub.add_parser("worker", help="run a Celery worker on the memsync queues")
    worker.add_argument(
        "--hostname",
        "-n",
        default=None,
        help="node name, unique per worker (%%h = host); default memsync-PID@%%h",
    )
    worker.add_argument("--concurrency", "-c", type=int, default=None)
    worker.add_argument("--loglevel", "-l", default="INFO")
    worker.add_argument(
        "--queues",
        "-Q",
        default=f"{INGEST_QUEUE},{SYNC_QUEUE},{FOLD_QUEUE}",
        help="comma-separated: ingest, sync, fold, embed (or full queue names); "
        "default ingest,sync,fold (run embed workers on their own)",
    )
    worker.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        help="serve /metrics, /livez and /readyz here (0: any free port); "
        "default MEMSYNC_METRICS_PORT, unset: off",
    )
    worker.set_defaults(handler=_worker)

    emit = sub.add_parser("emit", help="emit turn events from a JSON Lines file")
    emit.add_argument("file", type=Path, help="one TurnEvent per line ('-' for stdin)")
    emit.add_argument("--wait", action="store_true", help="return when every sync is in the graph")
    emit.add_argument("--timeout", type=float, default=600.0, help="seconds --wait may take")
    emit.set_defaults(handler=_emit)

    add_graph_commands(sub)
    add_privacy_commands(sub)

    services = sub.add_parser("services", help="local Redis and Neo4j on loopback")
    services.add_argument("action", choices=["install", "up", "down", "status"])
    services.set_defaults(handler=_services)

    add_health_command(sub)

    stats = sub.add_parser("stats", help="pipeline counters")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(handler=_stats)

    _add_dlq(sub)

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

    serve = sub.add_parser(
        "serve", help="the HTTP API (emit, recall, context) and the inspector (/inspect)"
    )
    serve.add_argument("--host", default=None, help="default MEMSYNC_SERVE_HOST (127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="default MEMSYNC_SERVE_PORT (8077)")
    serve.set_defaults(handler=_serve)
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


# Short names `memsync worker --queues` accepts, e.g. `--queues embed` for an embed-only worker.
_QUEUE_NAMES = {
    "ingest": INGEST_QUEUE,
    "sync": SYNC_QUEUE,
    "fold": FOLD_QUEUE,
    "embed": EMBED_QUEUE,
}


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {text!r}")
    return port


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    if args.metrics_port is not None:
        settings = settings.model_copy(update={"metrics_port": args.metrics_port})
        runtime.configure(settings)
    made: Path | None = None
    if settings.metrics_port is not None:
        # Before the app (and with it prometheus-client) is imported: see metricsfiles.py.
        from workers.worker.metricsfiles import prepare_directory

        made = prepare_directory(settings.metrics_dir)
    try:
        return _run_worker(args, settings)
    finally:
        if made is not None and settings.metrics_dir is None:
            from workers.worker.metricsfiles import remove_directory

            remove_directory(made)


def _run_worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.worker.app import app

    # Celery's default node name (celery@host) would be shared by two workers on one host,
    # which breaks `celery inspect` and remote control; the pid keeps ours apart.
    hostname = args.hostname or f"memsync-{os.getpid()}@%h"
    queues = ",".join(_QUEUE_NAMES.get(q.strip(), q.strip()) for q in args.queues.split(","))
    argv = ["worker", "-Q", queues, "--loglevel", args.loglevel, "--hostname", hostname]
    argv += ["-c", str(args.concurrency or settings.worker_concurrency)]
    return run_celery(app, argv)


def run_celery(app: Celery, argv: list[str]) -> int:
    """Run `celery ARGV` for this app and return its exit status.

    Celery's own `worker_main` discards the status a worker sets when it stops on an
    unrecoverable error, so a supervisor told to restart on failure would never restart it.
    """
    from celery.bin.celery import celery as celery_command
    from click.exceptions import Exit

    celery_command.params[0].default = app
    try:
        status = celery_command.main(args=argv, standalone_mode=False)
    except Exit as exc:
        status = exc.exit_code
    finally:
        celery_command.params[0].default = None
    return status if isinstance(status, int) else 0


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
    from memsync.producer import Producer

    events, errors = read_events(args.file)
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        print(f"memsync: {len(errors)} invalid event(s); nothing was sent", file=sys.stderr)
        return EXIT_USAGE
    deadline = time.monotonic() + args.timeout
    producer = Producer(settings)
    try:
        statuses = _send(producer, events, args)
    except (Exception, KeyboardInterrupt) as exc:
        # One line says both what went wrong and where the events are now.
        if args.debug:
            traceback.print_exc()
        code, line = describe(exc, settings)
        note = _spool_note(_close(producer), settings)
        print(f"memsync: {line}{'; ' + note if note else ''}", file=sys.stderr)
        return code
    note = _spool_note(_close(producer), settings)
    if note:
        where = redact_url(settings.broker_url)
        print(f"memsync: Redis at {where} was unreachable; {note}", file=sys.stderr)
    if statuses is None:
        return EXIT_FAILED
    if not args.wait:
        return EXIT_UNREACHABLE if note else 0
    code = _outcome(statuses)
    if all(s.finished for s in statuses):
        left = _wait_embedded(events, settings, deadline)
        if left:
            print(
                f"memsync: {left} item(s) of these turns still wait for embeddings "
                "(is an embed worker running? see `memsync stats`)",
                file=sys.stderr,
            )
            code = EXIT_FAILED
    return code


def _wait_embedded(events: list[TurnEvent], settings: Settings, deadline: float) -> int:
    """With embeddings on, poll until the turns' episodes (and the memories citing them) have
    vectors, or the deadline; how many still wait."""
    from pipeline.embedder import make_embedder
    from pipeline.graph.embeddings import pending_for_episodes
    from schemas.keys import episode_key

    if make_embedder(settings) is None:
        return 0
    wanted = [episode_key(e.tenant, e.channel.id, m.id) for e in events for m in e.messages]
    graph = runtime.graph()
    while True:
        left = pending_for_episodes(graph, wanted)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def _send(
    producer: Producer, events: list[TurnEvent], args: argparse.Namespace
) -> list[TurnStatus] | None:
    """Emit the events and, with --wait, wait for their syncs; None if they were not all handed
    to the broker or the spool in time."""
    for event in events:
        producer.emit(event)
    if not producer.flush(timeout=args.timeout):
        print(f"memsync: {producer.pending} event(s) not published", file=sys.stderr)
        return None
    print(f"emitted {len(events)} event(s)")
    if not args.wait:
        return []
    # The producer keeps draining its spool while we wait, should the broker be away.
    bar = ProgressBar(total=len(events), label="syncing")
    try:
        return runtime.ledger().wait(
            [(e.tenant, e.event_id) for e in events], timeout=args.timeout, on_progress=bar.update
        )
    finally:
        bar.close()


def _spool_note(spooled: int, settings: Settings) -> str:
    if not spooled:
        return ""
    return (
        f"{spooled} event(s) wait in the spool ({settings.spool_dir}); "
        "`memsync spool flush` publishes them"
    )


def _close(producer: Producer) -> int:
    """Close the producer; how many events it left in the spool. A broker blip here is no
    failure: whatever was not published is in the spool, and that count is what matters."""
    try:
        producer.close(timeout=5)
    except Exception as exc:  # kombu and redis raise many types while dropping a dead connection
        print(f"memsync: warning: closing the broker connection: {exc}", file=sys.stderr)
    try:
        return producer.spool_status().events
    except Exception as exc:  # sqlite trouble must not hide the command's own outcome
        print(f"memsync: warning: cannot read the spool: {exc}", file=sys.stderr)
        return 0


def _outcome(statuses: list[TurnStatus]) -> int:
    """Summarise an `emit --wait`: 0 only if every trusted agent remembers every turn and trust
    left no agent out."""
    failed = [s for s in statuses if s.finished and not s.complete]
    unfinished = [s for s in statuses if not s.finished]
    synced = sum(s.synced for s in statuses)
    print(f"synced {synced} agent memories for {len(statuses)} event(s)")
    for status in failed:
        why = status.reason or f"{status.dead} agent sync(s) dead-lettered"
        print(f"{status.state} {status.event_id}: {why}", file=sys.stderr)
    left_out = [s.untrusted for s in statuses if s.untrusted]
    if left_out:
        print(
            f"memsync: {len(left_out)} event(s) left {sum(left_out)} agent(s) out as untrusted; "
            "see `memsync stats` / the audit stream",
            file=sys.stderr,
        )
    if unfinished:
        print(f"memsync: {len(unfinished)} event(s) not finished in time", file=sys.stderr)
    return EXIT_FAILED if failed or unfinished or left_out else 0


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
    states = localstack.status(settings)
    for state in states:
        print(state.describe())
    down = [state.name for state in states if not state.reachable]
    if down and args.action in {"up", "status"}:
        print(
            f"memsync: {', '.join(down)} down; `memsync services up` starts local ones",
            file=sys.stderr,
        )
        return EXIT_UNREACHABLE
    return 0


def _stats(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.embedder import make_embedder
    from pipeline.graph.embeddings import backlog

    counters: dict[str, Any] = runtime.ledger().stats()
    # The embedding lag: nodes written but not yet embedded (recall is keyword-only for them).
    embedder = make_embedder(settings)
    counters["embed.model"] = embedder.model if embedder is not None else "none"
    problem: Exception | None = None
    if embedder is not None:
        try:
            for label, waiting in backlog(runtime.graph()).items():
                counters[f"embed.backlog.{label}"] = waiting
        except Exception as exc:  # the counters above are still worth printing
            problem = exc
    if args.json:
        print(json.dumps(counters, indent=2, sort_keys=True))
    else:
        for name, value in counters.items():
            print(f"{name:<32} {value}")
    if problem is not None:
        code, line = describe(problem, settings)
        print(f"memsync: embedding backlog unknown: {line}", file=sys.stderr)
        return code
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
    from workers.worker.app import app

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
    result = store.purge(ids)
    print(f"purged {result.removed} dead letter(s)")
    print(result.aof_note)
    return 0


def _spool(args: argparse.Namespace, settings: Settings) -> int:
    from memsync.producer import Producer

    if args.action == "flush":
        producer = Producer(settings)
        taken = producer.flush_spool()
        refused = producer.counters["refused"]
        producer.close(timeout=5)
        print(f"published {taken - refused} spooled event(s), {refused} refused by the broker")
    spool = Spool(settings.spool_dir)
    try:
        status = spool.status()
    finally:
        spool.close()
    oldest = "-" if status.oldest_at is None else f"{time.time() - status.oldest_at:.0f}s ago"
    print(
        f"spool {status.path}: {status.events}/{status.max_events} events, "
        f"{status.bytes}/{status.max_bytes} bytes, oldest {oldest}, "
        f"{status.refused} refused by the broker (kept in its refused table)"
    )
    return 0 if args.action == "status" or status.events == 0 else 1


def _reconcile(args: argparse.Namespace, settings: Settings) -> int:
    from workers.worker.app import app

    older = parse_duration(args.older_than) if args.older_than else settings.reconcile_after
    client = runtime.redis_client()
    report = sweep(
        InFlight(client), runtime.ledger(), ingest_sender(app), older, runtime.deadletters()
    )
    print(f"re-sent {len(report.resent)} unsettled turn(s); {len(report.settled)} already settled")
    print(f"left {len(report.waiting)} turn(s) that may still wait in a queue behind a backlog")
    print(
        f"skipped {len(report.skipped)} in-flight turn(s) it could not handle "
        f"({len(report.dead_lettered)} moved to the dead letters)"
    )
    print(f"{InFlight(client).count()} turn(s) in flight")
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from workers.cli.demo import run_demo

    return run_demo(settings)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    try:
        from memsync.http import serve
    except ImportError as exc:  # the http extra is optional
        print(
            f"memsync: the HTTP API needs the http extra ({exc.name} is missing): "
            "pip install 'memsync[http]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from workers.cli.serve import inspector_routers

    return serve(
        settings, host=args.host, port=args.port, extra_routers=inspector_routers(settings)
    )


if __name__ == "__main__":
    raise SystemExit(main())
