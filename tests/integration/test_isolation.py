"""One bad turn never takes others down: a sync batch that fails for one turn writes the rest,
whether the ingest task tried to write it first or not.

The fault is one validation cannot see: the extraction endpoint refuses one turn's request
(HTTP 400, as a content filter does). The worker runs the `llm` extractor against a local
OpenAI-compatible HTTP server, on its own Redis database so the session's worker stays out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from memsync.producer import Producer
from memsync.settings import Settings
from pipeline.graph.reader import agent_facts, tenant_counts
from pipeline.graph.store import GraphStore
from tests.integration.report import send_task
from tests.modelserver import chat_answer, serve
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.deadletter import DeadLetterStore
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

POISON = "POISON-TURN"
TURNS = 30


@pytest.fixture()
def model_endpoint() -> Iterator[str]:
    """An OpenAI-compatible endpoint that answers no items, and 400 for the poisoned turn."""

    def respond(headers: dict[str, str], body: bytes) -> tuple[int, bytes, float]:
        if POISON.encode() in body:
            return 400, json.dumps({"error": "content filter"}).encode(), 0.0
        return 200, chat_answer({"items": []}), 0.0

    with serve(respond) as url:
        yield url


def turn(tenant: str, index: int) -> dict[str, Any]:
    text = f"{POISON} message {index}" if index == TURNS // 2 else f"plain message {index}"
    return {
        "schema_version": 1,
        "event_id": f"ev-{index}",
        "tenant": tenant,
        "channel": {"id": "ch-iso", "kind": "group"},
        "participants": [
            {"id": "u-ana", "kind": "human", "display_name": "Ana", "handle": "ana"},
            {"id": "a-bot", "kind": "agent", "display_name": "Bot", "handle": "bot"},
        ],
        "messages": [
            {
                "id": f"m-{index}",
                "role": "user",
                "sender_id": "u-ana",
                "content": text,
                "created_at": f"2026-11-29T10:{index:02d}:00Z",
            }
        ],
    }


def test_one_refused_turn_is_dead_lettered_alone(
    settings: Settings,
    graph: GraphStore,
    model_endpoint: str,
    tenant: str,
    tmp_path: Path,
) -> None:
    own = settings.model_copy(
        update={
            # A database of its own: the session's worker (rules extractor) never sees these.
            "broker_url": settings.broker_url.rsplit("/", 1)[0] + "/3",
            "extractor": "llm",
            "llm_base_url": model_endpoint,
            "llm_model": "test-model",
            "llm_requests_per_second": 1000.0,
            "trust_mode": "open",
        }
    )
    client = redis.Redis.from_url(own.broker_url)
    worker = services.start_worker(worker_env(own), tmp_path / "worker.log", name="isolation")
    try:
        # One ingest message, so the bot's 30 jobs travel in one sync batch with the culprit.
        send_task(own.broker_url, "memsync.ingest", [turn(tenant, i) for i in range(TURNS)])
        turns = [(tenant, f"ev-{i}") for i in range(TURNS)]
        statuses = Ledger(client).wait(turns, timeout=180)
    finally:
        worker.stop()
    assert all(s.finished for s in statuses), worker.log_tail(60)
    poisoned = f"ev-{TURNS // 2}"
    assert [s.event_id for s in statuses if not s.complete] == [poisoned]
    letters = [x for x in DeadLetterStore(client).entries() if x.tenant == tenant]
    assert [(x.event_id, x.stage, x.error_type) for x in letters] == [
        (poisoned, "sync", "LLMRejected")
    ]
    # The ingest task tried the batch's write itself, failed on the culprit and sent the batch
    # on as a sync task, which isolated it.
    stats = Ledger(client).stats()
    assert (stats.get("sync.in_ingest"), stats.get("sync.in_ingest_sent_on")) == (None, 1), stats
    # Every other turn's episode is in the bot's memory; the poisoned one is not.
    assert tenant_counts(graph, tenant)["observed"] == TURNS - 1
    client.close()
    assert worker.process.returncode == 0, worker.log_tail(40)


def test_an_oversized_preference_is_written(
    worker: services.Service, producer: Producer, ledger: Ledger, graph: GraphStore, tenant: str
) -> None:
    """A preference whose key would pass Neo4j's index limit (8 KB) is still remembered."""
    event = turn(tenant, 1)
    event["channel"] = {"id": "ch-dm", "kind": "dm"}
    event["participants"][1]["owner_id"] = "u-ana"
    event["messages"][0]["content"] = "I prefer " + "😀" * 3000 + " seats"
    producer.emit(event)
    (status,) = ledger.wait([(tenant, "ev-1")], timeout=120)
    assert status.complete, status
    facts = agent_facts(graph, tenant, "a-bot")
    assert [f.predicate for f in facts] == ["prefers"]
    assert "😀" in facts[0].value
