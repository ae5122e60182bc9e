"""Operator commands against real services: `emit --wait` outcomes and worker node names."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsync.settings import Settings
from workers.cli.demo import worker_env
from workers.local import services

pytestmark = pytest.mark.integration

MEMSYNC = Path(sys.executable).parent / "memsync"


def _event(tenant: str, event_id: str, kind: str, agents: list[dict[str, Any]]) -> str:
    human = {"id": "u-dev", "kind": "human", "display_name": "Devon", "handle": "devon"}
    return json.dumps(
        {
            "schema_version": 1,
            "event_id": event_id,
            "tenant": tenant,
            "channel": {"id": f"ch-{event_id}", "kind": kind},
            "participants": [human, *agents],
            "messages": [
                {
                    "id": f"m-{event_id}",
                    "role": "human",
                    "sender_id": "u-dev",
                    "content": "I prefer window seats",
                    "created_at": "2026-11-29T10:00:00Z",
                }
            ],
        }
    )


OWNED = {"id": "a-own", "kind": "agent", "owner_id": "u-dev"}
STRAY = {"id": "a-stray", "kind": "agent"}  # no owner, no grants: untrusted in strict mode


def _memsync(args: list[str], settings: Settings) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MEMSYNC), *args],
        env=worker_env(settings),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_emit_wait_fails_with_a_summary_when_trust_left_agents_out(
    settings: Settings, worker: services.Service, tenant: str, tmp_path: Path
) -> None:
    assert settings.trust_mode == "strict"
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        _event(tenant, "e-group", "group", [OWNED, STRAY])
        + "\n"
        + _event(tenant, "e-dm", "dm", [OWNED])
        + "\n"
    )
    done = _memsync(["emit", "--wait", "--timeout", "120", str(turns)], settings)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "synced 2 agent memories for 2 event(s)" in done.stdout
    assert (
        "memsync: 1 event(s) left 1 agent(s) out as untrusted; "
        "see `memsync stats` / the audit stream"
    ) in done.stderr.splitlines()


def test_emit_wait_succeeds_when_every_agent_is_trusted(
    settings: Settings, worker: services.Service, tenant: str, tmp_path: Path
) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(_event(tenant, "e-dm", "dm", [OWNED]) + "\n")
    done = _memsync(["emit", "--wait", "--timeout", "120", str(turns)], settings)
    assert done.returncode == 0, done.stderr
    assert "synced 1 agent memories for 1 event(s)" in done.stdout


class _Workers:
    """`memsync worker` processes started by a test, stopped at its end whatever happens."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.env = worker_env(settings)
        self.root = root
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self) -> Path:
        log = self.root / f"worker-{len(self.started)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(MEMSYNC), "worker", "-c", "1", "--loglevel", "INFO"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=services.PROJECT_ROOT,
            )
        self.started.append((process, log))
        return log

    def wait_ready(self, log: Path, timeout: float = 120) -> str:
        """The node name the worker announced as ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"(\S+@\S+) ready\.", log.read_text(errors="replace"))
            if found:
                return found.group(1)
            time.sleep(0.2)
        raise AssertionError(f"worker not ready:\n{log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        for process, _ in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, _ in self.started:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@pytest.fixture()
def extra_workers(settings: Settings, tmp_path: Path) -> Iterator[_Workers]:
    workers = _Workers(settings, tmp_path)
    yield workers
    workers.stop()


def test_two_workers_on_one_host_get_distinct_node_names(
    settings: Settings, worker: services.Service, extra_workers: _Workers
) -> None:
    logs = [extra_workers.start(), extra_workers.start()]
    names = [extra_workers.wait_ready(log) for log in logs]
    assert names[0] != names[1]
    for (process, _), name in zip(extra_workers.started, names, strict=True):
        assert name.startswith(f"memsync-{process.pid}@")
    ping = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "workers.worker.app", "inspect", "ping", "--json"],
        env=worker_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=services.PROJECT_ROOT,
    )
    assert ping.returncode == 0, ping.stdout + ping.stderr
    replies: dict[str, Any] = json.loads(ping.stdout)  # {node name: {"ok": "pong"}}
    assert set(names) <= set(replies), ping.stdout
    extra_workers.stop()
    for process, _ in extra_workers.started:
        assert process.returncode == 0
