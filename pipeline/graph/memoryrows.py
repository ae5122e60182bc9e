"""Rows for the memory statements: facts (with their supersession slots), commitments and the
closures that close them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict

from pipeline.memorize import AgentMemory
from schemas.keys import compose_key, scope_token
from schemas.memory import CALLED, MemoryItem

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
    # (agent, owed_by) pairs whose closures from `since` on are resolved again (RESOLVE_CLOSURES).
    obligations: Rows


def slot_of(item: MemoryItem) -> str:
    """The supersession slot: predicate plus topic, so a seat preference never replaces a meal."""
    return f"{item.predicate}:{item.topic}" if item.topic else item.predicate


def _norm(value: str) -> str:
    return " ".join(value.lower().split())


def fact_key(agent_key: str, item: MemoryItem) -> str:
    return compose_key(agent_key, "fact", item.subject_key, slot_of(item), _norm(item.value))


def commitment_key(agent_key: str, item: MemoryItem) -> str:
    return compose_key(agent_key, "commitment", item.owed_by_key or "", _norm(item.value))


def closure_key(agent_key: str, item: MemoryItem) -> str:
    return compose_key(agent_key, "closure", item.evidence_key, _norm(item.value))


def tenant_of(agent_key: str) -> str:
    """The tenant of a participant key: its first part, as `participant_key` composed it."""
    return unquote(agent_key.split(":", 1)[0])


def plan_memory(memories: Sequence[AgentMemory]) -> MemoryRows:
    """Turn (agent, item) pairs into rows; restatements in one batch collapse to one row."""
    facts: dict[str, dict[str, Any]] = {}
    slots: dict[tuple[str, str, str], dict[str, Any]] = {}
    commitments: dict[str, dict[str, Any]] = {}
    closures: dict[str, dict[str, Any]] = {}
    obligations: dict[tuple[str, str], dict[str, Any]] = {}
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
            _oblige(obligations, agent_key, item.owed_by_key, item.stated_at)
        elif item.kind == "closure":
            key = closure_key(agent_key, item)
            row = closures.setdefault(key, _closure_row(key, agent_key, item))
            _oblige(obligations, agent_key, row["props"]["owed_by_key"], item.stated_at)
    return MemoryRows(
        facts=[facts[k] for k in sorted(facts)],
        slots=[slots[k] for k in sorted(slots)],
        commitments=[commitments[k] for k in sorted(commitments)],
        closures=[closures[k] for k in sorted(closures)],
        obligations=[obligations[k] for k in sorted(obligations)],
    )


def _oblige(
    obligations: dict[tuple[str, str], dict[str, Any]], agent_key: str, owed_by: str, at: datetime
) -> None:
    """Note an (agent, owed_by) pair to resolve, and the earliest time this batch touches in it:
    only closures from then on can change which commitment they close."""
    row = obligations.setdefault(
        (agent_key, owed_by), {"agent_key": agent_key, "owed_by_key": owed_by, "since": at}
    )
    row["since"] = min(row["since"], at)


def _fact_row(key: str, agent_key: str, item: MemoryItem) -> dict[str, Any]:
    return {
        "key": key,
        "evidence_key": item.evidence_key,
        "props": {
            "tenant": tenant_of(agent_key),
            "agent_key": agent_key,
            "scope": scope_token("agent", agent_key),
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
            # Clamped at the calendar's end: no stated time may overflow the TTL arithmetic.
            "expires_at": item.stated_at
            + min(
                TTL[item.kind], datetime.max.replace(tzinfo=item.stated_at.tzinfo) - item.stated_at
            ),
        },
    }


def _commitment_row(key: str, agent_key: str, item: MemoryItem) -> dict[str, Any]:
    return {
        "key": key,
        "evidence_key": item.evidence_key,
        "props": {
            "tenant": tenant_of(agent_key),
            "agent_key": agent_key,
            "scope": scope_token("agent", agent_key),
            "owed_by_key": item.owed_by_key,
            "owed_to_key": item.owed_to_key,
            "text": item.text,
            "value": item.value,
            "due": item.due,
            "opened_at": item.stated_at,
            "source": item.source,
        },
    }


def _closure_row(key: str, agent_key: str, item: MemoryItem) -> dict[str, Any]:
    return {
        "key": key,
        "props": {
            "tenant": tenant_of(agent_key),
            "agent_key": agent_key,
            "owed_by_key": item.owed_by_key or item.speaker_key,
            "owed_to_key": item.owed_to_key,
            # Lower-cased and single-spaced: the wording a commitment's value is matched against.
            "value": _norm(item.value),
            "status": "cancelled" if item.predicate == "cancels" else "closed",
            # A tool call's act, matched by word stems (`CALLED`).
            "by_call": item.predicate == CALLED,
            "closed_at": item.stated_at,
            "evidence_key": item.evidence_key,
        },
    }
