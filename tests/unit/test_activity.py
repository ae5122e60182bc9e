"""The idle window: agents that have not spoken in a channel lately are left out of fan-out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline.activity import Activity, activity_pairs
from pipeline.ingest import ingest_turns
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from schemas.keys import channel_key, participant_key

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
PEOPLE = [
    {"id": "u-ana", "kind": "human", "display_name": "Ana", "handle": "ana"},
    {"id": "a-talk", "kind": "agent", "display_name": "Talk", "handle": "talk"},
    {"id": "a-quiet", "kind": "agent", "display_name": "Quiet", "handle": "quiet"},
]
CHANNEL = channel_key("acme", "ch-1")
TALK, QUIET = participant_key("acme", "a-talk"), participant_key("acme", "a-quiet")
OPEN = DirectoryTrustPolicy("open", {})


def event(n: int, at: datetime, *, agent_replies: bool) -> TurnEvent:
    messages: list[dict[str, Any]] = [
        {"id": f"m-{n}", "role": "user", "sender_id": "u-ana", "content": f"hello {n}",
         "created_at": at.isoformat()},
    ]  # fmt: skip
    if agent_replies:
        messages.append(
            {"id": f"r-{n}", "role": "assistant", "sender_id": "a-talk", "content": f"hi {n}",
             "created_at": (at + timedelta(seconds=1)).isoformat()}
        )  # fmt: skip
    return validate_event(
        {
            "schema_version": 1,
            "event_id": f"e-{n}",
            "tenant": "acme",
            "channel": {"id": "ch-1", "kind": "group"},
            "participants": PEOPLE,
            "messages": messages,
            "created_at": at.isoformat(),
        }
    )


def test_without_activity_every_trusted_agent_gets_a_job() -> None:
    outcome = ingest_turns([event(1, T0, agent_replies=False)], {}, OPEN)
    assert {j.agent.key for j in outcome.jobs} == {TALK, QUIET}
    assert outcome.accounts[0].idle == [] and outcome.spoke == {}


def test_an_agent_silent_past_the_window_is_left_out_and_counted() -> None:
    activity = Activity(window_seconds=600, last_spoke={(CHANNEL, TALK): T0.timestamp()})
    outcome = ingest_turns([event(1, T0 + timedelta(seconds=300), agent_replies=False)], {}, OPEN,
                           activity=activity)  # fmt: skip
    assert [j.agent.key for j in outcome.jobs] == [TALK]
    account = outcome.accounts[0]
    assert account.idle == [QUIET] and account.expected == 1
    assert outcome.counts()["fanout.idle"] == 1

    later = ingest_turns([event(2, T0 + timedelta(seconds=601), agent_replies=False)], {}, OPEN,
                         activity=activity)  # fmt: skip
    assert later.jobs == [] and later.accounts[0].idle == [QUIET, TALK]
    assert later.accounts[0].expected == 0


def test_speaking_makes_an_agent_active_for_that_turn_and_later_ones_in_time_order() -> None:
    activity = Activity(window_seconds=60, last_spoke={})
    # Given out of order: the reply at T0 keeps the agent active for the turn at T0 + 30 s.
    late = event(2, T0 + timedelta(seconds=30), agent_replies=False)
    early = event(1, T0, agent_replies=True)
    outcome = ingest_turns([late, early], {}, OPEN, activity=activity)
    jobs = {(j.event_id, j.agent.key) for j in outcome.jobs}
    assert jobs == {("e-1", TALK), ("e-2", TALK)}
    assert outcome.spoke == {(CHANNEL, TALK): (T0 + timedelta(seconds=1)).timestamp()}


def test_activity_pairs_name_every_agent_of_every_channel() -> None:
    assert activity_pairs([event(1, T0, agent_replies=False)]) == {
        (CHANNEL, TALK),
        (CHANNEL, QUIET),
    }
