"""Keyword search held to one agent's scope inside Lucene, on real services: another agent's
many stronger matches cannot crowd out this agent's one, `about` keeps to a speaker, and
`memsync graph init` gives nodes written before scope terms existed their terms."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from memsync.settings import Settings
from pipeline.graph.directory import grant_trust
from pipeline.graph.schema import backfill
from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore
from schemas.recall import RecallItem, RecallQuery
from tests.integration.test_spine import (
    DEVON,
    FINANCE,
    SARAH,
    TRAVEL,
    emit_all,
    event,
)
from tests.integration.writing import searchable
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

BUSY = {"id": "ch-busy", "kind": "group", "title": "Accounts"}
QUIET = {"id": "ch-quiet", "kind": "group", "title": "Trip"}
# Short texts score higher under BM25 than the quiet channel's long one, so an unscoped top-k
# would be all of them.
BUSY_MESSAGES = 100
QUIET_TEXT = "Could you forward the invoice from the hotel booking to me when you get a moment"
SARAH_TEXT = "I will forward the invoice tomorrow"


def message(mid: str, sender: str, text: str, second: int) -> dict[str, Any]:
    minute, sec = divmod(second, 60)
    return {
        "id": mid,
        "role": "user",
        "sender_id": sender,
        "content": text,
        "created_at": f"2026-11-29T11:{minute:02d}:{sec:02d}Z",
    }


def events(tenant: str) -> list[Any]:
    busy = [message(f"b{i}", "u-devon", f"Invoice {i}.", i) for i in range(BUSY_MESSAGES)]
    out = [
        event(tenant, f"ev-busy-{n}", BUSY, [DEVON, FINANCE], busy[n : n + 25])
        for n in range(0, BUSY_MESSAGES, 25)
    ]
    quiet = [
        message("q1", "u-devon", QUIET_TEXT, 200),
        message("q2", "u-sarah", SARAH_TEXT, 201),
    ]
    out.append(event(tenant, "ev-quiet", QUIET, [DEVON, SARAH, TRAVEL], quiet))
    return out


@pytest.fixture(scope="module")
def tenant(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> Iterator[str]:
    name = f"s{uuid.uuid4().hex[:12]}"
    grant_trust(graph, name, "u-devon", "u-sarah", "team")
    grant_trust(graph, name, "a-finance", "u-devon", "connected")
    emit_all(settings, ledger, events(name))
    searchable(graph)
    yield name


def ask(graph: GraphStore, tenant: str, agent: str, **fields: Any) -> list[RecallItem]:
    query = RecallQuery.model_validate({"tenant": tenant, "agent_id": agent, **fields})
    return recall(graph, query, embedder=None, dm_policy="never")


def evidence(items: list[RecallItem]) -> set[str]:
    return {m for i in items if i.kind == "episode" for m in i.matched}


def test_another_agents_many_matches_do_not_crowd_out_this_agents_one(
    graph: GraphStore, tenant: str
) -> None:
    busy = ask(graph, tenant, "a-finance", query="invoice", limit=5, include_neighbours=False)
    assert len(evidence(busy)) == 5 and all(m.startswith("b") for m in evidence(busy))
    mine = ask(graph, tenant, "a-travel", query="invoice", include_neighbours=False)
    assert evidence(mine) == {"q1", "q2"}


def test_about_keeps_to_what_that_participant_said(graph: GraphStore, tenant: str) -> None:
    found = ask(graph, tenant, "a-travel", query="invoice", about="u-sarah")
    assert evidence(found) == {"q2"}
    assert evidence(ask(graph, tenant, "a-travel", query="invoice", about="u-devon")) == {"q1"}


def test_graph_init_gives_old_nodes_their_scope_terms_and_channel(
    graph: GraphStore, tenant: str
) -> None:
    # Segments are left out: they came with their scope terms, no older version lacks them.
    read = (
        "MATCH (n) WHERE n.tenant = $tenant AND n.scope IS NOT NULL AND NOT n:Segment "
        "RETURN n.key AS k, n.scope AS s"
    )
    channels = "MATCH (e:Episode {tenant: $tenant}) RETURN e.key AS k, e.channel_key AS c"
    with graph.session() as session:
        written = {r["k"]: set(r["s"].split()) for r in session.run(read, tenant=tenant)}
        placed = {r["k"]: r["c"] for r in session.run(channels, tenant=tenant)}
        # As an older version left them: no scope terms, and no channel_key on episodes.
        session.run(
            "MATCH (n) WHERE n.tenant = $tenant AND NOT n:Segment REMOVE n.scope, n.channel_key",
            tenant=tenant,
        ).consume()
    searchable(graph)
    assert written and not evidence(ask(graph, tenant, "a-travel", query="invoice"))
    done = backfill(graph, page=7)  # several pages
    # The whole graph is backfilled: other tests' hand-made nodes may be counted too.
    assert sum(done.values()) >= len(written)
    with graph.session() as session:
        again = {r["k"]: set(r["s"].split()) for r in session.run(read, tenant=tenant)}
        assert {r["k"]: r["c"] for r in session.run(channels, tenant=tenant)} == placed
    searchable(graph)
    assert again == written
    assert evidence(ask(graph, tenant, "a-travel", query="invoice")) == {"q1", "q2"}
    assert backfill(graph) == {}  # nothing left to do


def test_members_are_everyone_listed_and_graph_init_restores_them(
    graph: GraphStore, tenant: str
) -> None:
    read = (
        "MATCH (p:Participant)-[:MEMBER_OF]->(c:Channel {tenant: $tenant}) "
        "RETURN c.id AS channel, collect(p.id) AS members"
    )
    want = {"ch-busy": {"u-devon", "a-finance"}, "ch-quiet": {"u-devon", "u-sarah", "a-travel"}}
    with graph.session() as session:
        assert {r["channel"]: set(r["members"]) for r in session.run(read, tenant=tenant)} == want
        # As an older version left them: no members recorded.
        session.run(
            "MATCH (:Participant)-[m:MEMBER_OF]->(:Channel {tenant: $tenant}) DELETE m",
            tenant=tenant,
        ).consume()
    backfill(graph)
    with graph.session() as session:
        # Everyone here spoke or remembers the channel, so the backfill finds them all.
        assert {r["channel"]: set(r["members"]) for r in session.run(read, tenant=tenant)} == want
