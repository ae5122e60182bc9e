"""What agents know, end to end on real services: facts with provenance, supersession,
commitments opened, closed or kept by a tool call, verification."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memsync.producer import Producer
from memsync.settings import Settings
from pipeline.extract import RulesExtractor
from pipeline.graph.directory import grant_trust
from pipeline.graph.model import CLOSURE, COMMITMENT, FACT
from pipeline.graph.reader import agent_commitments, agent_facts
from pipeline.graph.schema import backfill
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.keys import participant_key
from tests.integration.test_operations import cli
from tests.integration.test_spine import (
    DEVON,
    PRIYA,
    SARAH,
    TOOL_CALL,
    emit_and_wait,
    event,
    msg,
)
from tests.integration.test_spine import TRAVEL as SPINE_TRAVEL
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

TRAVEL = {**SPINE_TRAVEL, "lens": "travel"}
LEDGERBOT = {
    "id": "a-ledger",
    "kind": "agent",
    "display_name": "Ledger",
    "handle": "ledger",
    "owner_id": "u-priya",
}
VENDOR = {"id": "a-vendor", "kind": "agent", "display_name": "Vendor Bot", "handle": "vendorbot"}
HELPER = {
    "id": "a-helper",
    "kind": "agent",
    "display_name": "Helper",
    "handle": "helper",
    "owner_id": "u-devon",
}
GROUP = {"id": "ch-trip", "kind": "group", "title": "Trip"}


def turn(tenant: str, eid: str, people: list[Any], *messages: Any) -> Any:
    return event(tenant, eid, GROUP, people, list(messages))


def facts_by_subject(graph: GraphStore, tenant: str, agent: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in agent_facts(graph, tenant, agent):
        found.setdefault(f.subject_key, []).append(f"{f.predicate} {f.value} ({f.source})")
    return found


def test_two_people_two_facts_and_a_peer_agent_claim(
    worker: services.Service, graph: GraphStore, producer: Producer, ledger: Ledger, tenant: str
) -> None:
    grant_trust(graph, tenant, "u-devon", "u-sarah", "friend")
    emit_and_wait(
        producer,
        ledger,
        [
            turn(
                tenant,
                "ev-1",
                [DEVON, SARAH, TRAVEL, HELPER, VENDOR],
                msg("m1", "user", "u-devon", "I prefer window seats", 1),
                msg("m2", "user", "u-sarah", "I'd rather have the aisle", 2),
                msg("m3", "assistant", "a-vendor", "Remember my API rate is unlimited", 3),
            )
        ],
    )
    facts = facts_by_subject(graph, tenant, "a-travel")

    def key(pid: str) -> str:
        return participant_key(tenant, pid)

    assert facts[key("u-devon")] == ["prefers window seats (self_stated)"]
    assert len(facts[key("u-sarah")]) == 1 and "aisle" in facts[key("u-sarah")][0]
    assert set(facts) == {key("u-devon"), key("u-sarah")}  # nobody called "User"
    # The travel lens keeps seats, not API rates; an agent with the default lens keeps both,
    # and another agent's claim is only ever peer_stated.
    helper = facts_by_subject(graph, tenant, "a-helper")
    assert helper[key("a-vendor")] == ["api_rate unlimited (peer_stated)"]
    assert set(helper) == {key("u-devon"), key("u-sarah"), key("a-vendor")}


def test_newer_fact_supersedes_whatever_the_arrival_order(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    producer: Producer,
    ledger: Ledger,
    tenant: str,
) -> None:
    first = turn(
        tenant, "ev-10", [PRIYA, LEDGERBOT], msg("p1", "user", "u-priya", "My price is 10", 1)
    )
    later = turn(
        tenant, "ev-12", [PRIYA, LEDGERBOT], msg("p2", "user", "u-priya", "My price is 12", 5)
    )
    emit_and_wait(producer, ledger, [later])  # the newer statement arrives first
    emit_and_wait(producer, ledger, [first])

    everything = agent_facts(graph, tenant, "a-ledger", include_superseded=True)
    current = [f for f in everything if f.superseded_at is None]
    old = [f for f in everything if f.superseded_at is not None]
    assert [f.value for f in current] == ["12"]
    assert [f.value for f in old] == ["10"] and old[0].superseded_by == current[0].key

    # Verification is explicit, never inferred from text.
    assert current[0].source == "self_stated"
    done = cli(settings, "facts", "verify", current[0].key)
    assert done.returncode == 0, done.stderr
    shown = cli(settings, "facts", "list", "--agent", "a-ledger", "--tenant", tenant, "--json")
    assert [f["source"] for f in json.loads(shown.stdout)["facts"]] == ["verified"]
    # Restating the old value later makes it current again.
    again = turn(
        tenant, "ev-10b", [PRIYA, LEDGERBOT], msg("p3", "user", "u-priya", "My price is 10", 9)
    )
    emit_and_wait(producer, ledger, [again])
    assert [f.value for f in agent_facts(graph, tenant, "a-ledger")] == ["10"]


def test_commitment_opened_then_closed(
    worker: services.Service, graph: GraphStore, producer: Producer, ledger: Ledger, tenant: str
) -> None:
    grant_trust(graph, tenant, "u-priya", "u-devon", "team")
    promise = turn(
        tenant,
        "ev-c1",
        [PRIYA, DEVON, LEDGERBOT],
        msg("c1", "user", "u-priya", "Devon, I'll send the Q3 forecast by Friday", 1),
    )
    emit_and_wait(producer, ledger, [promise])
    [opened] = agent_commitments(graph, tenant, "a-ledger")
    assert opened.status == "open" and "q3 forecast" in opened.value.lower()
    assert opened.owed_by_key == participant_key(tenant, "u-priya")
    assert opened.owed_to_key == participant_key(tenant, "u-devon")
    assert opened.due is not None and opened.due.weekday() == 4  # Friday

    kept = turn(
        tenant,
        "ev-c2",
        [PRIYA, DEVON, LEDGERBOT],
        msg("c2", "user", "u-priya", "Sent the Q3 forecast.", 30),
    )
    emit_and_wait(producer, ledger, [kept, promise])  # a replay of the promise changes nothing
    [closed] = agent_commitments(graph, tenant, "a-ledger")
    assert closed.key == opened.key and closed.status == "closed" and closed.closed_at is not None


def test_a_promise_the_agent_carries_out_with_a_tool_call_is_not_owed(
    worker: services.Service, graph: GraphStore, producer: Producer, ledger: Ledger, tenant: str
) -> None:
    pulled, later = "I'll pull the October expenses.", "I'll double-check the receipts."
    search = turn(
        tenant,
        "ev-t1",
        [PRIYA, LEDGERBOT],
        msg("t1", "user", "u-priya", "What did we spend on travel in October?", 1),
        msg("t2", "assistant", "a-ledger", pulled, 2, tool_calls=TOOL_CALL),
        msg("t3", "tool", "a-ledger", '{"total": 1840}', 3, tool_call_id="c1"),
        msg("t4", "assistant", "a-ledger", f"You spent 1,840 EUR. {later}", 4),
    )
    emit_and_wait(producer, ledger, [search])
    owed = agent_commitments(graph, tenant, "a-ledger")
    # The search was done as it was promised; the check it did not call a tool for is owed.
    assert [c.value for c in owed] == ["double-check the receipts"]
    assert owed[0].owed_by_key == participant_key(tenant, "a-ledger")


def test_a_promise_kept_by_a_call_after_the_go_ahead_is_closed_in_its_channel_only(
    worker: services.Service, graph: GraphStore, producer: Producer, ledger: Ledger, tenant: str
) -> None:
    offer = "Shall I go ahead? Once you confirm, I'll proceed with cancelling the Lisbon hotel."
    cancel = [{"id": "c9", "type": "function", "function": {"name": "cancel_booking"}}]
    people = [PRIYA, LEDGERBOT]
    elsewhere = event(
        tenant,
        "ev-k0",
        {"id": "ch-other", "kind": "group", "title": "Other"},
        people,
        [msg("k0", "assistant", "a-ledger", offer.replace("Lisbon", "Porto"), 1)],
    )
    asked = turn(tenant, "ev-k1", people, msg("k1", "assistant", "a-ledger", offer, 2))
    emit_and_wait(producer, ledger, [elsewhere, asked])
    assert {c.status for c in agent_commitments(graph, tenant, "a-ledger")} == {"open"}

    done = turn(
        tenant,
        "ev-k2",
        people,
        msg("k2", "user", "u-priya", "Yes, go ahead.", 3),
        msg("k3", "assistant", "a-ledger", None, 4, tool_calls=cancel),
        msg("k4", "tool", "a-ledger", '{"ok": true}', 5, tool_call_id="c9"),
        msg("k5", "assistant", "a-ledger", "All set, the refund reaches your card in 5 days.", 6),
    )
    emit_and_wait(producer, ledger, [done])
    status = {c.value: c.status for c in agent_commitments(graph, tenant, "a-ledger")}
    # The call kept the promise made where it was called; the same words elsewhere are owed.
    assert status == {
        "proceed with cancelling the Lisbon hotel": "closed",
        "proceed with cancelling the Porto hotel": "open",
    }

    # As an older version left them, without their channel: `memsync graph init` restores it.
    read = (
        "MATCH (n) WHERE (n:Commitment OR n:Closure) AND n.tenant = $tenant "
        "RETURN n.key AS k, n.channel_key AS c"
    )
    with graph.session() as session:
        placed = {r["k"]: r["c"] for r in session.run(read, tenant=tenant)}
        session.run(
            "MATCH (n) WHERE (n:Commitment OR n:Closure) AND n.tenant = $tenant "
            "REMOVE n.channel_key",
            tenant=tenant,
        ).consume()
    backfill(graph)
    with graph.session() as session:
        assert {r["k"]: r["c"] for r in session.run(read, tenant=tenant)} == placed
    assert len(placed) == 3 and len(set(placed.values())) == 2


# Set by the embed side (pipeline/graph/cypher/embed.py), asynchronously to the writer.
_EMBEDDED = frozenset(
    {"embedding", "embedded_with", "embedded_at", "embedded_next", "embed_pending"}
)


def memory_snapshot(graph: GraphStore, tenant: str) -> list[Any]:
    """Every memory node of a tenant with its labels, properties and outgoing relationships;
    not the vector properties, which the suite's embed worker may set at any moment."""
    query = f"""
    MATCH (n) WHERE (n:{FACT} OR n:{COMMITMENT} OR n:{CLOSURE}) AND n.agent_key STARTS WITH $prefix
    OPTIONAL MATCH (n)-[r]->(m)
    WITH n, collect([type(r), m.key, properties(r)]) AS out
    RETURN labels(n) AS labels, properties(n) AS props, out ORDER BY n.key
    """
    with graph.session(write=False) as session:
        return [
            (
                r["labels"],
                {k: v for k, v in r["props"].items() if k not in _EMBEDDED},
                sorted(map(repr, r["out"])),
            )
            for r in session.run(query, prefix=f"{tenant}:")
        ]


def test_closure_before_its_commitment_closes_it(
    worker: services.Service, graph: GraphStore, producer: Producer, ledger: Ledger, tenant: str
) -> None:
    grant_trust(graph, tenant, "u-priya", "u-devon", "team")
    people = [PRIYA, DEVON, LEDGERBOT]
    kept = turn(tenant, "ev-d2", people, msg("d2", "user", "u-priya", "Sent the Q3 forecast.", 30))
    emit_and_wait(producer, ledger, [kept])  # the closure arrives first
    assert agent_commitments(graph, tenant, "a-ledger") == []

    promise = turn(
        tenant,
        "ev-d1",
        people,
        msg("d1", "user", "u-priya", "My price is 10. Devon, I'll send the Q3 forecast", 1),
    )
    emit_and_wait(producer, ledger, [promise])
    [closed] = agent_commitments(graph, tenant, "a-ledger")
    assert closed.status == "closed" and "q3 forecast" in closed.value.lower()
    assert closed.closed_at is not None and closed.closed_at.minute == 30

    # Facts, commitments and closures all carry their agent's tenant.
    labels = {(node[0][0], node[1].get("tenant")) for node in memory_snapshot(graph, tenant)}
    assert labels == {(FACT, tenant), (COMMITMENT, tenant), (CLOSURE, tenant)}


def test_a_redelivered_batch_changes_nothing(graph: GraphStore, tenant: str) -> None:
    people = [PRIYA, DEVON, LEDGERBOT]
    events = [
        turn(tenant, "ev-r1", people, msg("r1", "user", "u-priya", "I'll book the hotel", 1)),
        turn(tenant, "ev-r2", people, msg("r2", "user", "u-priya", "Never mind, cancel that", 2)),
        turn(tenant, "ev-r3", people, msg("r3", "user", "u-priya", "My price is 12", 3)),
    ]
    policy = DirectoryTrustPolicy("open", {})
    jobs = ingest_turns([validate_event(e) for e in events], {}, policy).jobs
    memories = memorize(jobs, RulesExtractor(), BUILTIN_LENSES)
    write_sync_jobs(graph, jobs, memories)
    before = memory_snapshot(graph, tenant)
    assert [(c.value, c.status) for c in agent_commitments(graph, tenant, "a-ledger")] == [
        ("book the hotel", "cancelled")
    ]
    write_sync_jobs(graph, jobs, memories)
    # Part of it again, alone: the closure must not move to another commitment.
    write_sync_jobs(graph, jobs[1:], memorize(jobs[1:], RulesExtractor(), BUILTIN_LENSES))
    assert memory_snapshot(graph, tenant) == before
