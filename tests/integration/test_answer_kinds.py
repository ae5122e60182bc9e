"""Answer kinds on real services: when a question asks for a kind of value, recall through Neo4j
puts a message stating one ahead of a message that matches a little better but states none; a
question asking for no kind leaves the order to the match alone."""

from __future__ import annotations

import uuid

import pytest

from memsync.settings import Settings
from pipeline.graph.search import recall
from pipeline.graph.store import GraphStore
from schemas.recall import RecallItem, RecallQuery
from tests.integration.test_spine import DEVON, TRAVEL, emit_all, event, msg
from tests.integration.writing import searchable
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

# Two channels, so each message is a window of its own. Both carry the same words a question
# about the loan matches; the first is one word shorter, so it matches a little better (BM25's
# length norm, well under the answer-kind boost), and only the second states a day.
OPENED = ("ch-asked", "k1", "the loan gets debited on weekdays")
SETTLED = ("ch-settled", "k2", "the loan gets debited on a Tuesday")


@pytest.fixture(scope="module")
def loan_tenant(
    worker: services.Service, settings: Settings, graph: GraphStore, ledger: Ledger
) -> str:
    tenant = f"r{uuid.uuid4().hex[:12]}"
    events = [
        event(
            tenant,
            f"ev-{mid}",
            {"id": channel, "kind": "group", "title": "Loan"},
            [DEVON, TRAVEL],
            [msg(mid, "user", "u-devon", text, minute)],
        )
        for minute, (channel, mid, text) in enumerate((OPENED, SETTLED), start=1)
    ]
    emit_all(settings, ledger, events)
    searchable(graph)
    return tenant


def first_matched(graph: GraphStore, tenant: str, question: str) -> list[str]:
    query = RecallQuery(tenant=tenant, agent_id="a-travel", query=question, mode="keyword")
    found: list[RecallItem] = recall(graph, query, embedder=None, dm_policy="never")
    episodes = [item for item in found if item.kind == "episode"]
    assert {m for item in episodes for m in item.matched} == {"k1", "k2"}, found
    return episodes[0].matched


def test_a_question_asking_for_a_day_leads_with_the_message_stating_one(
    graph: GraphStore, loan_tenant: str
) -> None:
    assert first_matched(graph, loan_tenant, "what day does the loan get debited?") == ["k2"]


def test_a_question_asking_for_no_kind_keeps_the_better_match_first(
    graph: GraphStore, loan_tenant: str
) -> None:
    assert first_matched(graph, loan_tenant, "why does the loan get debited?") == ["k1"]
