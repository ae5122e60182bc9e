"""Context assembly on real services: turns go through the worker, summaries are written by the
summary writer, then an agent's context for a channel is built from Neo4j. The leakage cases:
another channel's thread memory, DM-learnt facts under each policy, another tenant, and
superseded, expired or untrusted material."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from memsync.producer import Producer
from memsync.reading import Memory
from memsync.settings import Settings
from pipeline.graph.context import build_context
from pipeline.graph.directory import grant_trust
from pipeline.graph.reader import agent_commitments, agent_facts
from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore
from pipeline.graph.summaries import NewSummary, Position, write_summary
from schemas.context import Context
from schemas.keys import channel_key, episode_key, participant_key
from schemas.recall import RecallQuery
from tests.integration.test_operations import cli
from tests.integration.test_spine import DEVON, SARAH, TRAVEL, emit_all, emit_and_wait, event, msg
from tests.integration.writing import searchable
from workers.cli.display import describe_memory
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

CH_A = {"id": "ch-a", "kind": "group", "title": "Trip A"}
CH_B = {"id": "ch-b", "kind": "group", "title": "Trip B"}
DM = {"id": "dm-sarah", "kind": "dm"}
PUBLIC = {"id": "ch-pub", "kind": "public", "title": "Open lounge"}
CH_S = {"id": "ch-s", "kind": "group", "title": "Sarah's plans"}
AISLE = "Sarah (@sarah) prefers aisle seat"
ALLERGY = "Sarah (@sarah)'s allergy is peanuts"


def turns(tenant: str) -> list[Any]:
    return [
        event(
            tenant,
            "ev-a",
            CH_A,
            [DEVON, SARAH, TRAVEL],
            [
                msg("a1", "user", "u-sarah", "I prefer an aisle seat", 1),
                msg("a2", "user", "u-devon", "I prefer a window seat", 2),
                msg("a3", "user", "u-devon", "Actually I prefer an aisle seat now", 3),
                msg("a4", "user", "u-devon", "Sarah, I'll send the hotel list by Friday", 4),
                msg("a5", "user", "u-sarah", "What is the hotel budget?", 5),
            ],
        ),
        event(
            tenant,
            "ev-b",
            CH_B,
            [DEVON, TRAVEL],
            [
                msg("b1", "user", "u-devon", "The hotel shuttle in Lyon was broken", 6),
                msg("b2", "user", "u-devon", "I am allergic to shellfish", 59),
            ],
        ),
        event(
            tenant,
            "ev-d",
            DM,
            [SARAH, TRAVEL],
            [
                msg("d1", "user", "u-sarah", "I am allergic to peanuts", 7),
                msg("d2", "user", "u-sarah", "I'll send you my passport scan by Monday", 8),
            ],
        ),
        event(
            tenant,
            "ev-s",
            CH_S,
            [SARAH, TRAVEL],
            [msg("s1", "user", "u-sarah", "Please book the hotel for May", 9)],
        ),
        # Public: untrusted, so nothing of it may become the agent's memory.
        event(
            tenant,
            "ev-p",
            PUBLIC,
            [DEVON, TRAVEL],
            [msg("p1", "user", "u-devon", "I prefer first class hotel suites", 8)],
        ),
    ]


@dataclass(frozen=True)
class World:
    tenant: str
    other: str  # a second tenant with the same conversations and ids


def summary_text(tenant: str, channel: str) -> str:
    return f"[2026-11-29] summary of {channel} for {tenant}: the hotel plan"


def write_channel_summary(graph: GraphStore, tenant: str, channel: str, last: str) -> None:
    agent_key = participant_key(tenant, "a-travel")
    written = write_summary(
        graph,
        NewSummary(
            tenant=tenant,
            agent_key=agent_key,
            channel_key=channel_key(tenant, channel),
            expected_version=0,
            text=summary_text(tenant, channel),
            covers_until=Position(
                created_at=datetime(2026, 11, 29, 10, 6, tzinfo=UTC),
                key=episode_key(tenant, channel, last),
            ),
            folds_since_anchor=0,
            anchored=True,
            summarizer="extractive",
        ),
    )
    assert written == 1


@pytest.fixture(scope="module")
def world(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> Iterator[World]:
    tenants = [f"x{uuid.uuid4().hex[:12]}" for _ in range(2)]
    producer = Producer(settings)
    try:
        for tenant in tenants:
            grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
            emit_and_wait(producer, ledger, turns(tenant))
            write_channel_summary(graph, tenant, "ch-a", "a5")
            write_channel_summary(graph, tenant, "ch-b", "b1")
    finally:
        producer.close(timeout=10)
    searchable(graph)
    yield World(*tenants)


def context(graph: GraphStore, world: World, channel: str = "ch-a", **options: Any) -> Context:
    return build_context(graph, world.tenant, "a-travel", channel, **options)


def rendered(ctx: Context) -> str:
    return "\n".join(m["content"] for m in ctx.render())


def fact_texts(ctx: Context) -> list[str]:
    return [f.text for f in ctx.facts]


def test_a_channel_context_has_its_summary_people_facts_and_commitments(
    graph: GraphStore, world: World
) -> None:
    ctx = context(graph, world, query="hotel budget")
    assert ctx.summary is not None and ctx.summary.text == summary_text(world.tenant, "ch-a")
    assert ctx.summary.version == 1
    assert ctx.summary.covers_until == datetime(2026, 11, 29, 10, 6, tzinfo=UTC)
    assert {p.id for p in ctx.participants} == {"u-devon", "u-sarah", "a-travel"}
    assert AISLE in fact_texts(ctx)
    aisle = next(f for f in ctx.facts if f.text == AISLE)
    assert aisle.learnt_in == ["ch-a"] and aisle.evidence == ["a1"] and not aisle.stale
    assert aisle.source == "self_stated"
    [promise] = ctx.commitments
    assert promise.owed_by.id == "u-devon" and promise.evidence == ["a4"]
    assert any("a5" in m.evidence for m in ctx.memories)
    assert ctx.used_tokens <= ctx.budget_tokens
    text = rendered(ctx)
    assert f"- {AISLE} (self-stated)" in text
    assert "## Open commitments" in text
    # The extracted sentence names who owes it; the line does not say it twice.
    [line] = [line for line in text.splitlines() if promise.text in line]
    assert line.startswith(f"- {promise.text} (since ") and line.count("Devon (@devon)") == 1


def test_another_channels_thread_memory_never_appears(graph: GraphStore, world: World) -> None:
    ctx = context(graph, world, query="hotel shuttle Lyon broken", budget_tokens=8000)
    assert ctx.summary is not None and "ch-b" not in ctx.summary.text
    episodes = [m for m in ctx.memories if m.kind in ("episode", "summary")]
    assert all(m.channel_id == "ch-a" for m in episodes), episodes
    assert "b1" not in {e for m in ctx.memories for e in m.evidence}
    text = rendered(ctx)
    assert (
        "shuttle in Lyon was broken" not in text and summary_text(world.tenant, "ch-b") not in text
    )
    # Channel B's own context does have them: the filter is the scope, not missing data.
    in_b = context(graph, world, "ch-b", query="hotel shuttle Lyon broken")
    assert in_b.summary is not None and in_b.summary.text == summary_text(world.tenant, "ch-b")
    assert any("b1" in m.evidence for m in in_b.memories)
    assert {p.id for p in in_b.participants} == {"u-devon", "a-travel"}


def test_a_dm_fact_follows_the_policy(graph: GraphStore, world: World) -> None:
    in_dm = context(graph, world, "dm-sarah")
    assert ALLERGY in fact_texts(in_dm)
    # A commitment learnt there follows the same rule (a4, Devon's promise to Sarah in ch-a,
    # may enter anywhere she alone is present: she heard it).
    assert sorted(c.evidence for c in in_dm.commitments) == [["a4"], ["d2"]]
    assert ALLERGY not in fact_texts(context(graph, world, "ch-a"))
    assert ALLERGY not in fact_texts(context(graph, world, "ch-s"))
    assert [c.evidence for c in context(graph, world, "ch-s").commitments] == [["a4"]]
    assert ALLERGY not in rendered(context(graph, world, "ch-a", query="peanuts allergy"))
    # same_people: everyone here in ch-s (Sarah) was in the DM...
    allowed = context(graph, world, "ch-s", dm_policy="same_people")
    fact = next(f for f in allowed.facts if f.text == ALLERGY)
    assert fact.learnt_in == ["dm-sarah"]
    assert sorted(c.evidence for c in allowed.commitments) == [["a4"], ["d2"]]
    # ...but Devon, in ch-a with her, was not: it stays out there, even asked for by name.
    strict = context(graph, world, "ch-a", query="peanuts allergy", dm_policy="same_people")
    assert ALLERGY not in fact_texts(strict) and ALLERGY not in rendered(strict)
    assert "passport" not in rendered(context(graph, world, "ch-a", dm_policy="same_people"))


def test_a_group_fact_enters_only_where_everyone_heard_it(graph: GraphStore, world: World) -> None:
    shellfish = "Devon (@devon)'s allergy is shellfish"  # said in ch-b, where Sarah never was
    assert shellfish in fact_texts(context(graph, world, "ch-b"))
    in_a = context(graph, world, "ch-a", query="shellfish allergy")
    assert shellfish not in fact_texts(in_a) and "shellfish" not in rendered(in_a)
    # Sarah's seat was said in ch-a, which she and Devon both heard: it follows her to ch-s.
    assert AISLE in fact_texts(context(graph, world, "ch-s"))


def test_another_tenant_never_appears(graph: GraphStore, world: World) -> None:
    ctx = context(graph, world, query="hotel seat", budget_tokens=8000)
    keys = [
        *(f.key for f in ctx.facts),
        *(c.key for c in ctx.commitments),
        *(m.key for m in ctx.memories),
    ]
    assert keys and all(k.startswith(world.tenant) for k in keys), keys
    assert ctx.summary is not None and ctx.summary.key.startswith(world.tenant)
    assert world.other not in rendered(ctx)
    theirs = build_context(graph, world.other, "a-travel", "ch-a", query="hotel seat")
    assert theirs.summary is not None and world.other in theirs.summary.text
    assert not set(keys) & {f.key for f in theirs.facts}


def test_superseded_expired_and_untrusted_never_appear_as_current(
    graph: GraphStore, world: World
) -> None:
    ctx = context(graph, world, query="window seat first class")
    devon = [f.text for f in ctx.facts if f.subject_id == "u-devon"]
    assert "Devon (@devon) prefers aisle seat" in devon
    assert "Devon (@devon) prefers window seat" not in devon  # superseded
    assert "first class hotel suites" not in rendered(ctx)  # said in public: untrusted
    assert not any("p1" in m.evidence for m in ctx.memories)
    # The public channel holds nothing for the agent at all.
    public = context(graph, world, "ch-pub", query="first class")
    assert (public.summary, public.facts, public.memories) == (None, [], [])
    assert [p.id for p in public.participants] == ["a-travel"]
    # Expiry: current until its expires_at, stale once unconfirmed past the threshold, and
    # gone after it expires.
    [aisle] = [f for f in agent_facts(graph, world.tenant, "a-travel") if f.text == AISLE]
    assert aisle.expires_at is not None
    later = aisle.last_confirmed + timedelta(days=100)
    assert later < aisle.expires_at
    stale = next(f for f in context(graph, world, now=later).facts if f.text == AISLE)
    assert stale.stale
    assert "stale: last confirmed" in rendered(context(graph, world, now=later))
    expired = context(graph, world, now=aisle.expires_at + timedelta(days=1))
    assert AISLE not in fact_texts(expired)


def test_a_small_budget_cuts_by_priority(graph: GraphStore, world: World) -> None:
    whole = context(graph, world, query="hotel budget", budget_tokens=8000)
    assert whole.dropped == []
    small = context(graph, world, query="hotel budget", budget_tokens=whole.used_tokens - 1)
    assert small.used_tokens < whole.used_tokens
    assert small.dropped and small.dropped[-1].section == "memories"
    assert small.summary == whole.summary


def test_the_platform_api_sync_and_async(
    graph: GraphStore, world: World, settings: Settings
) -> None:
    with Memory.from_settings(settings) as memory:
        ctx = memory.build_context("a-travel", "ch-a", tenant=world.tenant, query="hotel")
        actx = asyncio.run(
            memory.abuild_context("a-travel", "ch-a", tenant=world.tenant, query="hotel")
        )
        items = asyncio.run(
            memory.arecall(
                tenant=world.tenant,
                agent_id="a-travel",
                query="aisle seat",
                kinds=("episode", "fact"),
            )
        )
    assert ctx.summary == actx.summary and fact_texts(ctx) == fact_texts(actx)
    assert any(i.kind == "fact" and i.text == AISLE for i in items)


def shown_messages(ctx: Context) -> set[str]:
    return {m for item in ctx.memories for m in item.evidence}


def test_the_recent_window_is_never_repeated(
    graph: GraphStore, world: World, settings: Settings
) -> None:
    """The messages the platform puts after the context are left out of its memories, which
    show what came before them instead; the same through the platform API."""
    assert {"a4", "a5"} <= shown_messages(context(graph, world, query="hotel budget"))
    trimmed = context(graph, world, query="hotel budget", recent_ids=["a4", "a5"])
    assert trimmed.memories and shown_messages(trimmed) <= {"a1", "a2", "a3"}
    with Memory.from_settings(settings) as memory:
        ctx = memory.build_context(
            "a-travel", "ch-a", tenant=world.tenant, query="hotel budget", recent_ids=["a5"]
        )
        with pytest.raises(ValidationError, match="recent_ids"):
            memory.build_context("a-travel", "ch-a", tenant=world.tenant, recent_ids=["a5", ""])
    assert "a5" not in shown_messages(ctx) and "a4" in shown_messages(ctx)


def test_cli_context(settings: Settings, world: World) -> None:
    args = ("context", "--agent", "a-travel", "--channel", "ch-a", "--tenant", world.tenant)
    shown = cli(settings, *args, "--query", "hotel budget", "--json")
    assert shown.returncode == 0, shown.stderr
    ctx = Context.model_validate(json.loads(shown.stdout))
    assert ctx.summary is not None and ctx.summary.text == summary_text(world.tenant, "ch-a")
    assert AISLE in fact_texts(ctx) and ALLERGY not in fact_texts(ctx)
    human = cli(settings, *args, "--budget", "300")
    assert human.returncode == 0, human.stderr
    assert "# Memory for Travel Agent (@travel) in #ch-a (Trip A)" in human.stdout
    assert "of 300 tokens" in human.stdout
    refused = cli(settings, *args, "--budget", "-1")
    assert refused.returncode == 2 and "budget" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    recent = ("--query", "hotel budget", "--recent", "a4", "--recent", "a5", "--json")
    trimmed = cli(settings, *args, *recent)
    assert trimmed.returncode == 0, trimmed.stderr
    assert not shown_messages(Context.model_validate(json.loads(trimmed.stdout))) & {"a4", "a5"}
    refused = cli(settings, *args, "--recent", " ")
    assert refused.returncode == 2 and "memsync: recent: " in refused.stderr, refused.stderr


def test_a_replaced_value_is_marked_where_it_is_shown(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    """A window showing a value that a later message of its channel replaced says so, naming
    the replacement; one made in another channel (a DM here) is never named."""
    tenant = f"x{uuid.uuid4().hex[:12]}"
    seats = {"id": "ch-x", "kind": "group", "title": "Seats"}
    dm = {"id": "dm-devon", "kind": "dm"}
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
    emit_all(
        settings,
        ledger,
        [
            event(
                tenant,
                "ev-x",
                seats,
                [DEVON, SARAH, TRAVEL],
                [
                    msg("x1", "user", "u-devon", "I prefer a window seat", 1),
                    msg("x2", "user", "u-sarah", "Lisbon it is, then", 2),
                    msg("x3", "user", "u-devon", "Actually I prefer an aisle seat now", 3),
                ],
            ),
            event(
                tenant,
                "ev-y",
                dm,
                [DEVON, TRAVEL],
                [msg("y1", "user", "u-devon", "I prefer a middle seat", 9)],
            ),
        ],
    )
    searchable(graph)
    facts = agent_facts(graph, tenant, "a-travel", include_superseded=True)
    assert {f.text for f in facts if f.superseded_at is None} == {
        "Devon (@devon) prefers middle seat"
    }

    ctx = build_context(graph, tenant, "a-travel", "ch-x", query="window seat")
    [shown] = [m for m in ctx.memories if "x1" in m.evidence]
    [change] = shown.changed  # x3's own replacement was said in the DM: not named here
    assert change.was == "Devon (@devon) prefers window seat"
    assert change.now == "Devon (@devon) prefers aisle seat"
    assert change.evidence == ["x3"]
    text = rendered(ctx)
    assert change.note() in text and "middle" not in text
    # The DM's own context names nothing of the group's.
    in_dm = build_context(graph, tenant, "a-travel", "dm-devon", query="middle seat")
    assert all(not m.changed for m in in_dm.memories)


def test_a_commitment_that_points_back_quotes_what_it_answers(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    """A commitment such as "I'll do that for you" is shown with the message it answers: the
    latest before it in its sitting by someone else. One whose words name what is owed quotes
    nothing, and neither does one whose only earlier message by another speaker is from an
    earlier sitting."""
    tenant = f"x{uuid.uuid4().hex[:12]}"
    hotels = {"id": "ch-h", "kind": "group", "title": "Hotels"}
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
    asked = "Can you look up the Lisbon hotel prices for May?"
    emit_all(
        settings,
        ledger,
        [
            event(
                tenant,
                "ev-h",
                hotels,
                [DEVON, SARAH, TRAVEL],
                [
                    msg("h1", "user", "u-sarah", "I found a museum pass for Lisbon", 1),
                    msg("h2", "user", "u-sarah", asked, 2),
                    msg("h3", "user", "u-devon", "Good idea", 3),
                    msg("h4", "user", "u-devon", "Sure, I'll do that for you by Friday", 4),
                    msg("h5", "user", "u-devon", "And I'll send the train times tomorrow", 5),
                    # 44 minutes after Sarah last spoke: another sitting.
                    msg("h6", "user", "u-devon", "I'll check it tomorrow", 46),
                ],
            ),
        ],
    )
    searchable(graph)
    ctx = build_context(graph, tenant, "a-travel", "ch-h")
    by_message = {c.evidence[0]: c for c in ctx.commitments}
    assert set(by_message) == {"h4", "h5", "h6"}
    assert by_message["h4"].in_reply_to == f"Sarah (@sarah): {asked}"
    assert by_message["h5"].in_reply_to is None  # it names what is owed
    assert by_message["h6"].in_reply_to is None  # Sarah's question was another sitting
    # Stored as "do that": "for you" is trimmed, since the commitment records whom it is owed.
    [line] = [line for line in rendered(ctx).splitlines() if "committed: do that" in line]
    assert f'(in reply to "Sarah (@sarah): {asked}")' in line
    # Recall's commitment items carry it too, and the CLI prints it.
    owed = "What has Devon committed to?"
    query = RecallQuery(tenant=tenant, agent_id="a-travel", query=owed, kinds=("commitment",))
    found = {i.evidence[0]: i for i in recall(graph, query, embedder=None, dm_policy="never")}
    assert set(found) == {"h4", "h5", "h6"}
    assert found["h4"].in_reply_to == f"Sarah (@sarah): {asked}"
    assert found["h5"].in_reply_to is None and found["h6"].in_reply_to is None
    shown = cli(settings, "recall", "--agent", "a-travel", "--tenant", tenant, "--query", owed)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    [line] = [line for line in lines if "commitment: " in line and "do that" in line]
    assert f'(in reply to "Sarah (@sarah): {asked}")' in line


def test_a_commitment_says_when_a_value_it_quotes_was_replaced(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> None:
    """ "I will track the 2000 EUR budget" stays owed after "my budget is 2500 EUR", and says
    the value it names was replaced; a commitment naming no replaced value says nothing, and a
    replacement said where this channel's audience did not hear it is never named."""
    tenant = f"x{uuid.uuid4().hex[:12]}"
    trip = {"id": "ch-t", "kind": "group", "title": "Budget"}
    other = {"id": "ch-o", "kind": "group", "title": "Hotels"}
    dm = {"id": "dm-devon", "kind": "dm"}
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
    emit_all(
        settings,
        ledger,
        [
            event(
                tenant,
                "ev-t",
                trip,
                [DEVON, SARAH, TRAVEL],
                [
                    # Written with a thousands' comma, quoted without: one value.
                    msg("t1", "user", "u-sarah", "My budget is 2,000 EUR.", 1),
                    msg("t2", "assistant", "a-travel", "I will track the 2000 EUR budget.", 2),
                    msg("t3", "user", "u-devon", "I'll send the visa forms by Friday", 3),
                    msg("t4", "user", "u-sarah", "Update: my budget is 2500 EUR.", 9),
                ],
            ),
            event(
                tenant,
                "ev-o",
                other,
                [DEVON, TRAVEL],
                [
                    msg("o1", "user", "u-devon", "My hotel budget is 300 EUR.", 1),
                    msg("o2", "assistant", "a-travel", "I will find a room under 300 EUR.", 2),
                ],
            ),
            event(
                tenant,
                "ev-d",
                dm,
                [DEVON, TRAVEL],
                [msg("d1", "user", "u-devon", "My hotel budget is 400 EUR now.", 9)],
            ),
        ],
    )
    searchable(graph)
    ctx = build_context(graph, tenant, "a-travel", "ch-t")
    by_message = {c.evidence[0]: c for c in ctx.commitments}
    assert set(by_message) == {"t2", "t3"}
    [change] = by_message["t2"].changed
    assert (change.was, change.now, change.evidence, change.said_in) == (
        "Sarah (@sarah)'s budget is 2,000 EUR",
        "Sarah (@sarah)'s budget is 2500 EUR",
        ["t4"],
        "ch-t",
    )
    assert by_message["t3"].changed == []
    lines = rendered(ctx).splitlines()
    [line] = [line for line in lines if "2000 EUR budget" in line]
    assert lines[lines.index(line) + 1] == (
        '  (later in #ch-t, "Sarah (@sarah)\'s budget is 2,000 EUR" became'
        ' "Sarah (@sarah)\'s budget is 2500 EUR")'
    )
    # Recall's commitment item says so too.
    query = RecallQuery(tenant=tenant, agent_id="a-travel", query="track budget", limit=10)
    [owed] = [
        item
        for item in recall(graph, query, embedder=None, dm_policy="never")
        if item.kind == "commitment" and "2000" in item.text
    ]
    assert owed.changed == [change]
    # Devon's hotel budget changed in a DM the Hotels channel did not hear: not named there.
    in_other = build_context(graph, tenant, "a-travel", "ch-o")
    [room] = [c for c in in_other.commitments if "300 EUR" in c.text]
    assert room.changed == []
    # What is stored (`memsync facts`, an operator's view heard by no audience) names both.
    stored = agent_commitments(graph, tenant, "a-travel")
    [track] = [c for c in stored if "2000 EUR" in c.text]
    assert track.changed == [change]
    [owed_room] = [c for c in stored if "300 EUR" in c.text]
    assert [("400 EUR" in c.now, c.said_in) for c in owed_room.changed] == [(True, "dm-devon")]
    assert [c.changed for c in stored if c not in (track, owed_room)] == [[]]
    listing = describe_memory([], stored)
    [line] = [line for line in listing if line.startswith("  owes") and "2000 EUR" in line]
    assert listing[listing.index(line) + 1] == f"        ({change.note()})"
    # In the DM, which heard the change, it is named.
    in_dm = build_context(graph, tenant, "a-travel", "dm-devon")
    [room] = [c for c in in_dm.commitments if "300 EUR" in c.text]
    assert [c.now for c in room.changed] == ["Devon (@devon)'s hotel budget is 400 EUR"]
