"""Lenses and the writer's memory rows: pure, no services."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.errors import ConfigurationError
from pipeline.graph.memoryrows import closure_key, fact_key, plan_memory, slot_of, tenant_of
from pipeline.lens import BUILTIN_LENSES, apply_lens, parse_lenses
from schemas.memory import MemoryItem

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)


def item(kind: str = "preference", **over: object) -> MemoryItem:
    fields: dict[str, object] = {
        "kind": kind,
        "subject_key": "acme:u-devon",
        "speaker_key": "acme:u-devon",
        "evidence_key": "acme:episode:ch:m1",
        "source": "self_stated",
        "predicate": "prefers",
        "value": "window seats",
        "text": "Devon (@devon) prefers window seats",
        "topic": "seat",
        "confidence": 0.8,
        "stated_at": T0,
    }
    fields.update(over)
    return MemoryItem.model_validate(fields)


def test_slots_separate_topics_so_a_meal_never_replaces_a_seat() -> None:
    assert slot_of(item()) == "prefers:seat"
    assert slot_of(item(topic="food", value="vegetarian meals")) == "prefers:food"
    assert slot_of(item(topic=None)) == "prefers"


def test_restatements_collapse_and_keep_the_first_time() -> None:
    later = item(stated_at=T0 + timedelta(hours=1), evidence_key="acme:episode:ch:m2")
    rows = plan_memory([("acme:a-t", later), ("acme:a-t", item()), ("acme:a-t", item())])
    assert len(rows.facts) == 1 and rows.facts[0]["props"]["stated_at"] == T0
    assert rows.facts[0]["key"] == fact_key("acme:a-t", item())
    assert rows.slots == [
        {"agent_key": "acme:a-t", "subject_key": "acme:u-devon", "slot": "prefers:seat"}
    ]
    assert rows.facts[0]["props"]["expires_at"] == T0 + timedelta(days=365)


def test_each_agent_keeps_its_own_copy_and_values_differ_by_key() -> None:
    rows = plan_memory(
        [("acme:a-1", item()), ("acme:a-2", item()), ("acme:a-1", item(value="Aisle SEATS"))]
    )
    assert len(rows.facts) == 3
    assert len({r["key"] for r in rows.facts}) == 3


def test_commitments_and_closures_rows() -> None:
    promise = item(
        "commitment",
        predicate="commitment",
        value="send the Q3 forecast",
        topic="work",
        owed_by_key="acme:u-priya",
        owed_to_key="acme:u-devon",
        due=T0 + timedelta(days=1),
    )
    closure = item(
        "closure",
        predicate="closes",
        value="Q3 forecast",
        owed_by_key="acme:u-priya",
        stated_at=T0 + timedelta(hours=2),
    )
    cancel = item("closure", predicate="cancels", value="", evidence_key="acme:episode:ch:m9")
    replay = [("acme:a", promise), ("acme:a", closure), ("acme:a", cancel), ("acme:a", closure)]
    rows = plan_memory(replay)
    assert rows.commitments[0]["props"]["owed_to_key"] == "acme:u-devon"
    assert {c["props"]["status"] for c in rows.closures} == {"closed", "cancelled"}
    assert {c["props"]["value"] for c in rows.closures} == {"q3 forecast", ""}
    assert {c["key"] for c in rows.closures} == {
        closure_key("acme:a", closure),
        closure_key("acme:a", cancel),
    }
    # A bare "never mind" is owed by its speaker; both pairs are resolved again from the
    # earliest commitment or closure the batch adds to them.
    assert rows.obligations == [
        {"agent_key": "acme:a", "owed_by_key": "acme:u-devon", "since": T0},
        {"agent_key": "acme:a", "owed_by_key": "acme:u-priya", "since": T0},
    ]
    assert rows.facts == []


def test_facts_commitments_and_closures_carry_the_agents_tenant() -> None:
    # Ids may hold ':' (escaped in keys); the tenant is still the key's first part.
    agent = "acme-eu:slack%3AB42"
    assert tenant_of(agent) == "acme-eu"
    promise = item("commitment", predicate="commitment", value="x", owed_by_key="acme-eu:u")
    closure = item("closure", predicate="closes", value="x", owed_by_key="acme-eu:u")
    rows = plan_memory([(agent, item()), (agent, promise), (agent, closure)])
    for row in (*rows.facts, *rows.commitments, *rows.closures):
        assert row["props"]["tenant"] == "acme-eu"


def test_lenses_keep_what_the_role_needs() -> None:
    seat, price = item(), item("fact", predicate="price", value="10", topic="price")
    untopical = item("fact", predicate="lives_in", value="Lisbon", topic=None)
    closure = item("closure", predicate="closes", value="x", topic=None)
    everything = [seat, price, untopical, closure]
    assert apply_lens(everything, "travel", BUILTIN_LENSES) == [seat, untopical, closure]
    assert apply_lens(everything, "finance", BUILTIN_LENSES) == [price, closure]
    assert apply_lens(everything, None, BUILTIN_LENSES) == everything
    assert apply_lens(everything, "no-such-lens", BUILTIN_LENSES) == everything


def test_lens_file_overrides_and_reports_bad_fields() -> None:
    lenses = parse_lenses('{"travel": {"kinds": ["commitment"]}, "ops": {"topics": ["work"]}}')
    assert lenses["travel"].kinds == frozenset({"commitment"})
    assert lenses["ops"].topics == frozenset({"work"}) and "finance" in lenses
    with pytest.raises(ConfigurationError, match="lens 'x': kinds"):
        parse_lenses('{"x": {"kinds": ["gossip"]}}')
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        parse_lenses("{nope")
