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

from memsync.producer import Producer
from memsync.settings import INGEST_QUEUE, SYNC_QUEUE
from pipeline.errors import InvalidEvent
from tests.integration.cluster import Cluster
from tests.integration.load import audit, expected_observed, load_turns, wait_until
from tests.integration.report import report_fault, send_task
from workers.cli.demo import worker_env
from workers.state.deadletter import DeadLetter, DeadLetterStore
from workers.state.ledger import Ledger

# Each test waits on conditions with their own deadlines; the module's budget covers the slowest
# chain of them (Neo4j restarts included) on a busy machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
UNACKED = "unacked"  # kombu's Redis hash of delivered, not yet acked messages


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


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 240) -> float:
    """Poll `condition` until it holds; returns the seconds it took, fails naming `what`."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, (
            f"gave up after {timeout:.0f}s waiting for {what}"
        )
        time.sleep(0.2)
    return time.monotonic() - start


def tenant_letters(store: DeadLetterStore, tenant: str) -> list[DeadLetter]:
    return [x for x in store.entries() if x.tenant == tenant]


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


def test_workers_started_mid_load_share_the_queues(
    cluster: Cluster, ledger: Ledger, tenant: str
) -> None:
    """Horizontal scaling: two more worker processes, started on their own while a load is in
    flight, take work from the shared queues; no memory is written twice or missed."""
    turns = load_turns(tenant, 600)
    expected = expected_observed(turns)
    first, second = turns[:200], turns[200:]
    producer = emit_all(cluster, first)
    done_before = wait_for_progress(ledger, first, 0.1)
    added, logs = [], []
    for _ in range(2):
        logs.append(cluster.root / f"worker-{cluster.started}.log")
        added.append(cluster.start_worker())
    try:
        wait_for(lambda: all(" ready." in log.read_text(errors="replace") for log in logs),
                 "the added workers to be ready")  # fmt: skip
        for turn in second:
            producer.emit(turn)
        assert producer.flush(timeout=60)
        statuses, _ = wait_until(ledger, turns, timeout=240)
        producer.close()
        result = audit(cluster.graph(), tenant, expected)
        tasks = [log.read_text(errors="replace").count(" succeeded in ") for log in logs]
    finally:
        for worker in added:
            worker.stop()
            cluster.workers.remove(worker)
    report_fault(
        "workers added mid-load",
        f"{len(turns)} turns ({len(expected)} agent-episode memories); 2 workers started with "
        f"{done_before} complete; tasks done by the added workers {tasks}; lost {result.lost}, "
        f"duplicated {result.duplicated}",
    )
    assert done_before < len(first), "the load finished before the workers were added"
    assert sum(tasks) > 0, "the added workers took no work from the shared queues"
    assert all(s.complete for s in statuses)
    assert result.exact, result


def test_neo4j_down_mid_load_then_replay_twice(
    cluster: Cluster, ledger: Ledger, tenant: str
) -> None:
    # Small enough that, with Neo4j down, a task's retry comes round within minutes even on a
    # busy machine (retries queue behind every first attempt), large enough to be mid-load.
    turns = load_turns(tenant, 60)
    expected = expected_observed(turns)
    store = DeadLetterStore(redis.Redis.from_url(cluster.settings.broker_url))
    producer = emit_all(cluster, turns)
    wait_for_progress(ledger, turns, 0.05)
    stopped = time.monotonic()
    cluster.stop_neo4j()  # returns once Neo4j has exited; a letter may already exist by then
    # Neo4j stays down until a task has spent its whole retry budget, however slowly the
    # machine runs the retries: replaying dead letters is what this test is about. Both ingest
    # (owner lookups) and sync (writes) need Neo4j, so either may be the one dead-lettered.
    wait_for(
        lambda: tenant_letters(store, tenant) != [],
        "a task to be dead-lettered while Neo4j is down",
        480,
    )
    outage = time.monotonic() - stopped
    cluster.start_neo4j()
    restarted = time.monotonic()
    statuses, _ = wait_until(ledger, turns, timeout=300, complete=False)
    assert all(s.finished for s in statuses), "tasks still retrying 300s after Neo4j restarted"
    letters = tenant_letters(store, tenant)
    assert letters
    assert all(x.stage in ("ingest", "sync") and not x.permanent for x in letters), letters

    for _ in range(2):  # replaying the whole store twice, back to back
        done = run_cli(cluster, "dlq", "replay", "--all")
        assert done.returncode == 0, done.stderr
    statuses, _ = wait_until(ledger, turns, timeout=300)
    recovery = time.monotonic() - restarted
    producer.close()
    assert all(s.complete for s in statuses)
    after_once = audit(cluster.graph(), tenant, expected)

    # The same entries replayed again later, after they were resolved, change nothing.
    written = ledger.stats().get("sync.jobs_written", 0)
    resend(cluster, letters)
    syncs = sum(1 for x in letters if x.stage == "sync")
    wait_for(lambda: ledger.stats().get("sync.jobs_written", 0) >= written + syncs, "the resends")
    wait_for_idle(cluster)
    after_twice = audit(cluster.graph(), tenant, expected)
    assert tenant_letters(store, tenant) == []

    report_fault(
        "neo4j down until a task is dead-lettered",
        f"{len(turns)} turns ({len(expected)} memories) pushed, Neo4j down {outage:.0f}s, "
        f"{len(letters)} tasks dead-lettered ({syncs} syncs) and replayed twice; lost "
        f"{after_once.lost}, "
        f"duplicated {after_once.duplicated}, recovered {recovery:.1f}s after Neo4j restarted",
    )
    assert after_once.exact, after_once
    assert after_twice == after_once


def test_redis_down_while_emitting(cluster: Cluster, ledger: Ledger, tenant: str) -> None:
    turns = load_turns(tenant, 300)
    expected = expected_observed(turns)
    producer = Producer(cluster.settings)
    slowest = 0.0
    for index, turn in enumerate(turns):
        if index == 100:
            cluster.stop_redis()
        if index == 250:
            # Redis comes back only once a publish has failed and its batch is spooled, so the
            # outage is exercised however slowly the publisher thread runs.
            wait_for(lambda: producer.counters["spooled"] > 0, "a batch to be spooled", 120)
            cluster.start_redis()
            restarted = time.monotonic()
        start = time.perf_counter()
        producer.emit(turn)
        slowest = max(slowest, time.perf_counter() - start)
        time.sleep(0.04)  # an emitter's pace, so emits keep arriving through the outage
    assert producer.flush(timeout=60)
    spooled = producer.counters["spooled"]
    # Turns caught in flight when Redis stopped come back through the reconciler, which waits
    # the cluster's reconcile_after (120 s) first.
    statuses, _ = wait_until(ledger, turns, timeout=360)
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
    # emit() must not wait on the broker: an emit that did would last a whole publish timeout
    # (the publisher thread's bound) while Redis is down. Anything shorter is scheduling noise.
    assert slowest < cluster.settings.publish_timeout
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
    store = DeadLetterStore(client)
    bad_ids = {t["event_id"] for t in (wrong_version, huge, stranger)}
    wait_for(
        lambda: bad_ids <= {x.event_id for x in tenant_letters(store, tenant)},
        "the three invalid turns to be dead-lettered",
        120,
    )
    wait_for(
        lambda: any(x.stage == "decode" for x in store.entries()),
        "the unreadable queue item to be dead-lettered",
        120,
    )
    statuses, _ = wait_until(ledger, [good], 120)
    assert statuses[0].complete

    letters = {x.event_id: x for x in tenant_letters(store, tenant)}
    assert "schema_version" in letters[wrong_version["event_id"]].error
    # Refused either for the message (its field named) or, first, for the event's total size.
    assert any(
        reason in letters[huge["event_id"]].error for reason in ("messages.0.content", "bytes")
    )
    assert "messages.0.sender_id" in letters[stranger["event_id"]].error
    assert all(x.permanent and x.payload for x in letters.values())
    unreadable = [x for x in store.entries() if x.stage == "decode"]
    assert any(x.payload == "{this is not json" and "not JSON" in x.error for x in unreadable)
    assert all(w.process.poll() is None for w in cluster.workers[-1:])
    report_fault(
        "poison messages",
        "invalid JSON, schema_version 2, a 10 MB message, an unknown sender: all 4 "
        "dead-lettered with the field named; the good turn was written",
    )


def run_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.cli.main", *args],
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


def wait_for_idle(cluster: Cluster) -> None:
    """Until no task is queued or held by a worker, twice running: all sent work has ended.

    Workers ack late, after a task's graph, ledger and dead-letter writes and after it has sent
    any follow-up task, so empty queues with nothing unacked mean nothing is left to happen.
    """
    client = redis.Redis.from_url(cluster.settings.broker_url)
    seen_idle = 0

    def idle() -> bool:
        nonlocal seen_idle
        pipe = client.pipeline(transaction=True)  # one consistent snapshot of all three
        pipe.llen(INGEST_QUEUE)
        pipe.llen(SYNC_QUEUE)
        pipe.hlen(UNACKED)
        # Twice in a row: a message BRPOP has just taken is briefly in neither place.
        seen_idle = seen_idle + 1 if sum(pipe.execute()) == 0 else 0
        return seen_idle >= 2

    try:
        wait_for(idle, "the queues to drain and every delivered task to be acked")
    finally:
        client.close()
