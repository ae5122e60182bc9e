"""Rows for the memory statements: facts (with their supersession slots) and commitments."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.memorize import AgentMemory
from schemas.keys import compose_key
from schemas.memory import MemoryItem

Rows = list[dict[str, Any]]

# How long a kind of memory stays fresh unless restated (sets `expires_at`).
TTL: dict[str, timedelta] = {
    "preference": timedelta(days=365),
    "fact": timedelta(days=730),
    "agreement": timedelta(days=365),
}
FACT_KINDS = frozenset(TTL)


class MemoryRows(BaseModel):
    """Parameter rows for the memory part of one sync transaction, sorted by key."""

    model_config = ConfigDict(frozen=True)

    facts: Rows
    slots: Rows
    commitments: Rows
    closures: Rows


def slot_of(item: MemoryItem) -> str:
    """The supersession slot: predicate plus topic, so a seat preference never replaces a meal."""
    return f"{item.predicate}:{item.topic}" if item.topic else item.predicate


def _norm(value: str) -> str:
    return " ".join(value.lower().split())


def fact_key(agent_key: str, item: MemoryItem) -> str:
    return compose_key(agent_key, "fact", item.subject_key, slot_of(item), _norm(item.value))


def commitment_key(agent_key: str, item: MemoryItem) -> str:
    return compose_key(agent_key, "commitment", item.owed_by_key or "", _norm(item.value))


def plan_memory(memories: Sequence[AgentMemory]) -> MemoryRows:
    """Turn (agent, item) pairs into rows; restatements in one batch collapse to one row."""
    facts: dict[str, dict[str, Any]] = {}
    slots: dict[tuple[str, str, str], dict[str, Any]] = {}
    commitments: dict[str, dict[str, Any]] = {}
    closures: dict[tuple[str, str], dict[str, Any]] = {}
    for agent_key, item in memories:
        if item.kind in FACT_KINDS:
            key = fact_key(agent_key, item)
            earlier = facts.get(key)
            if earlier is None or item.stated_at < earlier["props"]["stated_at"]:
                facts[key] = _fact_row(key, agent_key, item)
            slot = (agent_key, item.subject_key, slot_of(item))
            slots[slot] = {"agent_key": slot[0], "subject_key": slot[1], "slot": slot[2]}
        elif item.kind == "commitment" and item.owed_by_key:
            key = commitment_key(agent_key, item)
            commitments.setdefault(key, _commitment_row(key, agent_key, item))
        elif item.kind == "closure":
            closures[(agent_key, item.evidence_key)] = {
                "agent_key": agent_key,
                "owed_by_key": item.owed_by_key or item.speaker_key,
                "value": _norm(item.value),
                "status": "cancelled" if item.predicate == "cancels" else "closed",
                "closed_at": item.stated_at,
                "evidence_key": item.evidence_key,
            }
    return MemoryRows(
        facts=[facts[k] for k in sorted(facts)],
        slots=[slots[k] for k in sorted(slots)],
        commitments=[commitments[k] for k in sorted(commitments)],
        closures=[closures[k] for k in sorted(closures, key=lambda k: (k[0], k[1]))],
    )


def _fact_row(key: str, agent_key: str, item: MemoryItem) -> dict[str, Any]:
    return {
        "key": key,
        "evidence_key": item.evidence_key,
        "props": {
            "agent_key": agent_key,
            "subject_key": item.subject_key,
            "kind": item.kind,
            "predicate": item.predicate,
            "slot": slot_of(item),
            "value": item.value,
            "text": item.text,
            "topic": item.topic,
            "negated": item.negated,
            "hedged": item.hedged,
            "source": item.source,
            "stated_by": item.speaker_key,
            "stated_at": item.stated_at,
            "confidence": item.confidence,
            "expires_at": item.stated_at + TTL[item.kind],
        },
    }


def _commitment_row(key: str, agent_key: str, item: MemoryItem) -> dict[str, Any]:
    return {
        "key": key,
        "evidence_key": item.evidence_key,
        "props": {
            "agent_key": agent_key,
            "owed_by_key": item.owed_by_key,
            "owed_to_key": item.owed_to_key,
            "text": item.text,
            "value": item.value,
            "due": item.due,
            "opened_at": item.stated_at,
            "source": item.source,
        },
    }
