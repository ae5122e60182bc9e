"""The HTTP API as a real `memsync serve` process against the session's Redis, Neo4j and worker:
a turn posted over HTTP is recalled and shows in the channel's context; a bad turn is refused
naming its field; the bearer token is required, and never reaches the server's log."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from memsync.settings import Settings
from tests.integration.serving import start_serve, wait_healthy
from workers.local import services

pytestmark = pytest.mark.integration

SYNC_SECONDS = 120.0


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    log: Path

    def client(self, *, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)

    def authorised(self) -> httpx.Client:
        return self.client(token=self.token)


@pytest.fixture(scope="module")
def server(
    settings: Settings, worker: services.Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("http")
    token = f"tok-{uuid.uuid4().hex}"
    process, url, log = start_serve(settings, root, token)
    try:
        wait_healthy(url, process, log)
        yield Server(url, token, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    text = log.read_text(errors="replace")
    assert process.returncode == 0, text[-3000:]
    # Access lines were written (so the check below looked at real request logging).
    assert '"POST /v1/turns HTTP/1.1" 202' in text
    assert token not in text
    assert "Traceback" not in text


def _turn(tenant: str, event_id: str, channel: str, content: str) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "event_id": event_id,
        "tenant": tenant,
        "channel": {"id": channel, "kind": "dm"},
        "participants": [
            {"id": "u-dev", "kind": "human", "display_name": "Devon", "handle": "devon"},
            # Owned by the human in the DM: trusted in strict mode.
            {"id": "a-own", "kind": "agent", "display_name": "Travel", "owner_id": "u-dev"},
        ],
        "messages": [
            {
                "id": f"m-{event_id}",
                "role": "user",
                "sender_id": "u-dev",
                "content": content,
                "created_at": "2026-11-29T10:00:00Z",
            }
        ],
    }


def test_a_posted_turn_is_recalled_and_in_the_channels_context(server: Server, tenant: str) -> None:
    event = _turn(tenant, "e-http", "dm-http", "I prefer window seats on long flights")
    with server.authorised() as client:
        posted = client.post("/v1/turns", json=event)
        assert posted.status_code == 202, posted.text
        assert posted.json() == {"accepted": ["e-http"]}

        ask = {"tenant": tenant, "agent_id": "a-own", "channel_id": "dm-http"}
        deadline = time.monotonic() + SYNC_SECONDS
        found: list[dict[str, Any]] = []
        while not found:
            assert time.monotonic() < deadline, "the turn never became recallable"
            answer = client.post("/v1/recall", json={**ask, "query": "window seats"})
            assert answer.status_code == 200, answer.text
            found = [i for i in answer.json() if "m-e-http" in i["evidence"]]
            if not found:
                time.sleep(0.3)
        assert any("window seats" in item["text"] for item in found), found

        asked = {**ask, "query": "window seats"}
        context = client.post("/v1/context", json={**asked, "budget_tokens": 2000})
        assert context.status_code == 200, context.text
        body = context.json()
        assert body["context"]["channel"]["id"] == "dm-http"
        cited = [m for m in body["context"]["memories"] if "m-e-http" in m["evidence"]]
        cited += [f for f in body["context"]["facts"] if "m-e-http" in f["evidence"]]
        assert cited, body["context"]
        assert all(m["role"] == "system" for m in body["messages"])
        assert "window seats" in "\n".join(m["content"] for m in body["messages"])

        # The server's metrics count those reads: every recall asked, the one context.
        scrape = client.get("/metrics")
        assert scrape.status_code == 200
        counted = {
            line.split()[0]: float(line.split()[1])
            for line in scrape.text.splitlines()
            if line.startswith("memsync_reader_call")
        }
        assert counted['memsync_reader_calls_total{call="recall",outcome="ok"}'] >= 1
        assert counted['memsync_reader_calls_total{call="build_context",outcome="ok"}'] == 1
        assert counted['memsync_reader_call_seconds_count{call="build_context"}'] == 1
        assert counted['memsync_reader_call_seconds_sum{call="build_context"}'] > 0

        # Named as the platform's recent window, the turn is not repeated among the memories.
        trimmed = client.post("/v1/context", json={**asked, "recent_ids": ["m-e-http"]})
        assert trimmed.status_code == 200, trimmed.text
        memories = trimmed.json()["context"]["memories"]
        assert all("m-e-http" not in m["evidence"] for m in memories), memories


def test_a_bad_turn_is_refused_naming_the_field(server: Server, tenant: str) -> None:
    event = _turn(tenant, "e-bad", "dm-bad", "hello")
    event["messages"][0]["sender_id"] = "u-stranger"
    with server.authorised() as client:
        answer = client.post("/v1/turns", json=[_turn(tenant, "e-good", "dm-bad", "hi"), event])
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["error"] == "invalid_event"
    assert [(p["index"], p["field"]) for p in body["problems"]] == [(1, "messages.0.sender_id")]


def test_the_token_is_required(server: Server, tenant: str) -> None:
    ask = {"tenant": tenant, "agent_id": "a-own", "query": "anything"}
    with server.client() as anonymous:
        refused = anonymous.post("/v1/recall", json=ask)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.post("/v1/turns", json=_turn(tenant, "e-x", "c", "x")).status_code == 401
        # Health needs no token, and says both services answer.
        health = anonymous.get("/v1/health")
        assert health.status_code == 200
        assert health.json()["redis"] is True and health.json()["neo4j"] is True
    with server.client(token="not-the-token") as guessing:
        assert guessing.post("/v1/recall", json=ask).status_code == 401
    with server.authorised() as client:
        allowed = client.post("/v1/recall", json=ask)
        assert allowed.status_code == 200, allowed.text
        assert allowed.json() == []
