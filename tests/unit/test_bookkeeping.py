"""Redis bookkeeping on fakeredis: keys that cannot collide, a reconciler that cannot stop, a
bounded dead-letter store, and progress that rides out a Redis blip."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from typing import Any

import fakeredis
import pytest
import redis
from celery import Celery

from memsync import keys
from memsync.settings import Settings
from pipeline.errors import BrokerUnavailable, DeadLetterUnavailable, RetryableError
from pipeline.ingest import TurnAccount
from schemas.records import ChannelRef, Speaker, SyncJob, TrustDecision
from workers.cli.replay import replay
from workers.state import ledger as ledger_module
from workers.state.deadletter import DeadLetter, DeadLetterStore, letters_for
from workers.state.inflight import InFlight
from workers.state.ledger import Ledger
from workers.state.redisfaults import redis_errors
from workers.worker import runtime
from workers.worker.reconcile import ReconcileStep, sweep

# Ids an adversary (or an unlucky platform) might send: suffixes of other keys, separators,
# escapes of separators, and a hash tag.
NASTY_IDS = [
    "e",
    "e:synced",
    "e:dead",
    "e:synced:dead",
    "a/b",
    "a%2Fb",
    "a%252Fb",
    "x:y",
    "%3A",
    ":",
    "/",
    "{tag}",
    "é ü",
]
TENANTS = ["t", "t/e", "t:e", "t%2Fe"]


def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def speaker(tenant: str, agent_id: str) -> Speaker:
    return Speaker(
        key=f"{tenant}:{agent_id}",
        id=agent_id,
        kind="agent",
        display_name=agent_id,
        handle=agent_id,
        label=f"{agent_id} (@{agent_id})",
    )


def job(tenant: str, event_id: str, agent_id: str) -> SyncJob:
    return SyncJob(
        tenant=tenant,
        event_id=event_id,
        agent=speaker(tenant, agent_id),
        channel=ChannelRef(key=f"{tenant}:channel:c", id="c", kind="group"),
        participants=[speaker(tenant, agent_id)],
        messages=[],
    )


def account(tenant: str, event_id: str, trusted: list[str], untrusted: list[str]) -> TurnAccount:
    decisions = [
        TrustDecision(agent_key=f"{tenant}:{a}", trusted=True, reason="trusted") for a in trusted
    ]
    decisions += [
        TrustDecision(agent_key=f"{tenant}:{a}", trusted=False, reason="untrusted_participant")
        for a in untrusted
    ]
    return TurnAccount(tenant=tenant, event_id=event_id, kept=1, dropped=[], decisions=decisions)


def letter(entry: str, failed_at: float, payload: Any = None) -> DeadLetter:
    return DeadLetter(
        id=entry,
        task="memsync.ingest",
        queue="memsync.ingest",
        payload=payload if payload is not None else [{"event_id": entry}],
        idempotency_key=f"k:{entry}",
        stage="ingest",
        error_type="InvalidEvent",
        error="bad",
        permanent=True,
        first_failed_at=failed_at,
        last_failed_at=failed_at,
    )


# --- keys -------------------------------------------------------------------------------------


def test_every_key_is_distinct_whatever_the_ids() -> None:
    seen: dict[str, tuple[str, str, str]] = {k: ("fixed", "", "") for k in keys.FIXED_KEYS}
    assert len(seen) == len(keys.FIXED_KEYS)
    refs: set[str] = set()
    for tenant in TENANTS:
        for event_id in NASTY_IDS:
            refs.add(keys.turn_ref(tenant, event_id))
            for kind, build in (
                ("turn", keys.turn),
                ("synced", keys.turn_synced),
                ("dead", keys.turn_dead),
            ):
                key = build(tenant, event_id)
                assert key not in seen, (key, seen.get(key), (kind, tenant, event_id))
                seen[key] = (kind, tenant, event_id)
                # The escaped parts never add a separator: the shape alone tells the kind.
                assert key.count(":") == (2 if kind == "turn" else 3)
    assert len(refs) == len(TENANTS) * len(NASTY_IDS)
    assert keys.turn_ref("acme", "evt-7f3a") == "acme/evt-7f3a"  # plain ids read plainly


def test_nasty_event_ids_keep_their_own_status_without_wrongtype() -> None:
    ledger = Ledger(client())
    turns = [(t, e) for t in TENANTS for e in NASTY_IDS]
    # Interleaved as a worker would meet them: one turn's sets exist before the next is accepted.
    for tenant, event_id in turns:
        ledger.accept([account(tenant, event_id, ["a1", "a2"], ["a3"])])
        ledger.mark_synced([job(tenant, event_id, "a1")])
        ledger.mark_dead(tenant, event_id, f"{tenant}:a2")
    statuses = ledger.statuses(turns)
    for status in statuses:
        assert (status.state, status.expected, status.synced, status.dead) == (
            "accepted",
            2,
            1,
            1,
        ), status
        assert status.untrusted == 1
        assert status.finished and not status.complete


def test_one_batch_marks_every_agent_of_every_turn_and_settles_the_complete_ones() -> None:
    fake = client()
    tracker = InFlight(fake)
    tracker.track([{"tenant": "t", "event_id": e} for e in ("e1", "e2")])
    ledger = Ledger(fake)
    ledger.accept(
        [account("t", "e1", ["a1", "a2", "a3"], []), account("t", "e2", ["a1", "a2"], [])]
    )
    # a2's earlier sync of e1 was dead-lettered; its replay is in this batch.
    ledger.mark_dead("t", "e1", "t:a2")
    batch = [job("t", "e1", a) for a in ("a1", "a2", "a3")] + [job("t", "e2", "a1")]
    ledger.mark_synced(batch)
    e1, e2 = ledger.statuses([("t", "e1"), ("t", "e2")])
    assert (e1.synced, e1.dead, e1.complete) == (3, 0, True)
    assert (e2.synced, e2.dead, e2.finished) == (1, 0, False)
    assert fake.smembers(keys.turn_synced("t", "e1")) == {b"t:a1", b"t:a2", b"t:a3"}
    assert 0 < fake.ttl(keys.turn_synced("t", "e1")) <= ledger_module.TURN_TTL_SECONDS
    # Only the complete turn leaves the in-flight record.
    assert [payload["event_id"] for _, payload in tracker.due(0)] == ["e2"]


def test_untrusted_agents_are_counted_per_turn() -> None:
    ledger = Ledger(client())
    ledger.accept([account("t", "none", [], ["a", "b"]), account("t", "all", ["a"], [])])
    none, all_ = ledger.statuses([("t", "none"), ("t", "all"), ("t", "unknown")])[:2]
    assert (none.untrusted, none.expected, none.finished) == (2, 0, True)
    assert (all_.untrusted, all_.expected, all_.finished) == (0, 1, False)
    assert ledger.statuses([("t", "unknown")])[0].untrusted == 0


def test_inflight_refs_of_nasty_ids_are_settled_one_by_one() -> None:
    fake = client()
    tracker = InFlight(fake)
    tracker.track([{"tenant": "t", "event_id": e} for e in NASTY_IDS])
    assert tracker.count() == len(NASTY_IDS)
    ledger = Ledger(fake)
    ledger.reject("t", "e:synced", "bad")  # settles exactly that turn
    remaining = {payload["event_id"] for _, payload in tracker.due(0)}
    assert remaining == set(NASTY_IDS) - {"e:synced"}


# --- Redis errors -----------------------------------------------------------------------------


def test_busy_loading_is_a_retryable_broker_error_everywhere() -> None:
    # redis-py derives BusyLoadingError from ConnectionError; the mapping must not depend on it.
    assert issubclass(redis.BusyLoadingError, redis.ConnectionError)

    class Loading(fakeredis.FakeRedis):
        def execute_command(self, *args: Any, **options: Any) -> Any:
            raise redis.BusyLoadingError("Redis is loading the dataset in memory")

        def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
            raise redis.BusyLoadingError("Redis is loading the dataset in memory")

    @redis_errors
    def call() -> None:
        raise redis.BusyLoadingError("loading")

    loading = Loading()
    store = DeadLetterStore(loading)
    for attempt in (
        call,
        lambda: Ledger(loading).statuses([("t", "e")]),
        lambda: Ledger(loading).stats(),
        lambda: InFlight(loading).count(),
        lambda: InFlight(loading).track([{"event_id": "e"}]),
        store.entries,
        store.count,
    ):
        with pytest.raises(BrokerUnavailable, match="BusyLoadingError"):
            attempt()
    with pytest.raises(DeadLetterUnavailable) as caught:  # the write path's own retryable error
        store.put([letter("x", time.time())])
    assert isinstance(caught.value, RetryableError)


class Flaky(fakeredis.FakeRedis):
    """A client whose next `failures` pipelines fail as a Redis restart would."""

    errors = (
        redis.ConnectionError("Connection refused"),
        redis.TimeoutError("Timeout reading from socket"),
        redis.BusyLoadingError("Redis is loading the dataset in memory"),
    )

    def __init__(self, failures: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.failures = failures
        self.raised = 0

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        if self.failures > 0:
            self.failures -= 1
            self.raised += 1
            raise self.errors[self.raised % len(self.errors)]
        return super().pipeline(transaction, shard_hint)


def test_wait_rides_out_a_redis_blip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "WAIT_POLL_SECONDS", 0.01)
    monkeypatch.setattr(ledger_module, "WAIT_RETRY_MAX_SECONDS", 0.02)
    server = fakeredis.FakeServer()
    Ledger(fakeredis.FakeRedis(server=server)).accept([account("t", "e:synced", ["a"], [])])
    Ledger(fakeredis.FakeRedis(server=server)).mark_synced([job("t", "e:synced", "a")])
    flaky = Flaky(5, server=server)
    progress: list[int] = []
    statuses = Ledger(flaky).wait([("t", "e:synced")], timeout=60, on_progress=progress.append)
    assert flaky.raised == 5
    assert statuses[0].complete and progress == [1]


def test_wait_raises_only_when_redis_never_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "WAIT_POLL_SECONDS", 0.01)
    with pytest.raises(BrokerUnavailable):
        Ledger(Flaky(10**9)).wait([("t", "e")], timeout=0.05)


# --- reconciler -------------------------------------------------------------------------------


def test_sweep_skips_and_counts_bad_entries_and_dead_letters_unreadable_ones() -> None:
    fake = client()
    tracker = InFlight(fake)
    ledger = Ledger(fake)
    store = DeadLetterStore(fake)
    tracker.track(
        [{"tenant": "t", "event_id": e} for e in ("lost-1", "done", "wrongtype", "lost-2")]
    )
    ledger.reject("t", "done", "bad")
    fake.hset(keys.INFLIGHT_PAYLOADS, "t/done", json.dumps({"tenant": "t", "event_id": "done"}))
    fake.zadd(keys.INFLIGHT_SINCE, {"t/done": 0})
    fake.set(keys.turn("t", "wrongtype"), "a string where a hash belongs")  # WRONGTYPE on read
    bad = {"junk-1": b"\xff{not json", "junk-2": b"[1, 2]", "junk-3": b'{"tenant": "t"}'}
    for ref, raw in bad.items():
        fake.hset(keys.INFLIGHT_PAYLOADS, ref, raw)
        fake.zadd(keys.INFLIGHT_SINCE, {ref: 0})  # the oldest: met first
    sent: list[list[dict[str, Any]]] = []

    report = sweep(tracker, ledger, sent.append, 0, store)

    assert sorted(p[0]["event_id"] for p in sent) == ["lost-1", "lost-2"]
    assert sorted(report.resent) == ["t/lost-1", "t/lost-2"]
    assert report.settled == ["t/done"]
    assert sorted(report.dead_lettered) == sorted(bad)
    assert sorted(report.skipped) == sorted([*bad, "t/wrongtype"])
    stats = ledger.stats()
    assert stats["reconcile.skipped"] == 4 and stats["reconcile.dead_lettered"] == 3
    letters = store.entries()
    assert {x.stage for x in letters} == {"reconcile"} and len(letters) == 3
    assert all(not x.replayable and x.permanent for x in letters)
    assert any("\\xff{not json" in str(x.payload) for x in letters)  # nothing is lost
    # Dead-lettered and settled entries are untracked; the one Redis refused stays for later.
    left = {ref for ref, _, _ in tracker.due_raw(1e9 * -1)}
    assert left == {"t/lost-1", "t/lost-2", "t/wrongtype"}


def test_sweep_goes_on_when_sending_one_entry_fails() -> None:
    fake = client()
    tracker = InFlight(fake)
    tracker.track([{"tenant": "t", "event_id": e} for e in ("a", "b", "c")])
    sent: list[str] = []

    def send(payload: list[dict[str, Any]]) -> None:
        if payload[0]["event_id"] == "b":
            raise redis.ConnectionError("broker went away for one message")
        sent.append(payload[0]["event_id"])

    report = sweep(tracker, Ledger(fake), send, 0, DeadLetterStore(fake))
    assert sorted(sent) == ["a", "c"] and report.skipped == ["t/b"]


def test_reconcile_thread_survives_failing_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    step = ReconcileStep.__new__(ReconcileStep)  # no worker needed to drive the loop
    step.stopping = threading.Event()
    ticks: list[int] = []

    def tick(hostname: str) -> None:
        ticks.append(1)
        if len(ticks) >= 4:
            step.stopping.set()
        raise redis.ResponseError("WRONGTYPE Operation against a key holding the wrong value")

    monkeypatch.setattr(step, "interval", lambda: 0.001)
    monkeypatch.setattr(step, "tick", tick)
    step._loop("host")
    assert len(ticks) == 4


# --- dead-letter store ------------------------------------------------------------------------


def test_cap_evicts_the_oldest_and_counts_them(caplog: pytest.LogCaptureFixture) -> None:
    fake = client()
    store = DeadLetterStore(fake, max_entries=3)
    now = time.time()
    with caplog.at_level(logging.CRITICAL, logger="memsync.deadletter"):
        for n in range(5):
            store.put([letter(f"l{n}", now - 100 + n)])
    assert [x.id for x in store.entries()] == ["l2", "l3", "l4"]
    assert fake.hlen(keys.DLQ_ENTRIES) == 3
    assert Ledger(fake).stats()["dlq.evicted"] == 2
    assert any("evicted" in r.message and r.levelno == logging.CRITICAL for r in caplog.records)


def test_ttl_hides_and_then_drops_old_entries() -> None:
    fake = client()
    now = time.time()
    DeadLetterStore(fake).put([letter("old", now - 1000), letter("new", now - 10)])
    store = DeadLetterStore(fake, ttl_seconds=100)
    assert [x.id for x in store.entries()] == ["new"]
    assert store.get("old") is None and store.count() == 1
    assert fake.hexists(keys.DLQ_ENTRIES, "old")  # hidden until the next write
    store.put([letter("newer", now)])
    assert not fake.hexists(keys.DLQ_ENTRIES, "old")
    assert fake.zscore(keys.DLQ_INDEX, "old") is None
    assert Ledger(fake).stats()["dlq.expired"] == 1
    assert [x.id for x in store.entries()] == ["new", "newer"]


def test_a_failing_again_entry_adds_up_attempts() -> None:
    store = DeadLetterStore(client())
    store.put([letter("x", 1.0)])
    store.put([letter("x", 2.0)])
    (entry,) = store.entries()
    assert (entry.attempts, entry.first_failed_at, entry.last_failed_at) == (2, 1.0, 2.0)


def test_oversized_payload_is_stored_truncated_with_its_hash_and_not_replayed() -> None:
    fake = client()
    store = DeadLetterStore(fake, payload_max_bytes=1024)
    big = [{"event_id": "big", "messages": [{"content": "é" * 3000}]}]
    whole = json.dumps(big, separators=(",", ":")).encode()
    store.put([letter("big", time.time(), big), letter("small", time.time(), [{"event_id": "s"}])])
    entry = store.get("big")
    assert entry is not None and entry.truncated
    assert isinstance(entry.payload, str) and len(entry.payload.encode()) <= 1024
    assert whole.decode().startswith(entry.payload)
    assert entry.payload_bytes == len(whole)
    assert entry.payload_sha256 == hashlib.sha256(whole).hexdigest()
    small = store.get("small")
    assert small is not None and not small.truncated and small.payload == [{"event_id": "s"}]

    report = replay(store, Celery("unit"), ["big"], dry_run=True)
    assert report.sent == [] and report.skipped[0][0] == "big"
    assert "truncated" in report.skipped[0][1] and entry.payload_sha256 in report.skipped[0][1]
    assert replay(store, Celery("unit"), ["small"], dry_run=True).sent == ["small"]


def test_every_valid_event_fits_the_default_bound() -> None:
    from pipeline.validate import MAX_EVENT_BYTES

    assert Settings().dlq_payload_max_bytes > MAX_EVENT_BYTES + 100_000
    store = DeadLetterStore(client())
    payload = [{"event_id": "e", "blob": "x" * MAX_EVENT_BYTES}]
    store.put([letter("max", time.time(), payload)])
    entry = store.get("max")
    assert entry is not None and not entry.truncated and entry.replayable


class AofRedis(fakeredis.FakeRedis):
    """fakeredis has no CONFIG or BGREWRITEAOF: answer as a server with the given AOF state."""

    def __init__(self, appendonly: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.appendonly = appendonly
        self.rewrites = 0

    def config_get(self, pattern: Any = "*", *args: Any, **kwargs: Any) -> Any:
        if self.appendonly is None:
            raise redis.exceptions.NoPermissionError("this user has no permissions to run config")
        return {"appendonly": self.appendonly}

    def bgrewriteaof(self, **kwargs: Any) -> Any:
        self.rewrites += 1
        return True


@pytest.mark.parametrize(
    ("appendonly", "started", "note"),
    [("yes", True, "started"), ("no", False, "AOF is off"), (None, False, "not permitted")],
)
def test_purge_rewrites_the_aof_when_it_is_on(
    appendonly: str | None, started: bool, note: str
) -> None:
    fake = AofRedis(appendonly)
    store = DeadLetterStore(fake)
    store.put([letter("a", time.time()), letter("b", time.time())])
    result = store.purge(["a", "missing"])
    assert (result.removed, result.aof_rewrite_started) == (1, started)
    assert note in result.aof_note and fake.rewrites == int(started)
    assert [x.id for x in store.entries()] == ["b"]
    assert store.purge(["missing"]).aof_rewrite_started is False  # nothing removed, no rewrite


def test_runtime_builds_the_store_with_the_settings_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = Settings(dlq_max_entries=7, dlq_ttl_seconds=3600, dlq_payload_max_bytes=4096)
    monkeypatch.setattr(runtime, "_settings", chosen)
    monkeypatch.setattr(runtime, "_redis", client())
    monkeypatch.setattr(runtime, "_redis_pid", os.getpid())
    store = runtime.deadletters()
    assert (store.max_entries, store.ttl_seconds, store.payload_max_bytes) == (7, 3600, 4096)
    defaults = Settings()
    assert (defaults.dlq_max_entries, defaults.dlq_ttl_seconds) == (100_000, None)


def test_letters_for_unreadable_text_are_bounded_too() -> None:
    store = DeadLetterStore(client(), payload_max_bytes=2048)
    letters = letters_for(
        task="<unreadable>",
        queue="memsync.ingest",
        stage="decode",
        payload="z" * 10_000,
        error=ValueError("not JSON"),
        permanent=True,
        attempts=1,
        worker="w",
        split=False,
    )
    store.put(letters)
    (entry,) = store.entries()
    assert entry.truncated and entry.payload == "z" * 2048 and entry.payload_bytes == 10_000
