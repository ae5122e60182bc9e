"""The sync writer's tombstone filter (pipeline/graph/erasure.py), without services: nothing of
an erased participant survives planning, and everything of the others does."""

from __future__ import annotations

from pipeline.extract import RulesExtractor
from pipeline.graph.erasure import subject_hash, without_erased
from pipeline.graph.memoryrows import MemoryRows, plan_memory
from pipeline.graph.writer import SyncBatch, plan_batch
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.keys import participant_key

PEOPLE = [
    {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"},
    {"id": "u-sarah", "kind": "human", "display_name": "Sarah", "handle": "sarah"},
    {"id": "a-travel", "kind": "agent", "owner_id": "u-sarah"},
]
LINES = [
    ("m1", "u-sarah", "I prefer aisle seats"),
    ("m2", "u-devon", "I prefer window seats"),
    ("m3", "u-devon", "Sarah prefers vegetarian meals"),
    ("m4", "u-devon", "I'll send Sarah the itinerary by Monday"),
    ("m5", "u-devon", "I'll send the report by Friday"),
    ("m6", "u-sarah", "Sent the budget report"),
]


def planned() -> tuple[SyncBatch, MemoryRows]:
    event = {
        "schema_version": 1,
        "event_id": "ev-1",
        "tenant": "t",
        "channel": {"id": "ch", "kind": "group"},
        "participants": PEOPLE,
        "messages": [
            {
                "id": mid,
                "role": "user",
                "sender_id": who,
                "content": text,
                "created_at": f"2026-11-29T10:0{i}:00Z",
            }
            for i, (mid, who, text) in enumerate(LINES)
        ],
    }
    jobs = ingest_turns([validate_event(event)], {}, DirectoryTrustPolicy("open", {})).jobs
    return plan_batch(jobs), plan_memory(memorize(jobs, RulesExtractor(), BUILTIN_LENSES))


def test_nothing_of_an_erased_participant_is_planned() -> None:
    batch, memory = planned()
    sarah = participant_key("t", "u-sarah")
    kept_batch, kept_memory = without_erased(batch, memory, {sarah})
    assert sarah not in {r["key"] for r in kept_batch.participants}
    assert sarah in {r["participant_key"] for r in batch.members}
    assert sarah not in {r["participant_key"] for r in kept_batch.members}
    assert kept_batch.owners == []  # the agent's claimed owner is the erased one
    assert {r["id"] for r in kept_batch.episodes} == {"m2", "m3", "m4", "m5"}
    assert {r["episode_key"].rsplit(":", 1)[-1] for r in kept_batch.observed} == {
        "m2",
        "m3",
        "m4",
        "m5",
    }
    assert all(e.endswith(("m2", "m3", "m4", "m5")) for j in kept_batch.jobs for e in j["episodes"])
    facts = {(r["props"]["subject_key"], r["props"]["value"]) for r in kept_memory.facts}
    assert facts == {(participant_key("t", "u-devon"), "window seats")}
    assert [r["props"]["value"] for r in kept_memory.commitments] == ["send the report"]
    assert kept_memory.closures == []
    assert all(r["owed_by_key"] != sarah for r in kept_memory.obligations)


def test_no_tombstone_changes_nothing() -> None:
    batch, memory = planned()
    assert without_erased(batch, memory, set()) == (batch, memory)


def test_the_hash_names_scope_and_key() -> None:
    assert subject_hash("participant", "t:u") != subject_hash("agent", "t:u")
    assert len(subject_hash("channel", "t:channel:c")) == 64
