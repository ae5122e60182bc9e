"""Stages 1-4 and the writer's planning on hand-made turns: filter, resolve, trust, fan-out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.fanout import fan_out
from pipeline.filter import filter_turns
from pipeline.graph.writer import plan_audience, plan_batch
from pipeline.ingest import ingest_turns
from pipeline.resolve import names_needed, resolve_speakers
from pipeline.trust import ChannelTrustPolicy, TrustMode, check_trust
from schemas.event import TurnEvent
from schemas.keys import channel_key, episode_key, participant_key
from schemas.records import KnownParticipant, ResolvedTurn, Speaker, TrustDecision

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
DEVON = {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"}
TRAVEL = {"id": "a-travel", "kind": "agent", "display_name": "Travel Agent", "handle": "travel"}
CHEF = {"id": "a-chef", "kind": "agent", "display_name": "Chef", "handle": "chef"}
ANON = {"id": "u-anon-9", "kind": "human", "anonymous": True}


def msg(
    mid: str, sender: str, content: str | None = "hello", role: str = "human", **extra: Any
) -> dict[str, Any]:
    return {"id": mid, "role": role, "sender_id": sender, "content": content, **extra}


def event(
    messages: Sequence[dict[str, Any]],
    participants: Sequence[dict[str, Any]] = (DEVON, TRAVEL),
    *,
    kind: str = "group",
    event_id: str = "e-1",
    channel: str = "ch-1",
    tenant: str = "acme",
) -> TurnEvent:
    timed = [{"created_at": T0 + timedelta(seconds=i), **m} for i, m in enumerate(messages)]
    return TurnEvent.model_validate(
        {
            "schema_version": 1,
            "event_id": event_id,
            "tenant": tenant,
            "channel": {"id": channel, "kind": kind},
            "participants": list(participants),
            "messages": timed,
        }
    )


def resolved(
    *events: TurnEvent, known: dict[str, KnownParticipant] | None = None
) -> list[ResolvedTurn]:
    return resolve_speakers(filter_turns(events), known or {})


CALL = [{"id": "c-1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]


def test_filter_keeps_meaning_and_says_why_it_dropped_the_rest() -> None:
    turn = event(
        [
            msg("m-text", "u-devon", "I prefer window seats"),
            msg("m-call", "a-travel", "", "assistant", tool_calls=CALL),
            msg("m-call-null", "a-travel", None, "ai", tool_calls=CALL),
            msg("m-tool", "a-travel", '{"flights": []}', "tool", tool_call_id="c-1"),
            msg("m-func", "a-travel", "42", "function"),
            msg("m-both", "a-travel", "Searching now.", "ai", tool_calls=CALL),
            msg("m-sys", "a-travel", "You are helpful.", "system"),
            msg("m-dev", "a-travel", "Be brief.", "developer"),
            msg("m-blank", "u-devon", " \n\t"),
            msg("m-memory", "a-travel", "Devon likes window seats", "ai", injected_context=True),
            msg("m-reply", "a-travel", "Noted.", "assistant"),
        ]
    )
    [filtered] = filter_turns([turn])
    assert filtered.event is turn
    assert [m.id for m in filtered.kept] == ["m-text", "m-both", "m-reply"]
    assert [(d.message_id, d.reason) for d in filtered.dropped] == [
        ("m-call", "tool_call_only"),
        ("m-call-null", "tool_call_only"),
        ("m-tool", "tool_message"),
        ("m-func", "tool_message"),
        ("m-sys", "system_message"),
        ("m-dev", "system_message"),
        ("m-blank", "empty_text"),
        ("m-memory", "injected_context"),
    ]
    blank = filtered.dropped[6]
    assert (blank.role, blank.sender_id) == ("human", "u-devon")


def test_calls_go_with_the_callers_next_words() -> None:
    book = [{"id": "c-2", "type": "function", "function": {"name": "book", "arguments": "{}"}}]
    turn = event(
        [
            msg("m-1", "a-travel", "Let me look.", "ai", tool_calls=CALL),
            msg("m-2", "a-travel", None, "ai", tool_calls=book),
            msg("m-3", "a-travel", "{}", "tool", tool_call_id="c-2"),
            msg("m-4", "u-devon", "Great, thanks!"),
            msg("m-5", "a-travel", None, "ai", tool_calls=CALL),
            msg("m-6", "a-travel", "Booked.", "ai"),
            msg("m-7", "a-travel", None, "ai", tool_calls=book),
        ]
    )
    [resolved_turn] = resolved(turn)
    calls = {m.id: m.calls for m in resolved_turn.messages}
    # Its own call; the human's words take none of the agent's; a call with no words after it
    # in the turn is carried by nothing.
    assert calls == {"m-1": ["search"], "m-4": [], "m-6": ["book", "search"]}
    assert [m.acted for m in resolved_turn.messages] == [True, False, False]


def test_a_call_whose_result_says_it_failed_did_nothing() -> None:
    cancel = [{"id": "c-9", "type": "function", "function": {"name": "cancel_booking"}}]
    turn = event(
        [
            msg("m-1", "a-travel", None, "ai", tool_calls=cancel),
            msg(
                "m-2",
                "a-travel",
                "Error: booking is past its cancel window",
                "tool",
                tool_call_id="c-9",
            ),
            msg("m-3", "a-travel", None, "ai", tool_calls=CALL),
            msg("m-4", "a-travel", "{}", "tool", tool_call_id="c-1"),
            msg("m-5", "a-travel", "I could not cancel it, sorry.", "ai"),
        ]
    )
    [resolved_turn] = resolved(turn)
    assert [m.calls for m in resolved_turn.messages] == [["search"]]


def test_resolve_labels_and_keys() -> None:
    [turn] = resolved(event([msg("m-1", "u-devon", "hi"), msg("m-2", "a-travel", "hello", "ai")]))
    labels = {p.id: p.label for p in turn.participants}
    assert labels == {"u-devon": "Devon (@devon)", "a-travel": "Travel Agent (@travel)"}
    assert turn.channel.key == channel_key("acme", "ch-1")
    first = turn.messages[0]
    assert first.key == episode_key("acme", "ch-1", "m-1")
    assert first.speaker_key == participant_key("acme", "u-devon")
    assert first.speaker_label == "Devon (@devon)"
    assert turn.messages[1].speaker_label == "Travel Agent (@travel)"
    assert [a.id for a in turn.agents] == ["a-travel"]
    assert turn.occurred_at == T0 + timedelta(seconds=1)


def test_participant_sent_by_id_is_named_from_known() -> None:
    kim = {"id": "u-kim", "kind": "human"}
    turn_event = event([msg("m-1", "u-kim", "hi")], [kim, TRAVEL])
    key = participant_key("acme", "u-kim")
    assert names_needed([turn_event]) == {key}
    known = {key: KnownParticipant(id="u-kim", display_name="Kim Lee", handle="kim")}
    [turn] = resolved(turn_event, known=known)
    speaker = next(p for p in turn.participants if p.id == "u-kim")
    assert (speaker.label, speaker.provisional) == ("Kim Lee (@kim)", False)
    assert turn.messages[0].speaker_label == "Kim Lee (@kim)"
    # Unknown everywhere: the id stands in, and the speaker is marked provisional.
    [unknown] = resolved(turn_event)
    speaker = next(p for p in unknown.participants if p.id == "u-kim")
    assert (speaker.label, speaker.provisional) == ("u-kim (@u-kim)", True)


def test_names_needed_skips_named_anonymous_and_named_in_batch() -> None:
    bare = {"id": "u-devon", "kind": "human"}
    half = {"id": "u-half", "kind": "human", "display_name": "Half"}
    first = event([msg("m-1", "u-devon")], [DEVON, ANON, TRAVEL], event_id="e-1")
    second = event([msg("m-2", "u-devon")], [bare, half, TRAVEL], event_id="e-2")
    assert names_needed([first, second]) == {participant_key("acme", "u-half")}
    assert names_needed([second]) == {participant_key("acme", p) for p in ("u-devon", "u-half")}
    # The name sent in the first event labels the id-only sighting in the second.
    turns = resolved(first, second)
    assert turns[1].messages[0].speaker_label == "Devon (@devon)"
    # A half-named participant keeps its own display name; the handle falls back to the id.
    half_speaker = next(p for p in turns[1].participants if p.id == "u-half")
    assert half_speaker.label == "Half (@u-half)"


@pytest.mark.parametrize("second_handle", ["sam.k", "sam"])
def test_two_people_called_sam_stay_two_speakers(second_handle: str) -> None:
    sam_a = {"id": "u-sam-a", "kind": "human", "display_name": "Sam", "handle": "sam"}
    sam_b = {"id": "u-sam-b", "kind": "human", "display_name": "Sam", "handle": second_handle}
    [turn] = resolved(
        event(
            [
                msg("m-1", "u-sam-a", "I'm vegan"),
                msg("m-2", "u-sam-b", "I eat fish"),
                msg("m-3", "u-sam-a", "no nuts"),
            ],
            [sam_a, sam_b, CHEF],
        )
    )
    sams = [p for p in turn.participants if p.display_name == "Sam"]
    assert len({p.key for p in sams}) == 2
    key_a, key_b = participant_key("acme", "u-sam-a"), participant_key("acme", "u-sam-b")
    by_speaker = {k: [m.id for m in turn.messages if m.speaker_key == k] for k in (key_a, key_b)}
    assert by_speaker == {key_a: ["m-1", "m-3"], key_b: ["m-2"]}
    # Same name and handle: the second Sam's handle is marked with its id, so labels differ too.
    mark = "~u-sam-b" if second_handle == "sam" else ""
    assert turn.messages[1].speaker_label == f"Sam (@{second_handle}{mark})"
    assert turn.messages[0].speaker_label == "Sam (@sam)"


def test_same_participant_id_in_two_tenants_is_two_keys() -> None:
    a = resolved(event([msg("m", "u-devon")], tenant="acme"))[0]
    b = resolved(event([msg("m", "u-devon")], tenant="globex"))[0]
    assert a.messages[0].speaker_key != b.messages[0].speaker_key
    assert a.messages[0].key != b.messages[0].key
    assert a.channel.key != b.channel.key


def test_anonymous_human_gets_the_anonymous_label() -> None:
    [turn] = resolved(event([msg("m-1", "u-anon-9", "psst")], [DEVON, ANON, TRAVEL]))
    anon = next(p for p in turn.participants if p.id == "u-anon-9")
    assert anon.anonymous
    assert anon.display_name == "Anonymous"
    assert turn.messages[0].speaker_label == anon.label == "Anonymous (@u-anon-9)"


def decisions(turn: TurnEvent, mode: TrustMode = "strict") -> list[tuple[str, bool, str]]:
    [trusted] = check_trust(resolved(turn), ChannelTrustPolicy(mode))
    return [(d.agent_key.split(":")[-1], d.trusted, d.reason) for d in trusted.decisions]


@pytest.mark.parametrize("mode", ["strict", "open"])
def test_trust_per_agent(mode: TrustMode) -> None:
    said = [msg("m-1", "u-devon", "hi")]
    both = [DEVON, TRAVEL, CHEF]
    assert decisions(event(said, both, kind="public"), mode) == [
        ("a-travel", False, "public_channel"),
        ("a-chef", False, "public_channel"),
    ]
    assert decisions(event(said, [*both, ANON]), mode) == [
        ("a-travel", False, "anonymous_participant"),
        ("a-chef", False, "anonymous_participant"),
    ]
    for kind in ("dm", "group"):
        assert decisions(event(said, both, kind=kind), mode) == [
            ("a-travel", True, "trusted"),
            ("a-chef", True, "trusted"),
        ]
    tool_only = [msg("m-1", "a-travel", "{}", "tool")]
    assert decisions(event(tool_only, both), mode)[0] == ("a-travel", False, "no_messages")


def test_fan_out_one_job_per_trusted_agent_even_silent_ones() -> None:
    said = [msg("m-1", "u-devon", "book me a table"), msg("m-2", "a-travel", "on it", "ai")]
    trusted = event(said, [DEVON, TRAVEL, CHEF], event_id="e-ok")
    public = event(said, [DEVON, TRAVEL, CHEF], kind="public", event_id="e-public")
    jobs = fan_out(check_trust(resolved(trusted, public), ChannelTrustPolicy()))
    assert [(j.event_id, j.agent.id) for j in jobs] == [("e-ok", "a-travel"), ("e-ok", "a-chef")]
    chef_job = jobs[1]
    assert [m.id for m in chef_job.messages] == ["m-1", "m-2"]
    assert {p.id for p in chef_job.participants} == {"u-devon", "a-travel", "a-chef"}
    assert chef_job.channel.key == channel_key("acme", "ch-1")
    assert chef_job.idempotency_key == "acme:e-ok:a-chef:sync"


class OnlyChef:
    """A policy that trusts one agent, to check fan-out follows each decision."""

    def decide(self, turn: ResolvedTurn, agent: Speaker) -> TrustDecision:
        ok = agent.id == "a-chef"
        return TrustDecision(
            agent_key=agent.key, trusted=ok, reason="trusted" if ok else "public_channel"
        )


def test_fan_out_follows_each_agents_decision() -> None:
    turns = resolved(event([msg("m-1", "u-devon")], [DEVON, TRAVEL, CHEF]))
    assert [j.agent.id for j in fan_out(check_trust(turns, OnlyChef()))] == ["a-chef"]


def test_ingest_counts() -> None:
    design = event(
        [
            msg("m-1", "u-devon", "I prefer window seats"),
            msg("m-2", "a-travel", "", "ai", tool_calls=CALL),
            msg("m-3", "a-travel", "{}", "tool"),
            msg("m-4", "a-travel", "Noted, Devon.", "ai"),
        ],
        [DEVON, ANON, TRAVEL],
        event_id="e-anon",
    )
    dm = event(
        [msg("m-1", "u-devon", "hi"), msg("m-2", "a-chef", "hey", "ai")],
        [DEVON, CHEF, TRAVEL],
        kind="dm",
    )
    outcome = ingest_turns([design, dm], {}, ChannelTrustPolicy())
    assert dict(outcome.counts()) == {
        "events": 2,
        "messages.kept": 4,
        "dropped.tool_call_only": 1,
        "dropped.tool_message": 1,
        "trust.anonymous_participant": 1,
        "trust.trusted": 2,
        "sync_jobs": 2,
    }
    assert [a.kept for a in outcome.accounts] == [2, 2]
    assert {j.agent.id for j in outcome.jobs} == {"a-chef", "a-travel"}
    # The anonymous human left Travel out of e-anon, its only agent: nobody remembers it.
    assert [t.event_id for t in outcome.unheard] == ["e-anon"]


def test_the_audience_of_an_unheard_turn_is_planned_bare() -> None:
    group = event([msg("m-1", "u-devon", "hi")], [DEVON, ANON, TRAVEL], event_id="e-group")
    lobby = event([msg("m-1", "u-devon", "hi")], [DEVON, TRAVEL], kind="public", channel="ch-2")
    # Neither is remembered; a public channel's audience is not recorded (it admits nothing).
    (turn,) = ingest_turns([group, lobby], {}, ChannelTrustPolicy()).unheard
    batch = plan_audience([turn, turn])
    keys = sorted(participant_key("acme", who) for who in ("u-devon", "u-anon-9", "a-travel"))
    # Keys, tenant, id and kind only: a turn nobody remembers renames nobody.
    assert batch.participants == [
        {"key": k, "tenant": "acme", "id": k.split(":")[1], "kind": kind}
        for k, kind in zip(keys, ("agent", "human", "human"), strict=True)
    ]
    assert batch.agents == [participant_key("acme", "a-travel")]
    assert [row["kind"] for row in batch.channels] == ["group"]
    assert batch.members == [
        {"participant_key": k, "channel_key": channel_key("acme", "ch-1")} for k in keys
    ]
    assert batch.episodes == batch.observed == []


def test_plan_batch_dedupes_and_sorts_overlapping_events() -> None:
    people = [DEVON, TRAVEL, CHEF]
    # The platform resends m-10 unchanged (same time) at the start of the next turn.
    m2, m10 = msg("m-2", "u-devon", created_at=T0), msg("m-10", "u-devon", created_at=T0)
    m3 = msg("m-3", "a-travel", "ok", "ai", created_at=T0)
    first, resent = (
        event([m2, m10], people, event_id="e-1"),
        event([m10, m3], people, event_id="e-2"),
    )
    turns = resolved(first, resent)
    jobs = fan_out(check_trust(turns, ChannelTrustPolicy()))
    assert len(jobs) == 4
    assert (
        turns[0].messages[1].key == turns[1].messages[0].key == episode_key("acme", "ch-1", "m-10")
    )
    when = datetime(2027, 1, 1, tzinfo=UTC)
    batch = plan_batch(jobs, synced_at=when)
    episode_keys = [row["key"] for row in batch.episodes]
    assert episode_keys == sorted({episode_key("acme", "ch-1", m) for m in ("m-2", "m-10", "m-3")})
    assert [row["key"] for row in batch.participants] == sorted(
        participant_key("acme", p["id"]) for p in people
    )
    assert batch.agents == sorted(participant_key("acme", a) for a in ("a-travel", "a-chef"))
    assert [row["key"] for row in batch.channels] == [channel_key("acme", "ch-1")]
    # Everyone listed is a member, once, whether they spoke (Devon, Travel) or not (Chef).
    assert batch.members == [
        {"participant_key": key, "channel_key": channel_key("acme", "ch-1")}
        for key in sorted(participant_key("acme", p["id"]) for p in people)
    ]
    pairs = [(row["agent_key"], row["episode_key"]) for row in batch.observed]
    assert pairs == sorted({(a, e) for a in batch.agents for e in episode_keys})
    assert batch.synced_at == when
    assert (
        plan_batch(list(reversed(jobs)), synced_at=when).episodes
        == plan_batch(jobs, synced_at=when).episodes
    )
    assert plan_batch([]).participants == []


@pytest.mark.parametrize("named_first", [True, False])
def test_plan_batch_prefers_a_named_sighting(named_first: bool) -> None:
    bare = {"id": "u-devon", "kind": "human"}
    named = event([msg("m-1", "u-devon")], [DEVON, TRAVEL], event_id="e-named", channel="a")
    anonymous_name = event([msg("m-2", "u-devon")], [bare, TRAVEL], event_id="e-bare", channel="b")
    jobs = [
        fan_out(check_trust(resolved(e), ChannelTrustPolicy()))[0] for e in (named, anonymous_name)
    ]
    batch = plan_batch(jobs if named_first else jobs[::-1])
    devon = next(row for row in batch.participants if row["id"] == "u-devon")
    assert (devon["label"], devon["provisional"]) == ("Devon (@devon)", False)
