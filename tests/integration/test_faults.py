"""Fault injection on real processes: nothing accepted is lost, nothing is written twice.

Each test drives a load of real group-chat turns through its own Redis, Neo4j and worker
processes, breaks one of them mid-load, and then audits the graph against what the pure stages
say must be there. Figures go to the terminal summary (and .memsync/fault-report.txt).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from pipeline.errors import InvalidEvent
from tests.integration.cluster import Cluster
from tests.integration.load import audit, expected_observed, load_turns, wait_until
from tests.integration.report import report_fault, send_task
from workers.deadletter import DeadLetter, DeadLetterStore
from workers.demo import worker_env
from workers.ledger import Ledger
from workers.producer import Producer
from workers.settings import INGEST_QUEUE

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    c.start_redis()
    c.start_neo4j()
    c.init_graph()
    c.start_worker()
    yield c
    c.stop()


@pytest.fixture()
def tenant() -> str:
    return f"f{uuid.uuid4().hex[:10]}"


@pytest.fixture()
def ledger(cluster: Cluster) -> Ledger:
    return Ledger(redis.Redis.from_url(cluster.settings.broker_url))


def emit_all(cluster: Cluster, turns: list[dict[str, Any]]) -> Producer:
    producer = Producer(cluster.settings)
    for turn in turns:
        producer.emit(turn)
    assert producer.flush(timeout=60)
    return producer


def wait_for_progress(ledger: Ledger, turns: list[dict[str, Any]], fraction: float) -> int:
    """Block until at least `fraction` of the turns are complete; returns how many are."""
    keys = [(t["tenant"], t["event_id"]) for t in turns]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = sum(1 for s in ledger.statuses(keys) if s.complete)
        if done >= fraction * len(turns):
            return done
        time.sleep(0.05)
    raise AssertionError("the load made no progress")


def disrupt_mid_load(
    cluster: Cluster,
    ledger: Ledger,
    tenant: str,
    count: int,
    what: str,
    disrupt: Callable[[], None],
) -> None:
    """Push a load, break something once a tenth is done, then audit the graph exactly."""
    turns = load_turns(tenant, count)
    expected = expected_observed(turns)
    producer = emit_all(cluster, turns)
    done_before = wait_for_progress(ledger, turns, 0.1)
    disrupt()
    since = time.monotonic()
    statuses, _ = wait_until(ledger, turns, timeout=240)
    recovery = time.monotonic() - since
    producer.close()

    result = audit(cluster.graph(), tenant, expected)
    report_fault(
        what,
        f"{len(turns)} turns ({len(expected)} agent-episode memories) pushed, disrupted with "
        f"{done_before} complete; lost {result.lost}, duplicated {result.duplicated}, "
        f"recovered {recovery:.1f}s after the disruption",
    )
    assert done_before < len(turns), "the load finished before the disruption: nothing tested"
    assert all(s.complete for s in statuses)
    assert result.exact, result
    assert result.episodes == result.said == len({e for _, e in expected})


def test_kill_9_worker_mid_load(cluster: Cluster, ledger: Ledger, tenant: str) -> None:
    victim = cluster.workers[-1]

    def kill_and_replace() -> None:
        cluster.kill_worker(victim)
        cluster.start_worker()

    disrupt_mid_load(cluster, ledger, tenant, 400, "kill -9 worker", kill_and_replace)


def test_neo4j_down_mid_load_then_replay_twice(
    cluster: Cluster, ledger: Ledger, tenant: str
) -> None:
    turns = load_turns(tenant, 200)
    expected = expected_observed(turns)
    store = DeadLetterStore(redis.Redis.from_url(cluster.settings.broker_url))
    producer = emit_all(cluster, turns)
    wait_for_progress(ledger, turns, 0.05)
    cluster.stop_neo4j()
    time.sleep(15)  # longer than a task's whole retry budget, so some syncs are dead-lettered
    cluster.start_neo4j()
    restarted = time.monotonic()
    wait_until(ledger, turns, timeout=180, complete=False)
    letters = [x for x in store.entries() if x.tenant == tenant]
    assert letters, "Neo4j came back before any retry budget ran out: nothing was dead-lettered"
    assert all(x.stage == "sync" and not x.permanent for x in letters)

    for _ in range(2):  # replaying the whole store twice, back to back
        done = run_cli(cluster, "dlq", "replay", "--all")
        assert done.returncode == 0, done.stderr
    statuses, _ = wait_until(ledger, turns, timeout=180)
    recovery = time.monotonic() - restarted
    producer.close()
    assert all(s.complete for s in statuses)
    after_once = audit(cluster.graph(), tenant, expected)

    # The same entries replayed again later, after they were resolved, change nothing.
    written = ledger.stats().get("sync.jobs_written", 0)
    resend(cluster, letters)
    wait_for_stat(ledger, "sync.jobs_written", written + len(letters))
    after_twice = audit(cluster.graph(), tenant, expected)

    report_fault(
        "neo4j down 15s",
        f"{len(turns)} turns ({len(expected)} memories) pushed, {len(letters)} syncs "
        f"dead-lettered and replayed twice; lost {after_once.lost}, duplicated "
        f"{after_once.duplicated}, recovered {recovery:.1f}s after Neo4j restarted",
    )
    assert after_once.exact, after_once
    assert after_twice == after_once
    assert [x for x in store.entries() if x.tenant == tenant] == []


def test_redis_down_while_emitting(cluster: Cluster, ledger: Ledger, tenant: str) -> None:
    turns = load_turns(tenant, 300)
    expected = expected_observed(turns)
    producer = Producer(cluster.settings)
    slowest = 0.0
    for index, turn in enumerate(turns):
        if index == 100:
            cluster.stop_redis()
        if index == 250:
            cluster.start_redis()
            restarted = time.monotonic()
        start = time.perf_counter()
        producer.emit(turn)
        slowest = max(slowest, time.perf_counter() - start)
        time.sleep(0.04)
    assert producer.flush(timeout=60)
    spooled = producer.counters["spooled"]
    statuses, _ = wait_until(ledger, turns, timeout=240)
    recovery = time.monotonic() - restarted
    producer.close()

    result = audit(cluster.graph(), tenant, expected)
    report_fault(
        "redis down while emitting",
        f"{len(turns)} turns ({len(expected)} memories) emitted, {spooled} spooled while Redis "
        f"was down, slowest emit {slowest * 1000:.1f} ms; lost {result.lost}, duplicated "
        f"{result.duplicated}, recovered {recovery:.1f}s after Redis restarted",
    )
    assert spooled > 0, "nothing reached the spool: the outage was not exercised"
    # emit() must not wait on the broker: its bound is the 1 s publish timeout, far above this.
    assert slowest < 0.25
    assert producer.spool_status().events == 0
    assert all(s.complete for s in statuses)
    assert result.exact, result


def test_redis_restart_mid_load_with_aof(cluster: Cluster, ledger: Ledger, tenant: str) -> None:
    def restart() -> None:
        cluster.stop_redis()
        cluster.start_redis()

    disrupt_mid_load(cluster, ledger, tenant, 300, "redis restart (AOF)", restart)


def test_poison_messages_are_dead_lettered(cluster: Cluster, ledger: Ledger, tenant: str) -> None:
    good, wrong_version, huge, stranger = load_turns(tenant, 4)
    wrong_version["schema_version"] = 2
    huge["messages"][0]["content"] = "x" * 10_000_000
    stranger["messages"][0]["sender_id"] = "u-stranger"
    client = redis.Redis.from_url(cluster.settings.broker_url)
    client.lpush(INGEST_QUEUE, b"{this is not json")
    door = Producer(cluster.settings)
    for bad in (wrong_version, huge, stranger):
        with pytest.raises(InvalidEvent):
            door.emit(bad)  # refused at the door...
        send_task(cluster.settings.broker_url, "memsync.ingest", [bad])  # ...pushed anyway
    door.close()
    emit_all(cluster, [good]).close()
    statuses, _ = wait_until(ledger, [good, wrong_version, huge, stranger], 60, complete=False)
    assert statuses[0].complete

    letters = {x.event_id: x for x in DeadLetterStore(client).entries() if x.tenant == tenant}
    assert "schema_version" in letters[wrong_version["event_id"]].error
    assert "messages.0.content" in letters[huge["event_id"]].error
    assert "messages.0.sender_id" in letters[stranger["event_id"]].error
    assert all(x.permanent and x.payload for x in letters.values())
    unreadable = [x for x in DeadLetterStore(client).entries() if x.stage == "decode"]
    assert any(x.payload == "{this is not json" and "not JSON" in x.error for x in unreadable)
    assert all(w.process.poll() is None for w in cluster.workers[-1:])
    report_fault(
        "poison messages",
        "invalid JSON, schema_version 2, a 10 MB message, an unknown sender: all 4 "
        "dead-lettered with the field named; the good turn was written",
    )


def run_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.cli", *args],
        env=worker_env(cluster.settings),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def resend(cluster: Cluster, letters: list[DeadLetter]) -> None:
    for letter in letters:
        send_task(cluster.settings.broker_url, letter.task, letter.payload, letter.queue)


def wait_for_stat(ledger: Ledger, name: str, target: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while ledger.stats().get(name, 0) < target:
        assert time.monotonic() < deadline, f"{name} stayed below {target}"
        time.sleep(0.2)
    time.sleep(0.5)  # let the ledger writes that follow the graph write land too
