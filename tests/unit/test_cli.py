"""The `memsync` CLI fails with one line and a documented exit code, never a traceback.

Services are pointed at loopback ports nothing listens on, so no real service is touched.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import neo4j.exceptions
import pytest
import redis
from pydantic import SecretStr

from memsync.settings import Settings, unknown_variables
from workers.cli import emitting
from workers.cli import main as cli
from workers.cli.errors import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, describe, redact_url
from workers.local.services import free_port
from workers.state.ledger import TurnStatus
from workers.worker import runtime

MEMSYNC = Path(sys.executable).parent / "memsync"
EVENT = (
    '{"schema_version": 1, "event_id": "e-1", "channel": {"id": "c-1", "kind": "dm"}, '
    '"participants": [{"id": "u-1", "kind": "human"}], '
    '"messages": [{"id": "m-1", "role": "human", "sender_id": "u-1", "content": "hi", '
    '"created_at": "2026-01-01T00:00:00Z"}]}'
)


def _down_env(tmp_path: Path) -> dict[str, str]:
    port = free_port()
    return {
        "MEMSYNC_BROKER_URL": f"redis://:hunter2@127.0.0.1:{port}/0",
        "MEMSYNC_NEO4J_URI": f"bolt://127.0.0.1:{port}",
        "MEMSYNC_NEO4J_PASSWORD": "s3cret-pw",
        "MEMSYNC_STATE_DIR": str(tmp_path / "state"),
        "MEMSYNC_SPOOL_DIR": str(tmp_path / "spool"),
        "MEMSYNC_BROKER_TIMEOUT": "1",
        "MEMSYNC_PUBLISH_TIMEOUT": "0.5",
        "MEMSYNC_NEO4J_CONNECT_TIMEOUT": "1",
        "MEMSYNC_NEO4J_RETRY_SECONDS": "0",
    }


@pytest.fixture()
def down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Only the settings below, every service on a closed port."""
    for name in list(os.environ):
        if name.upper().startswith("MEMSYNC_"):
            monkeypatch.delenv(name)
    env = _down_env(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield env
    runtime.close()
    runtime.reset()


def _one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memsync: ")
    assert "hunter2" not in err
    assert "s3cret-pw" not in err
    return lines[0]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("MEMSYNC_")}
    return subprocess.run(
        [str(MEMSYNC), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["stats"],
        ["stats", "--json"],
        ["dlq", "list"],
        ["dlq", "show", "x1"],
        ["dlq", "replay", "--all"],
        ["dlq", "replay", "x1"],
        ["dlq", "purge", "x1"],
        ["dlq", "purge", "--older-than", "1d"],
        ["reconcile"],
    ],
)
def test_redis_down_is_one_line_and_exit_3(
    argv: list[str], down: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == EXIT_UNREACHABLE
    line = _one_line(capsys.readouterr().err)
    assert "Redis at redis://:***@127.0.0.1:" in line
    assert "MEMSYNC_BROKER_URL" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["graph", "init"],
        ["recall", "--agent", "a-1"],
        ["facts", "list", "--agent", "a-1"],
        ["facts", "verify", "k1"],
        ["trust", "list"],
        ["trust", "grant", "a-1", "u-1"],
        ["trust", "revoke", "a-1", "u-1"],
    ],
)
def test_neo4j_down_is_one_line_and_exit_3(
    argv: list[str], down: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == EXIT_UNREACHABLE
    line = _one_line(capsys.readouterr().err)
    assert "Neo4j at bolt://127.0.0.1:" in line
    assert "MEMSYNC_NEO4J_URI" in line


def test_trust_own_with_neo4j_down(
    down: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["trust", "own", "a-1", "u-1"]) == EXIT_UNREACHABLE
    assert "Neo4j at" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["trust", "grant", "a-1", "u-1", "--tenant", "no spaces"], "tenant"),
        (["trust", "grant", " ", "u-1"], "truster"),
        (["trust", "revoke", "a-1", "x" * 300], "trustee"),
        (["trust", "list", "--tenant", "bad/tenant"], "tenant"),
        (["trust", "list", "--truster", ""], "truster"),
        (["trust", "own", "", "u-1"], "agent"),
        (["trust", "own", "a-1", "u-1", "--tenant", "a" * 65], "tenant"),
        (["trust", "own", "a-1", "   "], "owner"),
        (["recall", "--agent", ""], "agent"),
        (["facts", "list", "--agent", "a-1", "--tenant", "t!"], "tenant"),
    ],
)
def test_ids_are_validated_as_events_are(
    argv: list[str], field: str, down: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Neo4j is down: a refusal with exit 2 shows validation ran before any connection.
    assert cli.main(argv) == EXIT_USAGE
    assert _one_line(capsys.readouterr().err).startswith(f"memsync: {field}: ")


def test_emit_missing_file(down: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["emit", "/nonexistent/turns.jsonl"]) == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert "/nonexistent/turns.jsonl" in line
    assert "No such file" in line


def test_emit_with_redis_down_spools_and_flush_fails_cleanly(
    down: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(EVENT + "\n")
    assert cli.main(["emit", str(turns)]) == EXIT_UNREACHABLE
    line = _one_line(capsys.readouterr().err)
    assert "1 event(s) wait in the spool" in line

    assert cli.main(["emit", "--wait", "--timeout", "1", str(turns)]) == EXIT_UNREACHABLE
    line = _one_line(capsys.readouterr().err)
    assert "Redis at" in line
    assert "2 event(s) wait in the spool" in line

    assert cli.main(["spool", "flush"]) == EXIT_UNREACHABLE
    assert "Redis at" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MEMSYNC_PRODUCER_BATCH", "abc"),
        ("MEMSYNC_PRODUCER_BATCH", "-1"),
        ("MEMSYNC_TRUST_MODE", "lax"),
    ],
)
def test_bad_setting_value(
    name: str,
    value: str,
    down: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(name, value)
    assert cli.main(["stats"]) == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"memsync: bad setting {name}={value!r}: ")


def test_misspelt_variable_warns_with_the_closest_name(
    down: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMSYNC_BROKR_URL", "redis://127.0.0.1:1/0")
    assert cli.main(["stats"]) == EXIT_UNREACHABLE  # it went on, with the real setting
    warning, failure = capsys.readouterr().err.strip().splitlines()
    assert "MEMSYNC_BROKR_URL" in warning
    assert "did you mean MEMSYNC_BROKER_URL?" in warning
    assert failure.startswith("memsync: Redis at")


def test_unknown_variables() -> None:
    env = {
        "MEMSYNC_BROKR_URL": "x",
        "MEMSYNC_BROKER_URL": "x",
        "memsync_trust_mode": "open",
        "MEMSYNC_TEST_NEO4J_URI": "x",
        "MEMSYNC_QQQQQQQQQQ": "x",
        "HOME": "/root",
    }
    assert unknown_variables(env) == [
        ("MEMSYNC_BROKR_URL", "MEMSYNC_BROKER_URL"),
        ("MEMSYNC_QQQQQQQQQQ", None),
    ]


def test_services_status_is_non_zero_when_down(
    down: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["services", "status"]) == EXIT_UNREACHABLE
    captured = capsys.readouterr()
    assert "down" in captured.out
    assert "redis, neo4j down" in _one_line(captured.err)


def test_services_status_is_zero_when_both_answer(
    down: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        monkeypatch.setenv("MEMSYNC_BROKER_URL", f"redis://127.0.0.1:{port}/0")
        monkeypatch.setenv("MEMSYNC_NEO4J_URI", f"bolt://127.0.0.1:{port}")
        assert cli.main(["services", "status"]) == 0
    assert capsys.readouterr().err == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == "memsync 0.1.0"


def test_worker_node_names_are_unique_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def run(app: Any, argv: list[str]) -> int:
        seen.append(argv)
        return 0

    monkeypatch.setattr(cli, "run_celery", run)
    settings = Settings()
    assert cli._worker(cli._parser().parse_args(["worker"]), settings) == 0
    assert cli._worker(cli._parser().parse_args(["worker", "-n", "w2@%h"]), settings) == 0
    default, named = seen
    assert default[default.index("--hostname") + 1] == f"memsync-{os.getpid()}@%h"
    assert named[named.index("--hostname") + 1] == "w2@%h"


def _status(event_id: str, untrusted: int) -> TurnStatus:
    return TurnStatus("t", event_id, "accepted", expected=1, synced=1, untrusted=untrusted)


def test_wait_outcome_counts_agents_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    statuses: list[TurnStatus] = [_status("e1", 2), _status("e2", 0), _status("e3", 3)]
    assert emitting._outcome(statuses) == EXIT_FAILED
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "memsync: 2 event(s) left 5 agent(s) out as untrusted; "
        "see `memsync stats` / the audit stream",
        f"memsync: {emitting.TRUST_HINT}",
    ]
    assert "MEMSYNC_TRUST_MODE=open" in emitting.TRUST_HINT
    assert emitting._outcome([_status("e1", 0)]) == 0


def test_closing_the_producer_survives_a_broker_blip(capsys: pytest.CaptureFixture[str]) -> None:
    class Blip:
        def close(self, timeout: float) -> bool:
            raise redis.ConnectionError("Connection reset by peer")

        def spool_status(self) -> Any:
            raise OSError("disk gone")

    assert emitting._close(Blip()) == 0  # type: ignore[arg-type]
    assert "Traceback" not in capsys.readouterr().err


def test_credentials_never_printed() -> None:
    settings = Settings(
        broker_url="redis://user:pw1@127.0.0.1:1/0",
        neo4j_uri="bolt://127.0.0.1:1",
        neo4j_password=SecretStr("pw2"),
    )
    assert redact_url(settings.broker_url) == "redis://user:***@127.0.0.1:1/0"
    for exc in (
        redis.ConnectionError("Error 111"),
        redis.AuthenticationError("invalid password"),
        neo4j.exceptions.AuthError("unauthorized"),
    ):
        code, line = describe(exc, settings)
        assert code in {EXIT_USAGE, EXIT_UNREACHABLE}
        assert "pw1" not in line
        assert "pw2" not in line


def test_busy_or_slow_services_are_unreachable() -> None:
    code, line = describe(redis.BusyLoadingError("Redis is loading the dataset"), None)
    assert code == EXIT_UNREACHABLE
    assert line.startswith("Redis is unreachable (Redis is loading")
    assert describe(redis.TimeoutError("Timeout reading from socket"), None)[0] == 3
    assert describe(neo4j.exceptions.ServiceUnavailable("gone"), None)[0] == 3


def test_unexpected_errors_are_one_line() -> None:
    code, line = describe(ValueError("boom\nsecond line"), None)
    assert code == EXIT_FAILED
    assert "\n" not in line
    assert "boom second line" in line


# -- the installed script, in a process of its own -------------------------------------------------


@pytest.mark.skipif(not MEMSYNC.exists(), reason="the memsync script is not installed")
@pytest.mark.parametrize(
    ("args", "extra", "code", "text"),
    [
        (["stats"], {}, EXIT_UNREACHABLE, "memsync: Redis at"),
        (["trust", "list"], {}, EXIT_UNREACHABLE, "memsync: Neo4j at"),
        (["emit", "missing.jsonl"], {}, EXIT_USAGE, "missing.jsonl: No such file"),
        (["stats"], {"MEMSYNC_PRODUCER_BATCH": "abc"}, EXIT_USAGE, "MEMSYNC_PRODUCER_BATCH"),
        (["services", "status"], {}, EXIT_UNREACHABLE, "down"),
    ],
)
def test_script(
    args: list[str], extra: dict[str, str], code: int, text: str, tmp_path: Path
) -> None:
    done = _run(args, {**_down_env(tmp_path), **extra})
    assert done.returncode == code, done.stderr
    assert text in _one_line(done.stderr)


@pytest.mark.skipif(not MEMSYNC.exists(), reason="the memsync script is not installed")
def test_script_version_and_misspelt_variable(tmp_path: Path) -> None:
    done = _run(["--version"], {})
    assert done.returncode == 0
    assert done.stdout.strip() == "memsync 0.1.0"
    done = _run(["stats"], {**_down_env(tmp_path), "MEMSYNC_NEO4J_URL": "bolt://x"})
    assert done.returncode == EXIT_UNREACHABLE
    assert "Traceback" not in done.stderr
    assert "did you mean MEMSYNC_NEO4J_URI?" in done.stderr.splitlines()[0]
