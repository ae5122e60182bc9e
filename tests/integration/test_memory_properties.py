"""Property tests on the real writer and a real Neo4j: order, repetition and trust.

Each example runs the pure stages and the graph writer directly (no broker), in a fresh tenant:
the same turns in any order, some of them twice, give the same current facts and the same
commitment statuses, and turns from an untrusted conversation add nothing long-term.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.extract import RulesExtractor
from pipeline.graph.reader import agent_commitments, agent_facts
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event

pytestmark = pytest.mark.integration

PEOPLE = [
    {"id": "u-priya", "kind": "human", "display_name": "Priya", "handle": "priya"},
    {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"},
    {"id": "a-keeper", "kind": "agent", "display_name": "Keeper", "handle": "keeper"},
]
ANON = {"id": "u-anon", "kind": "human", "anonymous": True}

# (event id, speaker, text, minute, channel kind)
STATEMENTS = [
    ("t1", "u-priya", "My price is 10", 1, "group"),
    ("t2", "u-devon", "I prefer window seats", 2, "group"),
    ("t3", "u-priya", "My price is 11", 3, "group"),
    ("t4", "u-priya", "I'll send the Q3 forecast by Friday", 4, "group"),
    ("t5", "u-priya", "My price is 12", 5, "group"),
    ("t6", "u-devon", "I prefer aisle seats", 6, "group"),
    ("t7", "u-priya", "Sent the Q3 forecast", 7, "group"),
    # Untrusted (public, anonymous present): the latest price of all, which must never count.
    ("t8", "u-priya", "My price is 99", 9, "public"),
    ("t9", "u-priya", "I'll book the hotel by Monday", 10, "group"),
    # A bare cancel: Priya's most recent commitment before it (the hotel), never the forecast.
    ("t10", "u-priya", "Never mind, cancel that", 11, "group"),
    # A bare "done" before Devon promised anything closes nothing, whenever it arrives.
    ("t11", "u-devon", "Done.", 8, "group"),
    ("t12", "u-devon", "I'll send the deck", 12, "group"),
    # The agent's promise, kept by the tool it calls once told to go ahead.
    ("t13", "a-keeper", "Once you confirm, I'll update the roadmap", 13, "group"),
    ("t14", "a-keeper", "The roadmap now shows the Q4 launch.", 14, "group"),
]
CALLS = {"t14": [{"id": "c-1", "type": "function", "function": {"name": "update_roadmap"}}]}


def turn(tenant: str, statement: tuple[str, str, str, int, str]) -> dict[str, Any]:
    eid, speaker, text, minute, kind = statement
    people = [*PEOPLE, ANON] if kind == "public" else PEOPLE
    return {
        "schema_version": 1,
        "event_id": eid,
        "tenant": tenant,
        "channel": {"id": f"ch-{kind}", "kind": kind},
        "participants": people,
        "messages": [
            {
                "id": f"m-{eid}",
                "role": "assistant" if speaker.startswith("a-") else "user",
                "sender_id": speaker,
                "content": text,
                **({"tool_calls": CALLS[eid]} if eid in CALLS else {}),
                "created_at": f"2026-11-26T10:{minute:02d}:00Z",
            }
        ],
    }


def play(graph: GraphStore, tenant: str, order: list[int]) -> tuple[set[Any], set[Any], set[Any]]:
    policy = DirectoryTrustPolicy("open", {})
    for index in order:
        event = validate_event(turn(tenant, STATEMENTS[index]))
        jobs = ingest_turns([event], {}, policy).jobs
        write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))
    facts = agent_facts(graph, tenant, "a-keeper", include_superseded=True)
    current = {
        (f.subject_key.split(":")[1], f.predicate, f.value) for f in facts if not f.superseded_at
    }
    old = {(f.subject_key.split(":")[1], f.predicate, f.value) for f in facts if f.superseded_at}
    commitments = {(c.value, c.status) for c in agent_commitments(graph, tenant, "a-keeper")}
    return current, old, commitments


@pytest.fixture(scope="module")
def canonical(graph: GraphStore) -> tuple[set[Any], set[Any], set[Any]]:
    """Every statement once, in the order it was made."""
    return play(graph, f"p{uuid.uuid4().hex[:10]}", list(range(len(STATEMENTS))))


def test_canonical_outcome(canonical: tuple[set[Any], set[Any], set[Any]]) -> None:
    current, old, commitments = canonical
    assert current == {("u-priya", "price", "12"), ("u-devon", "prefers", "aisle seats")}
    assert old == {
        ("u-priya", "price", "10"),
        ("u-priya", "price", "11"),
        ("u-devon", "prefers", "window seats"),
    }
    assert commitments == {
        ("send the Q3 forecast", "closed"),
        ("book the hotel", "cancelled"),
        ("send the deck", "open"),
        ("update the roadmap", "closed"),
    }


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    order=st.permutations(list(range(len(STATEMENTS)))),
    repeats=st.lists(st.integers(0, len(STATEMENTS) - 1), max_size=4),
)
def test_any_order_any_repeats_same_memory(
    graph: GraphStore,
    canonical: tuple[set[Any], set[Any], set[Any]],
    order: list[int],
    repeats: list[int],
) -> None:
    # Every order counts, a closure before its commitment included.
    assert play(graph, f"p{uuid.uuid4().hex[:10]}", [*order, *repeats]) == canonical
