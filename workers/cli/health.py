"""`memsync health [--json]`: can this deployment take turns and give memory back now?

Each check is bounded in time and reported on its own: Redis answers (and is not still loading
its data), Neo4j answers and its search indexes are online (recall is empty from an index that
is still populating), and how many workers answer a ping. Ready means every check passed. Exit
0 ready, 3 a service unreachable, 1 reachable but not ready (indexes populating, no worker).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import redis

from memsync.settings import Settings
from pipeline.graph.cypher.search import SEARCH_INDEXES
from pipeline.graph.store import GraphStore
from workers.cli.errors import EXIT_FAILED, EXIT_UNREACHABLE, describe

# Long enough for a loaded service to answer, short enough for a probe's own timeout.
CHECK_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True)
class Check:
    """One check's outcome: passed or not, a line saying why, and how long it took."""

    name: str
    ok: bool
    detail: str
    ms: float
    # Unreachable (exit 3) rather than reachable but not ready (exit 1).
    unreachable: bool = False


def add_health_command(sub: Any) -> None:
    health = sub.add_parser("health", help="are Redis, Neo4j and the workers ready")
    health.add_argument("--json", action="store_true")
    health.add_argument(
        "--no-workers", action="store_true", help="check the services only, not the workers"
    )
    health.set_defaults(handler=_health)


def check_redis(settings: Settings) -> Check:
    def probe() -> str:
        client = redis.Redis.from_url(
            settings.broker_url,
            socket_timeout=CHECK_TIMEOUT_SECONDS,
            socket_connect_timeout=CHECK_TIMEOUT_SECONDS,
        )
        try:
            client.ping()
            info: dict[str, Any] = client.info("persistence")
        finally:
            client.close()
        if int(info.get("loading", 0)):
            raise _NotReady("still loading its data")
        return "answers"

    return _timed("redis", probe, settings)


def check_neo4j(settings: Settings) -> Check:
    def probe() -> str:
        graph = GraphStore.connect(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password_value,
            settings.neo4j_database,
            connection_timeout=CHECK_TIMEOUT_SECONDS,
        )
        try:
            with graph.session(write=False) as session:
                states = {r["name"]: r["state"] for r in session.run(SEARCH_INDEXES)}
        finally:
            graph.close()
        if not states:
            raise _NotReady("no search indexes: run `memsync graph init`")
        waiting = sorted(name for name, state in states.items() if state != "ONLINE")
        if waiting:
            raise _NotReady(f"search indexes not online yet: {', '.join(waiting)}")
        return f"answers; {len(states)} search indexes online"

    return _timed("neo4j", probe, settings)


def check_workers(settings: Settings) -> Check:
    def probe() -> str:
        from workers.worker.app import app

        replies = app.control.ping(timeout=CHECK_TIMEOUT_SECONDS) or []
        if not replies:
            raise _NotReady("no worker answered a ping")
        return f"{len(replies)} answered a ping"

    return _timed("workers", probe, settings)


def health(settings: Settings, *, workers: bool = True) -> list[Check]:
    """Every check, in order; the workers are asked only when Redis answers."""
    checks = [check_redis(settings), check_neo4j(settings)]
    if workers and checks[0].ok:
        checks.append(check_workers(settings))
    return checks


class _NotReady(Exception):
    """Reached, but not ready to serve."""


def _timed(name: str, probe: Callable[[], str], settings: Settings) -> Check:
    started = time.perf_counter()
    try:
        detail, ok, unreachable = probe(), True, False
    except _NotReady as exc:
        detail, ok, unreachable = str(exc), False, False
    except Exception as exc:  # any failure to reach is reported, never raised
        code, line = describe(exc, settings)
        detail, ok, unreachable = line, False, code == EXIT_UNREACHABLE
    return Check(name, ok, detail, round((time.perf_counter() - started) * 1000, 1), unreachable)


def _health(args: argparse.Namespace, settings: Settings) -> int:
    checks = health(settings, workers=not args.no_workers)
    ready = all(c.ok for c in checks)
    if args.json:
        print(json.dumps({"ready": ready, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        for c in checks:
            print(f"{c.name:<8} {'ok' if c.ok else 'FAIL':<5} {c.ms:>7.1f} ms  {c.detail}")
        print("ready" if ready else "not ready")
    if ready:
        return 0
    return EXIT_UNREACHABLE if any(c.unreachable for c in checks) else EXIT_FAILED
