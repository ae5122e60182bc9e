"""Segments on real Redis, Neo4j and a real worker: the fold check cuts an agent's messages of a
channel into segments, recall ranks a message in the conversation the question is about above
an equal match elsewhere, and forgetting someone takes their words out of every segment."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from memsync import keys
from memsync.settings import Settings
from pipeline.extract import RulesExtractor
from pipeline.graph.cypher.segment import LAST_SEGMENT
from pipeline.graph.directory import grant_trust
from pipeline.graph.model import SEGMENT
from pipeline.graph.search import recall
from pipeline.graph.segments import EVER, extend_segments
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.segment import SEGMENT_SIZE
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.keys import channel_key, episode_key, participant_key, scope_token
from schemas.recall import RecallQuery
from tests.integration.test_forget import run
from tests.integration.test_spine import DEVON, SARAH, TRAVEL, emit_all, event, msg
from tests.integration.writing import searchable
from workers.local import services
from workers.state import latemessages
from workers.state.ledger import Ledger
from workers.worker.folding import request_folds

pytestmark = pytest.mark.integration

TRIP = {"id": "ch-trip", "kind": "group", "title": "Lisbon trip"}
PHOTOS = {"id": "ch-photos", "kind": "group", "title": "Photos"}
FILLER = [
    "Sounds good to me.",
    "Let me check my calendar first.",
    "Okay, noted.",
    "Sure thing.",
]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def segments(graph: GraphStore, tenant: str) -> list[dict[str, Any]]:
    with graph.session(write=False) as session:
        return [
            dict(r)
            for r in session.run(
                f"MATCH (s:{SEGMENT}) WHERE s.tenant = $tenant "
                "RETURN s.key AS key, s.agent_key AS agent_key, s.channel_key AS channel_key, "
                "s.seq AS seq, s.count AS count, s.text AS text, s.scope AS scope, "
                "s.episode_keys AS episode_keys, "
                "COUNT { MATCH (e:Episode) WHERE e.key IN s.episode_keys } AS covers "
                "ORDER BY s.seq",
                tenant=tenant,
            )
        ]


def trip_messages(count: int) -> list[Any]:
    found = [msg("t0", "user", "u-sarah", "The Lisbon flight leaves on Friday morning.", 0)]
    for i in range(1, count):
        text = FILLER[i % len(FILLER)]
        if i == 4:
            text = "Also my passport expires in May, so I have to renew it before we go."
        found.append(msg(f"t{i}", "user", "u-devon" if i % 2 else "u-sarah", text, i))
    return found


def test_the_fold_check_cuts_segments_and_they_follow_the_channel(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    tenant = f"s{uuid.uuid4().hex[:12]}"
    messages = trip_messages(SEGMENT_SIZE + 4)
    events = [
        event(tenant, f"ev-{n}", TRIP, [DEVON, SARAH, TRAVEL], messages[n : n + 5])
        for n in range(0, len(messages), 5)
    ]
    # Strict trust: Devon (the Travel Agent's owner) vouches for Sarah.
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
    emit_all(settings, ledger, events)
    wait_for(
        lambda: sum(s["covers"] for s in segments(graph, tenant)) == len(messages),
        "the worker to segment every message",
    )
    found = segments(graph, tenant)
    assert [(s["seq"], s["count"], s["covers"]) for s in found] == [
        (1, SEGMENT_SIZE, SEGMENT_SIZE),
        (2, 4, 4),
    ]
    agent, channel = participant_key(tenant, "a-travel"), channel_key(tenant, TRIP["id"])
    assert {(s["agent_key"], s["channel_key"]) for s in found} == {(agent, channel)}
    assert (
        found[0]["text"].splitlines()[0]
        == "Sarah (@sarah): The Lisbon flight leaves on Friday morning."
    )
    assert found[0]["scope"].split() == [
        scope_token("agent", agent),
        scope_token("channel", channel),
    ]
    # A second pass finds nothing new and changes nothing.
    assert extend_segments(graph, tenant, agent, channel) == (0, False)
    assert segments(graph, tenant) == found


def write_in_process(graph: GraphStore, events: list[Any]) -> None:
    parsed = [validate_event(e) for e in events]
    jobs = ingest_turns(parsed, {}, DirectoryTrustPolicy("open", {})).jobs
    write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))


def test_recall_prefers_the_match_in_the_conversation_asked_about(
    graph: GraphStore, settings: Settings
) -> None:
    tenant = f"s{uuid.uuid4().hex[:12]}"
    photos = [
        msg("p0", "user", "u-devon", "Passport photo.", 40),
        msg("p1", "user", "u-sarah", "Nice picture of the beach.", 41),
    ]
    write_in_process(
        graph,
        [
            event(tenant, "ev-trip", TRIP, [DEVON, SARAH, TRAVEL], trip_messages(10)),
            event(tenant, "ev-photos", PHOTOS, [DEVON, SARAH, TRAVEL], photos),
        ],
    )
    searchable(graph)
    query = RecallQuery(
        tenant=tenant,
        agent_id="a-travel",
        query="passport for the Lisbon flight",
        limit=3,
        include_neighbours=False,
        kinds=("episode",),
    )

    def order() -> list[str]:
        items = recall(graph, query, embedder=None, dm_policy=settings.dm_memory_policy)
        found = [e for item in items for e in item.evidence]
        assert "t4" in found and "p0" in found, found
        return found

    # Each passport message on its own words: the short one in the photo channel wins.
    before = order()
    assert before.index("p0") < before.index("t4")
    agent = participant_key(tenant, "a-travel")
    for channel in (TRIP, PHOTOS):
        extend_segments(graph, tenant, agent, channel_key(tenant, channel["id"]))
    searchable(graph)
    # The trip's segment names the passport, Lisbon and the flight: its passport message now
    # comes first of the two.
    after = order()
    assert after.index("t4") < after.index("p0")


def test_forgetting_someone_takes_their_words_out_of_segments(
    graph: GraphStore, settings: Settings
) -> None:
    tenant = f"s{uuid.uuid4().hex[:12]}"
    write_in_process(
        graph, [event(tenant, "ev-trip", TRIP, [DEVON, SARAH, TRAVEL], trip_messages(6))]
    )
    agent, channel = participant_key(tenant, "a-travel"), channel_key(tenant, TRIP["id"])
    assert extend_segments(graph, tenant, agent, channel, size=4) == (6, False)
    assert [s["count"] for s in segments(graph, tenant)] == [4, 2]
    assert "Lisbon" in segments(graph, tenant)[0]["text"]
    done = run(settings, "forget", "--participant", "u-sarah", "--tenant", tenant, "--json")
    assert done.returncode == 0, done.stderr
    left = segments(graph, tenant)
    # Devon's messages stay (t1, t3 in the first segment, t5 in the second); Sarah's are gone.
    assert [(s["count"], s["covers"]) for s in left] == [(2, 2), (1, 1)]
    assert all("Sarah" not in s["text"] and "Lisbon" not in s["text"] for s in left)
    assert all(s["text"].startswith("Devon (@devon): ") for s in left)
    assert [s["episode_keys"] for s in left] == [
        [episode_key(tenant, TRIP["id"], m) for m in ms] for ms in (["t1", "t3"], ["t5"])
    ]
    with graph.session(write=False) as session:
        record = session.run(LAST_SEGMENT, agent_key=agent, channel_key=channel).single()
    assert record is not None and record["count"] == 1
    # Forgetting the agent leaves no segment of it behind.
    assert run(settings, "forget", "--agent", "a-travel", "--tenant", tenant).returncode == 0
    assert segments(graph, tenant) == []


def test_a_message_that_arrives_late_joins_the_open_segment(graph: GraphStore) -> None:
    tenant = f"s{uuid.uuid4().hex[:12]}"
    messages = trip_messages(6)
    # t2 ("Okay, noted.") is written after the rest were segmented, with its own earlier time:
    # a replayed dead letter or a spooled turn.
    late = messages.pop(2)
    write_in_process(graph, [event(tenant, "ev-trip", TRIP, [DEVON, SARAH, TRAVEL], messages)])
    agent, channel = participant_key(tenant, "a-travel"), channel_key(tenant, TRIP["id"])
    assert extend_segments(graph, tenant, agent, channel, size=4) == (5, False)
    assert [s["count"] for s in segments(graph, tenant)] == [4, 1]
    write_in_process(graph, [event(tenant, "ev-late", TRIP, [DEVON, SARAH, TRAVEL], [late])])
    assert extend_segments(graph, tenant, agent, channel, size=4) == (1, False)
    found = segments(graph, tenant)
    assert [(s["count"], s["covers"]) for s in found] == [(4, 4), (2, 2)]
    keys = [episode_key(tenant, TRIP["id"], m) for m in ("t5", "t2")]
    assert found[1]["episode_keys"] == keys
    assert found[1]["text"].splitlines()[-1] == "Sarah (@sarah): Okay, noted."
    # The position stays at the latest message, so the next pass finds nothing to add and a
    # later message still goes after it.
    with graph.session(write=False) as session:
        record = session.run(LAST_SEGMENT, agent_key=agent, channel_key=channel).single()
    assert record is not None and record["last_key"] == keys[0]
    assert extend_segments(graph, tenant, agent, channel, size=4) == (0, False)
    assert segments(graph, tenant) == found


def at_minute(minute: int) -> datetime:
    return datetime(2026, 11, 29, 10, minute, tzinfo=UTC)


def test_a_late_look_reaches_back_only_as_far_as_it_is_told(graph: GraphStore) -> None:
    tenant = f"s{uuid.uuid4().hex[:12]}"
    messages = trip_messages(8)
    late_new, late_old = messages.pop(6), messages.pop(1)
    write_in_process(graph, [event(tenant, "ev-trip", TRIP, [DEVON, SARAH, TRAVEL], messages)])
    agent, channel = participant_key(tenant, "a-travel"), channel_key(tenant, TRIP["id"])
    assert extend_segments(graph, tenant, agent, channel, size=4) == (6, False)
    write_in_process(
        graph, [event(tenant, "ev-late", TRIP, [DEVON, SARAH, TRAVEL], [late_old, late_new])]
    )
    # Told nothing was written out of order, the pass looks for nothing.
    assert extend_segments(graph, tenant, agent, channel, size=4, late_since=None) == (0, False)
    # Told to look back to minute 6, it finds t6 and not t1 (minute 1).
    assert extend_segments(graph, tenant, agent, channel, size=4, late_since=at_minute(6)) == (
        1,
        False,
    )
    key = {m: episode_key(tenant, TRIP["id"], m) for m in ("t1", "t5", "t6", "t7")}
    assert segments(graph, tenant)[-1]["episode_keys"] == [key["t5"], key["t7"], key["t6"]]
    # The same look again finds t6 listed already.
    assert extend_segments(graph, tenant, agent, channel, size=4, late_since=at_minute(6)) == (
        0,
        False,
    )
    # The audit looks through everything and finds t1.
    assert extend_segments(graph, tenant, agent, channel, size=4, late_since=EVER) == (1, False)
    found = segments(graph, tenant)
    assert found[-1]["episode_keys"] == [key["t5"], key["t7"], key["t6"], key["t1"]]
    assert sum(s["covers"] for s in found) == 8
    assert extend_segments(graph, tenant, agent, channel, size=4) == (0, False)


def test_a_write_notes_how_far_back_the_next_check_looks(fresh_redis: redis.Redis) -> None:
    pair_a, pair_b = ("t", "agent-a", "channel-1"), ("t", "agent-b", "channel-1")
    sent: list[tuple[str, str, str]] = []

    def send(*pair: str) -> None:
        sent.append((pair[0], pair[1], pair[2]))

    assert request_folds(fresh_redis, {pair_a: at_minute(5), pair_b: at_minute(3)}, send) == 2
    # A second write within CHECK_SECONDS sends no check, but its earlier time is noted; a
    # later time does not move the note.
    assert request_folds(fresh_redis, {pair_a: at_minute(2)}, send) == 0
    assert request_folds(fresh_redis, {pair_a: at_minute(9)}, send) == 0
    assert sorted(sent) == [pair_a, pair_b]
    assert latemessages.take(fresh_redis, "agent-a", "channel-1")[0] == at_minute(2)
    assert latemessages.take(fresh_redis, "agent-b", "channel-1")[0] == at_minute(3)
    # Taken: what is written next is noted afresh.
    assert latemessages.take(fresh_redis, "agent-a", "channel-1")[0] is None
    request_folds(fresh_redis, {pair_a: at_minute(7)}, send)
    # A check that gives its note back keeps the earlier of the two.
    latemessages.give_back(fresh_redis, "agent-a", "channel-1", at_minute(2))
    assert latemessages.take(fresh_redis, "agent-a", "channel-1")[0] == at_minute(2)
    assert fresh_redis.ttl(keys.segment_late("agent-b", "channel-1")) == -2
    assert latemessages.audit_due(fresh_redis, "agent-a", "channel-1")
    latemessages.audited(fresh_redis, "agent-a", "channel-1")
    assert not latemessages.audit_due(fresh_redis, "agent-a", "channel-1")
    assert fresh_redis.ttl(keys.segment_audit("agent-a", "channel-1")) > 0
    # A fold check asks both at once.
    request_folds(fresh_redis, {pair_a: at_minute(4), pair_b: at_minute(6)}, send)
    assert latemessages.take(fresh_redis, "agent-a", "channel-1") == (at_minute(4), False)
    assert latemessages.take(fresh_redis, "agent-b", "channel-1") == (at_minute(6), True)


def test_a_late_turn_joins_a_segment_through_the_worker(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    tenant = f"s{uuid.uuid4().hex[:12]}"
    messages = trip_messages(6)
    late = messages.pop(2)
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
    emit_all(settings, ledger, [event(tenant, "ev-trip", TRIP, [DEVON, SARAH, TRAVEL], messages)])
    wait_for(
        lambda: sum(s["covers"] for s in segments(graph, tenant)) == len(messages),
        "the worker to segment the turn",
    )
    agent, channel = participant_key(tenant, "a-travel"), channel_key(tenant, TRIP["id"])
    client = redis.Redis.from_url(settings.broker_url)
    try:
        # The first check audited the pair: for the next hour only notes send a check back.
        wait_for(lambda: not latemessages.audit_due(client, agent, channel), "the audit mark")
        emit_all(settings, ledger, [event(tenant, "ev-late", TRIP, [DEVON, SARAH, TRAVEL], [late])])
        wait_for(
            lambda: sum(s["covers"] for s in segments(graph, tenant)) == len(messages) + 1,
            "the late message to join a segment",
        )
        wait_for(
            lambda: not client.exists(keys.segment_late(agent, channel)),
            "the check to take the note",
        )
    finally:
        client.close()
    assert segments(graph, tenant)[-1]["episode_keys"][-1] == episode_key(tenant, TRIP["id"], "t2")
