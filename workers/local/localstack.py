"""`memsync services up|down|status`: long-lived local Redis and Neo4j tracked by pid files."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from memsync.settings import Settings
from workers.local import services


@dataclass(frozen=True)
class ServiceState:
    name: str
    host: str
    port: int
    pid: int | None
    reachable: bool

    def describe(self) -> str:
        owner = f"pid {self.pid}" if self.pid else "not started by memsync"
        state = "up" if self.reachable else "down"
        return f"{self.name:<6} {self.host}:{self.port:<6} {state:<5} ({owner})"


def _run_dir(settings: Settings) -> Path:
    return settings.state_dir / "run"


def _pidfile(settings: Settings, name: str) -> Path:
    return _run_dir(settings) / f"{name}.pid"


def _read_pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def install(settings: Settings) -> None:
    """Install what local services need: Redis (Debian), Neo4j jars (Maven), the launcher."""
    services.ensure_redis()
    services.ensure_neo4j(settings.state_dir)


def up(settings: Settings) -> list[str]:
    """Start Redis and Neo4j on the configured addresses unless something already answers there."""
    started: list[str] = []
    services.private_dir(settings.state_dir)
    services.private_dir(_run_dir(settings))
    services.private_dir(settings.state_dir / "data")
    host, port = settings.broker_address()
    if not services.port_open(host, port):
        redis = services.start_redis(
            host, port, settings.state_dir / "data" / "redis", aof=True, detach=True
        )
        _pidfile(settings, "redis").write_text(str(redis.process.pid))
        started.append("redis")
    host, port = settings.neo4j_address()
    if not services.port_open(host, port):
        neo4j = services.start_neo4j(
            host,
            port,
            settings.state_dir / "data" / "neo4j",
            settings.state_dir,
            heap_mb=settings.neo4j_heap_mb,
            page_cache_mb=settings.neo4j_page_cache_mb,
            detach=True,
        )
        _pidfile(settings, "neo4j").write_text(str(neo4j.process.pid))
        started.append("neo4j")
    return started


def down(settings: Settings, names: tuple[str, ...] = ("neo4j", "redis")) -> list[str]:
    """Stop the services memsync started (by pid file), waiting for a clean shutdown."""
    stopped: list[str] = []
    for name in names:
        path = _pidfile(settings, name)
        pid = _read_pid(path)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and _read_pid(path) is not None:
                time.sleep(0.2)
            if _read_pid(path) is not None:
                os.kill(pid, signal.SIGKILL)
            stopped.append(name)
        path.unlink(missing_ok=True)
    return stopped


def status(settings: Settings) -> list[ServiceState]:
    states = []
    for name, (host, port) in (
        ("redis", settings.broker_address()),
        ("neo4j", settings.neo4j_address()),
    ):
        states.append(
            ServiceState(
                name=name,
                host=host,
                port=port,
                pid=_read_pid(_pidfile(settings, name)),
                reachable=services.port_open(host, port),
            )
        )
    return states
