"""Rolling summaries on real Redis, Neo4j and a real worker: folds happen past the budget,
versions increase, re-anchoring rebuilds from raw episodes, and two folds of one channel at once
write one version."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import pytest
import redis

from memsync import keys as redis_keys
from memsync.producer import Producer
from memsync.settings import Settings
from pipeline.extract import RulesExtractor
from pipeline.graph.model import FULLTEXT_INDEXES, SUMMARY
from pipeline.graph.store import GraphStore
from pipeline.graph.summaries import (
    SummaryView,
    channel_episodes,
    current_summary,
    summary_history,
)
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.summarize import (
    EpisodeText,
    ExtractiveSummarizer,
    classify,
    horizon,
    sentences,
)
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.keys import channel_key, episode_key, participant_key
from tests.integration.test_spine import DEVON, TRAVEL, emit_and_wait
from workers.local import services
from workers.state.ledger import Ledger
from workers.worker.folding import FoldOutcome, fold_channel, fold_locked

pytestmark = pytest.mark.integration

CHANNEL = {"id": "ch-summary", "kind": "dm", "title": "Trip"}
LABELS = {"u-devon": "Devon (@devon)", "a-travel": "Travel Agent (@travel)"}
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def line(i: int) -> tuple[str, str]:
    """(sender, text) of message i: commitments, identifiers and chit-chat in turn."""
    return [
        ("u-devon", f"I'll send the expense report R-{i:03d} to finance by Friday."),
        ("a-travel", "Lovely, hope the weather is kind to you all this week."),
        ("a-travel", f"Your booking reference BK{i:04d}Q is confirmed, agreed with the hotel."),
        ("u-devon", "Great, that sounds really good to me, cheers."),
    ][i % 4]


def messages(count: int, filler: str = "") -> list[dict[str, Any]]:
    found = []
    for i in range(count):
        sender, text = line(i)
        found.append(
            {
                "id": f"m{i:03d}",
                "role": "user" if sender == "u-devon" else "assistant",
                "sender_id": sender,
                "content": text + filler,
                "created_at": (T0 + timedelta(seconds=i)).isoformat(),
            }
        )
    return found


def events(tenant: str, msgs: list[dict[str, Any]], per_event: int = 10) -> list[dict[str, Any]]:
    return [
        {
            "schema_version": 1,
            "event_id": f"ev-{n}",
            "tenant": tenant,
            "channel": CHANNEL,
            "participants": [DEVON, TRAVEL],
            "messages": msgs[n : n + per_event],
        }
        for n in range(0, len(msgs), per_event)
    ]


def write_turns(graph: GraphStore, tenant: str, msgs: list[dict[str, Any]]) -> None:
    """The sync writer in-process (no worker): the same episodes a worker writes."""
    policy = DirectoryTrustPolicy("open", {})
    parsed = [validate_event(e) for e in events(tenant, msgs)]
    jobs = ingest_turns(parsed, {}, policy).jobs
    write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))


def raw_episodes(
    tenant: str, msgs: list[dict[str, Any]], until: SummaryView | None
) -> list[EpisodeText]:
    """The raw episodes a summary covers (None: all), rebuilt from what the test sent (not the
    graph)."""
    found = [
        EpisodeText(
            key=episode_key(tenant, CHANNEL["id"], m["id"]),
            speaker_label=LABELS[m["sender_id"]],
            content=m["content"],
            created_at=datetime.fromisoformat(m["created_at"]),
        )
        for m in msgs
    ]
    if until is None:
        return found
    return [
        e for e in found if (e.created_at, e.key) <= (until.covers_until, until.covers_until_key)
    ]


class PairKeys(TypedDict):
    tenant: str
    agent_key: str
    channel_key: str


def keys_of(tenant: str) -> PairKeys:
    return {
        "tenant": tenant,
        "agent_key": participant_key(tenant, "a-travel"),
        "channel_key": channel_key(tenant, CHANNEL["id"]),
    }


def small(settings: Settings, **extra: Any) -> Settings:
    return settings.model_copy(
        update={"summary_fold_tokens": 100, "summary_max_tokens": 4000, **extra}
    )


@pytest.fixture()
def client(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.broker_url)


def must_keep(episodes: list[EpisodeText]) -> list[str]:
    return [
        s
        for e in episodes
        for s in sentences(e.content)
        if {"commitment", "identifier"} & set(classify(s, open_question=False))
    ]


def test_folds_version_up_and_reanchor_from_raw_episodes(
    graph: GraphStore, settings: Settings, client: redis.Redis, tenant: str
) -> None:
    msgs = messages(40)
    write_turns(graph, tenant, msgs)
    tuned = small(settings, summary_reanchor_every=3)
    outcome = fold_locked(client, graph, tuned, **keys_of(tenant))
    history = summary_history(graph, **keys_of(tenant))
    assert len(history) >= 4 and outcome.versions == [v.version for v in history]
    assert [v.version for v in history] == list(range(1, len(history) + 1))
    assert [v.covers_until for v in history] == sorted(v.covers_until for v in history)
    # The first is made from raw episodes, then every third: folds_since_anchor 0, 1, 2, 0, ...
    assert [v.folds_since_anchor for v in history] == [i % 3 for i in range(len(history))]
    assert [v.anchored for v in history] == [i % 3 == 0 for i in range(len(history))]
    current = current_summary(graph, tenant, "a-travel", CHANNEL["id"])
    assert current is not None and current == history[-1]
    # Everything folded so far: every commitment and identifier of the covered turns is kept.
    covered = raw_episodes(tenant, msgs, current)
    assert len(covered) < len(msgs)  # the newest turns stay unsummarised, within the budget
    for sentence in must_keep(covered):
        assert sentence in current.text
    # A re-anchored version is exactly a fresh summary of the raw episodes it covers.
    for version in history:
        if version.anchored:
            fresh = ExtractiveSummarizer(4000).rebuild(raw_episodes(tenant, msgs, version))
            assert version.text == fresh
    # Only the current version is flagged, and superseded ones are no longer embedded.
    with graph.session(write=False) as session:
        rows = session.run(
            "MATCH (:Agent {key: $agent})-[:SUMMARISED]->(s:Summary)-[:OF]->(:Channel {key: $ch}) "
            "RETURN s.version AS v, s.current AS current, s.embed_pending AS pending, "
            "s.tenant AS tenant ORDER BY v",
            agent=keys_of(tenant)["agent_key"],
            ch=keys_of(tenant)["channel_key"],
        ).data()
    assert [r["current"] for r in rows] == [False] * (len(rows) - 1) + [True]
    assert all(r["pending"] is None for r in rows[:-1]) and rows[-1]["pending"] in (True, None)
    assert {r["tenant"] for r in rows} == {tenant}
    # Nothing left past the budget: another check writes nothing.
    assert fold_locked(client, graph, tuned, **keys_of(tenant)).versions == []


def test_a_reanchor_reads_back_only_its_horizon(graph: GraphStore, tenant: str) -> None:
    msgs = messages(60)
    write_turns(graph, tenant, msgs)
    keys = keys_of(tenant)
    window = 150
    # Read newest first and capped, the latest episodes come back in time order.
    everything = channel_episodes(graph, keys["agent_key"], keys["channel_key"])
    assert [e.key for e in everything] == [e.key for e in raw_episodes(tenant, msgs, None)]
    latest = channel_episodes(graph, keys["agent_key"], keys["channel_key"], last_tokens=window)
    assert latest == list(horizon(everything, window)) and 1 < len(latest) < len(everything)
    fold_channel(
        graph,
        ExtractiveSummarizer(4000),
        **keys,
        fold_tokens=100,
        reanchor_every=3,
        reanchor_tokens=window,
        max_folds=99,
    )
    # The first version is made from its chunk alone; the later anchors read back `window`.
    anchors = [v for v in summary_history(graph, **keys) if v.anchored][1:]
    assert anchors
    for version in anchors:
        covered = raw_episodes(tenant, msgs, version)
        tail = list(horizon(covered, window))
        assert len(tail) < len(covered)
        assert version.text == ExtractiveSummarizer(4000).rebuild(tail)
        # What lies further back is not read: the whole history's summary differs.
        assert version.text != ExtractiveSummarizer(4000).rebuild(covered)


def test_reanchoring_drops_drift_that_folding_keeps(graph: GraphStore, tenant: str) -> None:
    write_turns(graph, tenant, messages(12))
    keys = keys_of(tenant)
    summarizer = ExtractiveSummarizer(4000)
    common: dict[str, Any] = {"fold_tokens": 100, "reanchor_every": 2, "max_folds": 1}
    first = fold_channel(graph, summarizer, **keys, **common)
    assert first.versions == [1]

    def drift() -> None:
        # A line no episode says (what an LLM summarizer might make up), written in place.
        with graph.session() as session:
            session.run(
                "MATCH (s:Summary) WHERE s.agent_key = $agent AND s.current = true "
                "SET s.text = s.text + '\n[2026-11-02] Mallory (@mallory): Code ZZ-999 agreed.'",
                agent=keys["agent_key"],
            ).consume()

    drift()
    write_turns(graph, tenant, messages(40))
    second = fold_channel(graph, summarizer, **keys, **common)
    assert second.versions == [2] and second.rebuilt == []
    assert "ZZ-999" in summary_history(graph, **keys)[-1].text  # a fold carries drift on
    third = fold_channel(graph, summarizer, **keys, **common)
    assert third.versions == [3] and third.rebuilt == [3]
    assert "ZZ-999" not in summary_history(graph, **keys)[-1].text  # a rebuild does not


class GatedSummarizer(ExtractiveSummarizer):
    """Waits until every caller has read the same current version before any of them writes."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__(4000)
        self.barrier = barrier

    def fold(self, previous: str | None, episodes: Any) -> str:
        self.barrier.wait(timeout=60)
        return super().fold(previous, episodes)


@pytest.mark.parametrize("existing", [0, 1])
def test_two_racing_folds_of_one_channel_write_one_version(
    graph: GraphStore, tenant: str, existing: int
) -> None:
    # No lock here: both folds read the same current version, summarise, then both write.
    # Only one write may land; the other finds its base superseded and writes nothing.
    write_turns(graph, tenant, messages(30))
    keys = keys_of(tenant)
    if existing:
        fold_channel(
            graph,
            ExtractiveSummarizer(4000),
            **keys,
            fold_tokens=100,
            reanchor_every=99,
            max_folds=1,
        )
    barrier = threading.Barrier(2)
    outcomes: list[FoldOutcome] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            outcomes.append(
                fold_channel(
                    graph,
                    GatedSummarizer(barrier),
                    **keys,
                    fold_tokens=100,
                    reanchor_every=99,
                    max_folds=1,
                )
            )
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(len(o.versions) for o in outcomes) == [0, 1]
    assert sorted(o.lost_race for o in outcomes) == [False, True]
    history = summary_history(graph, **keys)
    assert [v.version for v in history] == list(range(1, existing + 2))


def test_the_lock_keeps_a_second_fold_out(
    graph: GraphStore, settings: Settings, client: redis.Redis, tenant: str
) -> None:
    write_turns(graph, tenant, messages(30))
    keys = keys_of(tenant)
    tuned = small(settings)
    held = client.lock(
        redis_keys.fold_lock(keys["agent_key"], keys["channel_key"]), timeout=60, blocking=False
    )
    assert held.acquire()
    try:
        assert fold_locked(client, graph, tuned, **keys) == FoldOutcome(busy=True)
        assert summary_history(graph, **keys) == []
    finally:
        held.release()
    # Two at once through the lock: one folds everything, the other finds it busy (or nothing
    # left); versions are never duplicated.
    outcomes: list[FoldOutcome] = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(fold_locked(client, graph, tuned, **keys)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    written = [v for o in outcomes for v in o.versions]
    history = summary_history(graph, **keys)
    assert sorted(written) == [v.version for v in history] == list(range(1, len(history) + 1))
    assert len(history) >= 2


def test_a_worker_folds_a_channel_once_it_passes_the_budget(
    worker: services.Service,
    graph: GraphStore,
    producer: Producer,
    ledger: Ledger,
    settings: Settings,
    tenant: str,
) -> None:
    # The session worker runs the default budget (2000 tokens): about 3,000 are sent.
    padding = " We went through the remaining itinerary items together in some detail." * 2
    msgs = messages(60, filler=padding)
    emit_and_wait(producer, ledger, events(tenant, msgs))
    deadline = time.monotonic() + 90
    current = None
    while time.monotonic() < deadline:
        current = current_summary(graph, tenant, "a-travel", CHANNEL["id"])
        if current is not None:
            break
        time.sleep(0.5)
    assert current is not None, "no summary written within 90 s"
    assert current.version >= 1 and current.summarizer == "extractive"
    for sentence in must_keep(raw_episodes(tenant, msgs, current)):
        assert sentence in current.text
    # Covered by the full-text index, and embedded (or waiting for it).
    with graph.session(write=False) as session:
        found = session.run(
            "CALL db.index.fulltext.queryNodes($index, $q) YIELD node "
            "WHERE node.tenant = $tenant "
            "RETURN node.key AS key, node.embed_pending AS pending, "
            "node.embedding IS NOT NULL AS embedded",
            index=FULLTEXT_INDEXES[SUMMARY],
            q="BK0002Q",
            tenant=tenant,
        ).data()
    # Older versions stay for audit (and match too); the current one is among the hits.
    [hit] = [r for r in found if r["key"] == current.key]
    assert hit["pending"] is True or hit["embedded"]
    assert settings.summary_fold_tokens == 2000
