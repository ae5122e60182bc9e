"""A whole-memory recall through Neo4j leads with the window its conversation's own search
chooses: the first item is the first item of the same question held to that channel, with the
answer other channels crowd out of the whole-memory candidates, and the rest of the
whole-memory answer follows without showing a message twice."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore
from schemas.event import TurnEvent
from schemas.recall import RecallItem, RecallQuery
from tests.integration.test_spine import PRIYA, TRAVEL, event, msg
from tests.integration.writing import searchable, write_open

pytestmark = pytest.mark.integration

OLGA = {"id": "u-olga", "kind": "human", "display_name": "Olga Berg", "handle": "olga"}
QUESTION = "Which card did the Lisbon refund go to?"
ANSWER = "o4"
# Olga's conversation: "Lisbon" is said only here, so the whole-memory search finds it; the
# agent's answer comes two messages after her matching line and shares only common words
# ("card", "refund") with the question.
OLGA_LINES = [
    ("u-olga", "Hi, it's Olga"),
    ("a-travel", "Hello Olga, how can I help?"),
    ("u-olga", "The Lisbon hotel closed, so I asked for a refund of my Lisbon booking"),
    ("a-travel", "Sorry to hear that, let me look"),
    ("a-travel", "It went to your Visa card ending 4417, the refund takes five days"),
    ("u-olga", "Great"),
    ("a-travel", "Anything else?"),
    ("u-olga", "No, that is all. Thank you!"),
]
# Other customers' one-line chats: across the whole memory they match "card" and "refund"
# better than the agent's longer answer does, so that answer is among no retriever's
# candidates there, while held to Olga's channel it is.
OTHERS = 150


@pytest.fixture(scope="module")
def olga_tenant(graph: GraphStore) -> str:
    tenant = f"r{uuid.uuid4().hex[:12]}"
    raw: list[Any] = [
        event(
            tenant,
            "ev-olga",
            {"id": "ch-olga", "kind": "group", "title": "Olga"},
            [OLGA, TRAVEL],
            [
                msg(f"o{i}", "assistant" if who == "a-travel" else "user", who, text, i)
                for i, (who, text) in enumerate(OLGA_LINES)
            ],
        )
    ]
    raw += [
        event(
            tenant,
            f"ev-other-{n}",
            {"id": f"ch-other-{n}", "kind": "group", "title": "Cards"},
            [PRIYA, TRAVEL],
            [msg(f"x{n}", "user", "u-priya", "refund to my card", 1)],
        )
        for n in range(OTHERS)
    ]
    write_open(graph, [TurnEvent.model_validate(r) for r in raw])
    searchable(graph)
    return tenant


def ask(graph: GraphStore, tenant: str, channel: str | None) -> list[RecallItem]:
    query = RecallQuery(
        tenant=tenant, agent_id="a-travel", query=QUESTION, mode="keyword", channel_id=channel
    )
    return recall(graph, query, embedder=None, dm_policy="never")


def test_the_first_item_is_the_conversations_own_first_window(
    graph: GraphStore, olga_tenant: str
) -> None:
    whole = ask(graph, olga_tenant, None)
    assert whole and whole[0].channel_id == "ch-olga", whole
    held = ask(graph, olga_tenant, "ch-olga")
    assert whole[0] == held[0]
    assert ANSWER in whole[0].evidence, whole[0]


def test_no_message_is_shown_twice_and_the_budget_holds(
    graph: GraphStore, olga_tenant: str
) -> None:
    whole = ask(graph, olga_tenant, None)
    shown = [m for item in whole if item.kind == "episode" for m in item.evidence]
    assert len(shown) == len(set(shown))
    assert len(shown) <= 10
