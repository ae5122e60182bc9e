"""Readiness checks of the services memsync needs, each bounded in time and reported on its
own: used by `memsync health` and by each worker's /readyz (workers/worker/exporter.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from memsync.settings import Settings
from pipeline.graph.cypher.schema import PING
from pipeline.graph.cypher.search import SEARCH_INDEXES
from pipeline.graph.store import GraphStore
from workers.cli.errors import EXIT_UNREACHABLE, describe

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
            raise NotReady("still loading its data")
        return "answers"

    return timed("redis", probe, settings)


def check_neo4j(settings: Settings, *, indexes: bool = True) -> Check:
    """Neo4j answers and, with `indexes`, every search index is online (recall needs them;
    a worker's writes do not)."""

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
                if not indexes:
                    session.run(PING).consume()
                    return "answers"
                states = {r["name"]: r["state"] for r in session.run(SEARCH_INDEXES)}
        finally:
            graph.close()
        if not states:
            raise NotReady("no search indexes: run `memsync graph init`")
        waiting = sorted(name for name, state in states.items() if state != "ONLINE")
        if waiting:
            raise NotReady(f"search indexes not online yet: {', '.join(waiting)}")
        return f"answers; {len(states)} search indexes online"

    return timed("neo4j", probe, settings)


class NotReady(Exception):
    """Reached, but not ready to serve."""


def timed(name: str, probe: Callable[[], str], settings: Settings) -> Check:
    started = time.perf_counter()
    try:
        detail, ok, unreachable = probe(), True, False
    except NotReady as exc:
        detail, ok, unreachable = str(exc), False, False
    except Exception as exc:  # any failure to reach is reported, never raised
        code, line = describe(exc, settings)
        detail, ok, unreachable = line, False, code == EXIT_UNREACHABLE
    return Check(name, ok, detail, round((time.perf_counter() - started) * 1000, 1), unreachable)
