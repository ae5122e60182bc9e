"""Recall on real services: turns go through the worker, then keyword recall is asked of Neo4j
within one agent's scope (channel, tenant, DM policy, current facts, neighbouring messages)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memsync.producer import Producer
from memsync.settings import Settings
from pipeline import scores as scoring
from pipeline.embedder import make_embedder
from pipeline.graph import search
from pipeline.graph.cypher.instant import micros
from pipeline.graph.cypher.search import lucene_query
from pipeline.graph.directory import grant_trust
from pipeline.graph.embeddings import pending_for_episodes
from pipeline.graph.retrieval import Ask
from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore, instant
from pipeline.rank import MAX_WINDOW
from schemas.keys import episode_key
from schemas.recall import RecallItem, RecallQuery
from tests.integration.test_operations import cli
from tests.integration.test_spine import (
    DEVON,
    FINANCE,
    SARAH,
    TRAVEL,
    emit_all,
    emit_and_wait,
    event,
    msg,
)
from tests.integration.writing import searchable
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

CH_A = {"id": "ch-a", "kind": "group", "title": "Trip A"}
CH_B = {"id": "ch-b", "kind": "group", "title": "Trip B"}
CH_C = {"id": "ch-c", "kind": "group", "title": "Finance only"}
DM = {"id": "dm-sarah", "kind": "dm"}
CH_S = {"id": "ch-s", "kind": "group", "title": "Sarah's plans"}
CH_Q = {"id": "ch-q", "kind": "group", "title": "Trip chat"}
CH_E = {"id": "ch-e", "kind": "group", "title": "Trip with Eve"}
# Nobody vouched for Eve: a turn she is in leaves the agent out and is remembered by nobody.
EVE = {"id": "u-eve", "kind": "human", "display_name": "Eve", "handle": "eve"}


def turns(tenant: str) -> list[Any]:
    return [
        event(
            tenant,
            "ev-a",
            CH_A,
            [DEVON, SARAH, TRAVEL],
            [
                msg("a1", "user", "u-devon", "Which seat should I book for Sarah?", 1),
                msg("a2", "user", "u-sarah", "I prefer an aisle seat", 2),
                msg("a3", "user", "u-devon", "What is the budget for the hotel?", 3),
                msg("a4", "user", "u-sarah", "About 150 per night.", 4),
                msg("a5", "user", "u-devon", "I prefer a window seat", 5),
                msg("a6", "user", "u-devon", "Actually I prefer an aisle seat now", 6),
            ],
        ),
        event(
            tenant,
            "ev-b",
            CH_B,
            [DEVON, TRAVEL],
            [msg("b1", "user", "u-devon", "The aisle seat on the train was broken", 7)],
        ),
        event(
            tenant,
            "ev-c",
            CH_C,
            [DEVON, FINANCE],
            [msg("c1", "user", "u-devon", "The aisle seat upgrade cost 40 EUR", 8)],
        ),
        event(
            tenant,
            "ev-d",
            DM,
            [SARAH, TRAVEL],
            [msg("d1", "user", "u-sarah", "I am allergic to peanuts", 9)],
        ),
        event(
            tenant,
            "ev-b2",
            CH_B,
            [DEVON, TRAVEL],
            [msg("b2", "user", "u-devon", "I am allergic to shellfish", 59)],
        ),
        # Only Sarah and the agent are here...
        event(
            tenant,
            "ev-s",
            CH_S,
            [SARAH, TRAVEL],
            [msg("s1", "user", "u-sarah", "Please book the hotel for May", 11)],
        ),
        # ...while here Devon is listed too, though he never speaks.
        event(
            tenant,
            "ev-q",
            CH_Q,
            [SARAH, DEVON, TRAVEL],
            [msg("q1", "user", "u-sarah", "Looking forward to the trip", 12)],
        ),
        event(
            tenant,
            "ev-e1",
            CH_E,
            [SARAH, TRAVEL],
            [msg("e1", "user", "u-sarah", "Shall we plan the museum day?", 13)],
        ),
        event(
            tenant,
            "ev-e2",
            CH_E,
            [SARAH, EVE, TRAVEL],
            [msg("e2", "user", "u-eve", "Hi both, I just joined", 14)],
        ),
    ]


@dataclass(frozen=True)
class World:
    tenant: str
    other: str  # a second tenant with the same conversations, ids and agents


@pytest.fixture(scope="module")
def world(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> Iterator[World]:
    tenants = [f"r{uuid.uuid4().hex[:12]}" for _ in range(2)]
    producer = Producer(settings)
    try:
        for tenant in tenants:
            # Strict trust: Devon (the Travel Agent's owner) vouches for Sarah; Finance trusts
            # Devon itself.
            grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
            grant_trust(graph, tenant, "a-finance", "u-devon", "connected")
            emit_and_wait(producer, ledger, turns(tenant))
    finally:
        producer.close(timeout=10)
    searchable(graph)
    yield World(*tenants)


def ask(
    graph: GraphStore, world: World, dm_policy: str = "never", **fields: Any
) -> list[RecallItem]:
    query = RecallQuery.model_validate({"tenant": world.tenant, "agent_id": "a-travel", **fields})
    return recall(graph, query, embedder=None, dm_policy=dm_policy)


def episodes(items: list[RecallItem]) -> list[RecallItem]:
    return [i for i in items if i.kind == "episode"]


def facts(items: list[RecallItem]) -> list[str]:
    return [i.text for i in items if i.kind == "fact"]


def test_seat_preference_finds_the_aisle_seat_and_its_fact(graph: GraphStore, world: World) -> None:
    found = ask(graph, world, query="seat preference", channel_id="ch-a")
    assert any("a2" in i.matched and "I prefer an aisle seat" in i.text for i in found), found
    assert "Sarah (@sarah) prefers aisle seat" in facts(found)
    sarah = next(i for i in found if i.text == "Sarah (@sarah) prefers aisle seat")
    assert sarah.evidence == ["a2"] and sarah.source == "self_stated" and sarah.current
    assert sarah.speaker_id == "u-sarah" and sarah.channel_id == "ch-a"
    # Instants travel as integers (cypher/instant.py) and come back as the emitted datetimes.
    said = next(i for i in found if "a2" in i.matched)
    assert said.created_at == sarah.created_at == datetime(2026, 11, 29, 10, 2, tzinfo=UTC)
    # Best first, and the budget counts messages: no more than 10 distinct messages shown.
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)
    assert len({m for i in found for m in i.evidence}) <= 10


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 11, 29, 10, 6, 7, 123456, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # before the epoch
        datetime(1969, 12, 31, 23, 59, 59, 998500, tzinfo=UTC),
        datetime(2026, 3, 29, 2, 30, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    ],
)
def test_instants_read_as_microseconds_are_exact(graph: GraphStore, at: datetime) -> None:
    with graph.session(write=False) as session:
        record = session.run(
            f"RETURN {micros('$at')} AS at, {micros('$none')} AS none", at=at, none=None
        ).single(strict=True)
    assert instant(record["at"]) == at and instant(record["none"]) is None


def test_thread_memory_stays_in_its_channel(graph: GraphStore, world: World) -> None:
    in_a = episodes(ask(graph, world, query="aisle seat", channel_id="ch-a"))
    assert in_a and all(i.channel_id == "ch-a" for i in in_a)
    assert not {m for i in in_a for m in i.evidence} & {"b1", "c1", "d1"}
    # Without a channel the agent's whole memory is searched: channel B is there.
    everywhere = ask(graph, world, query="train broken")
    assert [i.evidence for i in episodes(everywhere)] == [["b1"]]


def test_another_agent_or_tenant_never_appears(graph: GraphStore, world: World) -> None:
    found = ask(graph, world, query="aisle seat upgrade", limit=50)
    assert found
    # Every key starts with its tenant (a fact's through its agent's escaped key).
    assert all(i.key.startswith(world.tenant) for i in found), found
    assert "c1" not in {m for i in found for m in i.evidence}  # Finance's memory, not Travel's
    # The other tenant has the same conversations; each tenant sees only its own.
    other = RecallQuery(tenant=world.other, agent_id="a-travel", query="aisle seat upgrade")
    theirs = recall(graph, other, embedder=None, dm_policy="never")
    assert theirs and all(i.key.startswith(world.other) for i in theirs)
    assert not {i.key for i in found} & {i.key for i in theirs}


def test_a_superseded_fact_never_appears_as_current(graph: GraphStore, world: World) -> None:
    found = ask(graph, world, query="Devon window seat", channel_id="ch-a")
    assert "Devon (@devon) prefers window seat" not in facts(found)
    assert "Devon (@devon) prefers aisle seat" in facts(found)
    stale = ask(graph, world, query="Devon window seat", channel_id="ch-a", include_stale=True)
    old = [i for i in stale if i.text == "Devon (@devon) prefers window seat"]
    assert len(old) == 1 and not old[0].current


def test_a_dm_fact_stays_out_of_group_channels_unless_policy_allows(
    graph: GraphStore, world: World
) -> None:
    allergy = "Sarah (@sarah)'s allergy is peanuts"
    assert allergy in facts(ask(graph, world, query="peanuts allergy"))  # the agent's own view
    assert allergy in facts(ask(graph, world, query="peanuts allergy", channel_id="dm-sarah"))
    for channel in ("ch-a", "ch-s"):
        assert allergy not in facts(ask(graph, world, query="peanuts allergy", channel_id=channel))
    # same_people: in ch-s everyone (Sarah) was in the DM...
    assert allergy in facts(
        ask(graph, world, "same_people", query="peanuts allergy", channel_id="ch-s")
    )
    # ...but Devon was not: not where he spoke (ch-a, ch-b), nor where he only listens (ch-q);
    # nor was Eve, in ch-e in a turn nobody remembers.
    for channel in ("ch-a", "ch-b", "ch-q", "ch-e"):
        assert allergy not in facts(
            ask(graph, world, "same_people", query="peanuts allergy", channel_id=channel)
        ), channel


def test_a_group_fact_reaches_only_channels_whose_members_all_heard_it(
    graph: GraphStore, world: World
) -> None:
    shellfish = "Devon (@devon)'s allergy is shellfish"  # learnt in ch-b: Devon and the agent
    assert shellfish in facts(ask(graph, world, query="shellfish allergy"))
    assert shellfish in facts(ask(graph, world, query="shellfish allergy", channel_id="ch-b"))
    # Sarah is in ch-a, ch-s and ch-q and never heard it; nobody is known in an unseen channel.
    for channel in ("ch-a", "ch-s", "ch-q", "ch-unseen"):
        assert shellfish not in facts(
            ask(graph, world, "same_people", query="shellfish allergy", channel_id=channel)
        ), channel
    # Sarah's seat, learnt in ch-a, may enter ch-b: Devon, its only other member, heard it there.
    aisle = "Sarah (@sarah) prefers aisle seat"
    assert aisle in facts(ask(graph, world, query="Sarah aisle seat", channel_id="ch-b"))
    assert aisle in facts(ask(graph, world, query="Sarah aisle seat", channel_id="ch-s"))
    # Eve is in ch-e now (from a turn the agent was left out of) and never heard ch-a.
    assert aisle not in facts(ask(graph, world, query="Sarah aisle seat", channel_id="ch-e"))
    assert aisle not in facts(ask(graph, world, query="Sarah aisle seat", channel_id="ch-unseen"))


def test_a_time_window_keeps_to_what_was_said_in_it(graph: GraphStore, world: World) -> None:
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    early = ask(graph, world, query="aisle seat", channel_id="ch-a", until=start.replace(minute=3))
    assert "Sarah (@sarah) prefers aisle seat" in facts(early)  # stated at 10:02
    assert "Devon (@devon) prefers aisle seat" not in facts(early)  # stated at 10:06
    shown = {m for i in episodes(early) for m in i.evidence}
    assert "a2" in shown and not shown & {"a3", "a4", "a5", "a6"}
    late = ask(graph, world, query="aisle seat", channel_id="ch-a", since=start.replace(minute=5))
    assert facts(late) == ["Devon (@devon) prefers aisle seat"]
    assert {m for i in episodes(late) for m in i.evidence} <= {"a5", "a6"}


def test_sources_keep_facts_to_those_kinds_and_leave_messages_alone(
    graph: GraphStore, world: World
) -> None:
    said = ask(graph, world, query="aisle seat", channel_id="ch-a", sources=["self_stated"])
    assert "Sarah (@sarah) prefers aisle seat" in facts(said)
    others = ask(graph, world, query="aisle seat", channel_id="ch-a", sources=["peer_stated"])
    assert facts(others) == [] and episodes(others)


def test_the_answer_next_to_the_matching_question_comes_with_it(
    graph: GraphStore, world: World
) -> None:
    (hit,) = episodes(ask(graph, world, query="hotel budget", channel_id="ch-a"))
    assert hit.matched == ["a3"]
    assert hit.evidence == ["a2", "a3", "a4"]  # the answer (a4) sits right after the question
    assert hit.text.splitlines() == [
        "Sarah (@sarah): I prefer an aisle seat",
        "Devon (@devon): What is the budget for the hotel?",
        "Sarah (@sarah): About 150 per night.",
    ]
    (alone,) = episodes(
        ask(graph, world, query="hotel budget", channel_id="ch-a", include_neighbours=False)
    )
    assert alone.evidence == ["a3"]


def test_an_excluded_message_is_never_shown_but_still_lifts_its_neighbours(
    graph: GraphStore, world: World
) -> None:
    """The caller's recent window (`exclude_ids`) is never shown; the answer next to an
    excluded question still is, on the question's relevance."""
    found = episodes(ask(graph, world, query="hotel budget", channel_id="ch-a", exclude_ids=["a3"]))
    shown = [m for item in found for m in item.evidence]
    assert "a3" not in shown and "a4" in shown
    assert all("a3" not in item.matched for item in found)
    recent = ask(graph, world, query="?!", channel_id="ch-a", limit=2, exclude_ids=["a6"])
    assert [i.evidence for i in recent] == [["a5"], ["a4"]]


def test_a_long_excluded_window_still_leaves_room_for_what_came_before(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    """Every retriever reads as many more candidates as the caller excluded: 35 recent messages
    that match best of all do not hide the older, weaker match behind them."""
    tenant = f"r{uuid.uuid4().hex[:12]}"
    word = f"kw{uuid.uuid4().hex[:10]}"
    channel = {"id": "ch-w", "kind": "group", "title": "Window"}
    said = [("o0", f"Long ago we said something about {word} among many other words here")]
    said += [(f"f{n}", f"Filler line number {n}") for n in range(1, 20)]
    said += [(f"w{n}", f"{word} {word}") for n in range(20, 55)]
    messages = [msg(mid, "user", "u-devon", text, n) for n, (mid, text) in enumerate(said)]
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
    emit_all(settings, ledger, [event(tenant, "ev-w", channel, [DEVON, SARAH, TRAVEL], messages)])
    searchable(graph)
    recent = tuple(mid for mid, _ in said if mid.startswith("w"))
    query = RecallQuery(
        tenant=tenant, agent_id="a-travel", channel_id="ch-w", query=word, exclude_ids=recent
    )
    found = recall(graph, query, embedder=None, dm_policy="never")
    shown = {m for item in found for m in item.evidence}
    assert "o0" in shown and not shown & set(recent)


def test_a_run_longer_than_a_window_is_cut_around_its_best_message(
    graph: GraphStore, world: World
) -> None:
    # "seat" matches four of ch-a's six messages and their neighbours are the other two: one
    # run of six, shown as windows of at most MAX_WINDOW, the best match's first.
    shown = episodes(ask(graph, world, query="seat", channel_id="ch-a"))
    assert len(shown) > 1 and all(len(item.evidence) <= MAX_WINDOW for item in shown)
    assert sorted(m for item in shown for m in item.evidence) == [f"a{n}" for n in range(1, 7)]
    assert [item.score for item in shown] == sorted((i.score for i in shown), reverse=True)
    assert shown[0].matched and set(shown[0].matched) <= set(shown[0].evidence)


def keyword_search(
    graph: GraphStore, tenant: str, channel: str, text: str, *, fetch: int
) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """The keyword retriever alone, in `channel` as the Travel Agent, `fetch` candidates deep:
    its scores, the content-only scores, and the rows it read."""
    query = RecallQuery(tenant=tenant, agent_id="a-travel", query=text, channel_id=channel)
    lucene = lucene_query(text)
    assert lucene is not None
    said: dict[str, float] = {}
    rows: dict[str, Any] = {}
    with graph.session(write=False) as session:
        online = search._online_indexes(graph, session)
        ask = Ask(graph, query, search._scope_params(query, "never"), fetch, online)
        found = search._keyword_search(ask, session, lucene, rows, segments={}, said=said)
    return found, said, rows


def test_a_keyword_score_is_what_was_said_plus_who_said_it(graph: GraphStore, world: World) -> None:
    # Recall lets a neighbour pass on only what it said (rank.label_share): that rests on
    # Lucene adding up each field's score, so the content-only search is the content's part.
    found, said, _ = keyword_search(graph, world.tenant, "ch-a", "Devon hotel budget", fetch=30)
    ids = {episode_key(world.tenant, "ch-a", f"a{n}"): f"a{n}" for n in range(1, 7)}
    keyword = {ids[key]: score for key, score in found.items() if key in ids}
    said = {ids[key]: score for key, score in said.items() if key in ids}
    # Devon's messages match on his label; a3 also says "hotel budget", a4 nothing asked.
    assert {"a1", "a3", "a5", "a6"} <= set(keyword) and "a4" not in keyword
    assert set(said) == {"a3"}
    assert keyword["a3"] - said["a3"] == pytest.approx(keyword["a5"], rel=1e-5)
    assert keyword["a1"] == pytest.approx(keyword["a5"], rel=1e-5)


def test_a_message_saying_what_was_asked_is_a_candidate_beside_the_named_speakers(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    # A question naming someone matches everything they said on the speaker's label; a name
    # no other message in the index carries outweighs a common word ("seat"). With room for one
    # keyword candidate, one of Zed's greetings would take it, and Devon's message, the only
    # one saying what was asked, would not be a candidate at all.
    tenant = f"r{uuid.uuid4().hex[:12]}"
    name = f"Zed{uuid.uuid4().hex[:8]} Q{uuid.uuid4().hex[:8]}"
    zed = {"id": "u-zed", "kind": "human", "display_name": name, "handle": "zed"}
    channel = {"id": "ch-z", "kind": "group", "title": "Seats"}
    said_by = [("u-zed", "Hello there"), ("u-zed", "Good morning to you all")]
    said_by += [("u-zed", "Thanks a lot"), ("u-devon", "The aisle seat is booked")]
    messages = [
        msg(f"z{n}", "user", sender, text, n) for n, (sender, text) in enumerate(said_by, start=1)
    ]
    grant_trust(graph, tenant, "u-devon", "u-zed", "team")
    emit_all(settings, ledger, [event(tenant, "ev-z", channel, [DEVON, zed, TRAVEL], messages)])
    found, said, rows = keyword_search(graph, tenant, "ch-z", f"{name} seat", fetch=1)
    answer = episode_key(tenant, "ch-z", "z4")
    assert set(said) == {answer}
    zeds = [key for key in found if key != answer]
    assert len(zeds) == 1 and rows[zeds[0]][1]["speaker_label"].startswith(name)
    assert found[zeds[0]] > found[answer] == pytest.approx(said[answer])
    assert rows[answer][1]["text"] == "The aisle seat is booked"


def test_no_query_gives_recent_memory(graph: GraphStore, world: World) -> None:
    recent = ask(graph, world, query="?!", channel_id="ch-a", limit=2)
    assert [i.evidence for i in recent] == [["a6"], ["a5"]]


def test_cli_recall_json(settings: Settings, world: World) -> None:
    shown = cli(
        settings,
        "recall",
        "--agent",
        "a-travel",
        "--tenant",
        world.tenant,
        "--channel",
        "ch-a",
        "--query",
        "seat preference",
        "--json",
    )
    assert shown.returncode == 0, shown.stderr
    items = json.loads(shown.stdout)
    assert items and all({"kind", "key", "text", "score", "evidence"} <= set(i) for i in items)
    assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
    assert any(i["kind"] == "fact" and i["evidence"] == ["a2"] for i in items)
    assert any(i["kind"] == "episode" and "a2" in i["evidence"] for i in items)

    refused = cli(settings, "recall", "--agent", "a-travel", "--query", "x", "--limit", "0")
    assert refused.returncode == 2 and "limit" in refused.stderr
    refused = cli(settings, "recall", "--agent", "a-travel", "--query", "x", "--exclude", " ")
    assert refused.returncode == 2 and "memsync: exclude: " in refused.stderr, refused.stderr
    left_out = cli(
        settings,
        "recall",
        *("--agent", "a-travel", "--tenant", world.tenant, "--channel", "ch-a"),
        *("--query", "seat preference", "--exclude", "a2", "--json"),
    )
    assert left_out.returncode == 0, left_out.stderr
    episodes_shown = [i for i in json.loads(left_out.stdout) if i["kind"] == "episode"]
    assert episodes_shown and all("a2" not in i["evidence"] for i in episodes_shown)


# A question sharing no searchable word with the message that answers it, among distractors.
PARAPHRASED = [
    ("p1", "u-devon", "Our daughter cannot have anything with peanuts in it"),
    ("p2", "u-sarah", "The hotel pool closes at nine"),
    ("p3", "u-devon", "Please book the train for Friday morning"),
    ("p4", "u-sarah", "The meeting moved to the big conference room"),
    ("p5", "u-devon", "I prefer a window seat"),  # becomes a fact: distilled memory competes
]


def test_a_paraphrase_finds_the_message_it_means_first(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    embedder = make_embedder(settings)
    assert embedder is not None  # the session runs with embeddings on
    tenant = f"r{uuid.uuid4().hex[:12]}"
    channel = {"id": "ch-p", "kind": "group", "title": "Family trip"}
    messages = [
        msg(mid, "user", sender, text, minute)
        for minute, (mid, sender, text) in enumerate(PARAPHRASED, start=1)
    ]
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")  # strict trust, as in `world`
    emit_all(settings, ledger, [event(tenant, "ev-p", channel, [DEVON, SARAH, TRAVEL], messages)])
    keys = [episode_key(tenant, "ch-p", mid) for mid, _, _ in PARAPHRASED]
    deadline = time.monotonic() + 120
    while pending_for_episodes(graph, keys) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the embed worker's backlog, bounded by the deadline
    assert pending_for_episodes(graph, keys) == 0

    question = "any dietary restrictions for the kid?"
    query = RecallQuery(tenant=tenant, agent_id="a-travel", query=question, channel_id="ch-p")
    # Keyword search alone cannot find it: no word of the question is in any message...
    keyword = recall(
        graph, query.model_copy(update={"mode": "keyword"}), embedder=embedder, dm_policy="never"
    )
    assert not any("p1" in item.matched for item in keyword)
    # ...meaning can, and the message comes first, ahead of a fact that matches worse (fused
    # one list per kind, every list's top tied and the fact led).
    found = recall(graph, query, embedder=embedder, dm_policy="never")
    assert found and found[0].kind == "episode" and "p1" in found[0].matched, found
    assert "Devon (@devon) prefers window seat" in facts(found), found


def test_a_message_holding_the_questions_words_leads_over_lifted_neighbours(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    ledger: Ledger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run of messages that each say part of the question lifts its middle by the neighbours'
    # shares; the one message that says all of it, in a quiet channel, should still lead. The
    # words are made up, so other tests' messages in the index do not change how they weigh.
    tenant = f"r{uuid.uuid4().hex[:12]}"
    sale = {"id": "ch-sale", "kind": "group", "title": "Shop"}
    lost = {"id": "ch-lost", "kind": "group", "title": "Office"}
    said_in_sale = [
        "Zorbelle: teal parasol sale!",
        "Zorbelle: teal parasol stock",
        "Zorbelle: teal parasol deals",
        "Zorbelle: teal parasol display",
        "Zorbelle: teal parasol posters",
    ]
    said_in_lost = [
        "Good morning",
        "Zorbelle says she will leave the teal parasol at the bakery on Pine Street when she"
        " walks past it on her way home tonight, so you can pick it up there tomorrow",
        "Noted",
    ]
    emit_all(
        settings,
        ledger,
        [
            event(
                tenant,
                "ev-sale",
                sale,
                [DEVON, TRAVEL],
                [msg(f"s{n}", "user", "u-devon", text, n) for n, text in enumerate(said_in_sale)],
            ),
            event(
                tenant,
                "ev-lost",
                lost,
                [DEVON, TRAVEL],
                [
                    msg(f"l{n}", "user", "u-devon", text, 10 + n)
                    for n, text in enumerate(said_in_lost)
                ],
            ),
        ],
    )
    searchable(graph)
    query = RecallQuery(
        tenant=tenant, agent_id="a-travel", query="Where did Zorbelle leave the teal parasol?"
    )

    def first() -> RecallItem:
        return episodes(recall(graph, query, embedder=None, dm_policy="never"))[0]

    assert "l1" in first().evidence
    # The same question without clear matches: the sale's run comes first, so the test above
    # holds because of them.
    monkeypatch.setattr(scoring, "lead_clear_match", lambda scores, coverage: dict(scores))
    assert first().channel_id == "ch-sale"


def emit_said(
    settings: Settings,
    ledger: Ledger,
    graph: GraphStore,
    channel: dict[str, str],
    said: list[tuple[str, str]],
    prefix: str,
) -> str:
    """One turn of Devon and the travel agent saying `said` in `channel` (message n's id is
    f"{prefix}{n}"), in a tenant of its own, waited for until searchable; the tenant."""
    tenant = f"r{uuid.uuid4().hex[:12]}"
    messages = [
        msg(f"{prefix}{n}", "assistant" if who == "a-travel" else "user", who, text, n)
        for n, (who, text) in enumerate(said)
    ]
    event_id = f"ev-{channel['id']}"
    emit_all(settings, ledger, [event(tenant, event_id, channel, [DEVON, TRAVEL], messages)])
    searchable(graph)
    return tenant


def test_a_replacing_value_leads_the_value_it_replaced(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    ledger: Ledger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The old budget sits among messages about the hotel the question names, so it matches
    # best; the update came later in the same channel and replaced the fact the old one backs.
    channel = {"id": "ch-porto", "kind": "group", "title": "Porto"}
    said = [
        ("a-travel", "Let's sort out the Porto hotel for the offsite."),
        ("u-devon", "My budget is 2000 EUR."),
        ("a-travel", "Noted, I'll look for a Porto hotel under that."),
        ("u-devon", "Something quiet, please, away from the nightlife."),
        ("a-travel", "There are two by the river and one near the station."),
        ("u-devon", "By the river sounds right."),
        ("a-travel", "I'll send both riverside options tonight."),
        ("u-devon", "Update: my budget is 2500 EUR."),
        ("a-travel", "Got it."),
    ]
    tenant = emit_said(settings, ledger, graph, channel, said, "p")
    query = RecallQuery(
        tenant=tenant, agent_id="a-travel", query="What is the budget for the Porto hotel?"
    )

    def shown() -> list[RecallItem]:
        return episodes(recall(graph, query, embedder=None, dm_policy="never"))

    first, *rest = shown()
    assert "p7" in first.evidence and "p1" not in first.evidence, shown()
    [old] = [item for item in rest if "p1" in item.evidence]
    assert [(c.now, c.evidence) for c in old.changed] == [
        ("Devon (@devon)'s budget is 2500 EUR", ["p7"])
    ]
    # A question about the hotel shows the old budget only as a neighbour of what matched; the
    # update matched nothing and sits far from every match, and is fetched to be shown with it.
    about_hotel = query.model_copy(update={"query": "Which Porto hotel did we pick?"})
    found = episodes(recall(graph, about_hotel, embedder=None, dm_policy="never"))
    [with_old] = [item for item in found if "p1" in item.evidence]
    assert [c.evidence for c in with_old.changed] == [["p7"]]
    assert any(item.evidence == ["p7"] for item in found), found
    # Without the rule the old value comes first, so the test above holds because of it; and
    # without the fetch the hotel question never shows the update.
    monkeypatch.setattr(scoring, "prefer_current", lambda scores, replaced_by: scores)
    assert "p1" in shown()[0].evidence
    monkeypatch.undo()
    real = search._neighbours
    monkeypatch.setattr(
        search, "_neighbours", lambda *args, **kwargs: (*real(*args, **kwargs)[:3], [])
    )
    found = episodes(recall(graph, about_hotel, embedder=None, dm_policy="never"))
    assert not any("p7" in item.evidence for item in found), found


def test_a_message_saying_it_replaces_a_value_leads_the_values_before_it(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    ledger: Ledger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first date sits with the words the question uses; the one that stands came six
    # messages later, out of reach of the first one's window, and says it replaces it.
    channel = {"id": "ch-lisbon", "kind": "group", "title": "Lisbon"}
    said = [
        ("u-devon", "I need to move my return flight from Lisbon, it's on March 3rd right now."),
        ("a-travel", "Sure, what would suit you?"),
        ("u-devon", "The conference got extended, so March 6th, in the evening if possible."),
        ("a-travel", "On March 6th there's a 6:40 PM departure with a change fee."),
        ("u-devon", "Hold on, let me check the programme with my office first."),
        ("a-travel", "Of course, take your time."),
        ("u-devon", "They wrap up at noon on the 5th. Put me on an evening one March 5th instead."),
        ("a-travel", "Done."),
    ]
    tenant = emit_said(settings, ledger, graph, channel, said, "l")
    query = RecallQuery(
        tenant=tenant, agent_id="a-travel", query="Which day is Devon now flying back from Lisbon?"
    )

    def first(question: str) -> RecallItem:
        asked = query.model_copy(update={"query": question})
        return episodes(recall(graph, asked, embedder=None, dm_policy="never"))[0]

    assert "l6" in first(query.query or "").evidence
    # Asked for the date as first booked, the first one leads.
    assert "l0" in first("Which day was Devon originally flying back from Lisbon?").evidence
    # Without the rule the first date leads, so the first assertion holds because of it.
    monkeypatch.setattr(scoring, "revised_by", lambda *args: {})
    assert "l6" not in first(query.query or "").evidence
