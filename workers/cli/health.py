"""`memsync health [--json]`: can this deployment take turns and give memory back now?

Each check is bounded in time and reported on its own: Redis answers (and is not still loading
its data), Neo4j answers and its search indexes are online (recall is empty from an index that
is still populating), and how many workers answer a ping. Ready means every check passed. Exit
0 ready, 3 a service unreachable, 1 reachable but not ready (indexes populating, no worker).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from memsync.settings import Settings
from workers.cli.errors import EXIT_FAILED, EXIT_UNREACHABLE
from workers.worker.readiness import (
    CHECK_TIMEOUT_SECONDS,
    Check,
    NotReady,
    check_neo4j,
    check_redis,
    timed,
)


def add_health_command(sub: Any) -> None:
    health = sub.add_parser("health", help="are Redis, Neo4j and the workers ready")
    health.add_argument("--json", action="store_true")
    health.add_argument(
        "--no-workers", action="store_true", help="check the services only, not the workers"
    )
    health.set_defaults(handler=_health)


def check_workers(settings: Settings) -> Check:
    def probe() -> str:
        from workers.worker.app import app

        replies = app.control.ping(timeout=CHECK_TIMEOUT_SECONDS) or []
        if not replies:
            raise NotReady("no worker answered a ping")
        return f"{len(replies)} answered a ping"

    return timed("workers", probe, settings)


def health(settings: Settings, *, workers: bool = True) -> list[Check]:
    """Every check, in order; the workers are asked only when Redis answers."""
    checks = [check_redis(settings), check_neo4j(settings)]
    if workers and checks[0].ok:
        checks.append(check_workers(settings))
    return checks


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
