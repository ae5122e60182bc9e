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
from workers.cli.deadletters import add_dlq_commands
from workers.cli.emitting import add_emit_command
from workers.cli.errors import (
    EXIT_CODES,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    describe,
)
from workers.cli.graph import add_graph_commands
from workers.cli.health import add_health_command
from workers.cli.privacy import add_privacy_commands
from workers.cli.replay import parse_duration
from workers.local import localstack
from workers.state.inflight import InFlight
from workers.worker import runtime
from workers.worker.reconcile import ingest_sender, sweep

if TYPE_CHECKING:
    from celery import Celery


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

    add_emit_command(sub)

    add_graph_commands(sub)
    add_privacy_commands(sub)

    services = sub.add_parser("services", help="local Redis and Neo4j on loopback")
    services.add_argument("action", choices=["install", "up", "down", "status"])
    services.set_defaults(handler=_services)

    add_health_command(sub)

    stats = sub.add_parser("stats", help="pipeline counters")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(handler=_stats)

    add_dlq_commands(sub)

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
    from pipeline.graph.embeddings import backlog, oldest_waiting

    counters: dict[str, Any] = runtime.ledger().stats()
    # The embedding lag: nodes written but not yet embedded (recall is keyword-only for them).
    # The model the embed workers store vectors as (int8 under MEMSYNC_EMBED_QUANTIZED).
    embedder = make_embedder(settings, use="batches")
    counters["embed.model"] = embedder.model if embedder is not None else "none"
    if embedder is not None:
        counters["embed.context"] = "on" if settings.embed_context else "off"
    problem: Exception | None = None
    if embedder is not None:
        try:
            for label, waiting in backlog(runtime.graph()).items():
                counters[f"embed.backlog.{label}"] = waiting
            # The lag as time: how long the oldest waiting message has waited (0: none waits).
            oldest = oldest_waiting(runtime.graph())
            waited = 0.0 if oldest is None else (datetime.now(UTC) - oldest).total_seconds()
            counters["embed.lag_seconds"] = round(max(0.0, waited), 1)
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
