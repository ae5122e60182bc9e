"""The HTTP API's request/response rules without services: auth, refusals by field, errors as
one-line JSON, the loopback rule of `memsync serve`, and the committed schema documents.

Redis and Neo4j point at port 1 (connection refused at once), so a call that reaches them
answers 503 and an accepted turn lands in the producer's spool.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memsync import http
from memsync.reading import Memory
from memsync.settings import Settings
from pipeline.errors import ConfigurationError
from schemas.event import TurnEvent
from tests.unit.offline import offline_settings
from workers.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def turn(event_id: str = "evt-1", **changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "schema_version": 1,
        "event_id": event_id,
        "tenant": "acme",
        "channel": {"id": "ch-1", "kind": "dm"},
        "participants": [
            {"id": "u-1", "kind": "human", "display_name": "Devon", "handle": "devon"},
            {"id": "a-1", "kind": "agent", "display_name": "Travel", "handle": "travel"},
        ],
        "messages": [
            {
                "id": "m-1",
                "role": "human",
                "sender_id": "u-1",
                "content": "window seats please",
                "created_at": "2026-11-29T10:00:00Z",
            }
        ],
    }
    event.update(changes)
    return event


def offline(tmp_path: Path, token: str | None = TOKEN) -> Settings:
    return offline_settings(tmp_path, token)


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return offline(tmp_path)


@pytest.fixture()
def client(settings: Settings) -> Iterator[TestClient]:
    # Server errors become answers (as under uvicorn), so the 500 body itself can be checked.
    with TestClient(http.create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


def test_without_a_token_every_v1_call_but_health_is_refused(client: TestClient) -> None:
    calls = [
        client.get("/v1/schema/event"),
        client.post("/v1/turns", json=turn()),
        client.post("/v1/recall", json={"agent_id": "a-1"}),
        client.post("/v1/context", json={"agent_id": "a-1", "channel_id": "ch-1"}),
    ]
    for answer in calls:
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"] == 'Bearer realm="memsync"'
        assert answer.json()["error"] == "unauthorized"
    assert client.get("/v1/health").status_code != 401


def test_a_wrong_token_or_scheme_is_refused_and_never_echoed(client: TestClient) -> None:
    for header in (f"Bearer {TOKEN}x", "Bearer guess-123", f"Basic {TOKEN}", TOKEN):
        answer = client.get("/v1/schema/event", headers={"Authorization": header})
        assert answer.status_code == 401, header
        assert "guess-123" not in answer.text and TOKEN not in answer.text
    wrong = client.get("/v1/schema/event", headers={"Authorization": "Bearer guess-123"})
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]


def test_the_right_token_is_let_in(client: TestClient) -> None:
    answer = client.get("/v1/schema/event", headers=AUTH)
    assert answer.status_code == 200
    assert answer.json() == http.event_schema()


def test_an_unauthenticated_bad_body_learns_nothing_of_validation(client: TestClient) -> None:
    answer = client.post("/v1/recall", json={"nonsense": True})
    assert answer.status_code == 401


def test_without_a_configured_token_no_header_is_needed(tmp_path: Path) -> None:
    app = http.create_app(offline(tmp_path, token=None))
    with TestClient(app) as open_client:
        assert open_client.get("/v1/schema/event").status_code == 200
    # An empty token is no token: it must not turn auth on with "" as the password.
    app = http.create_app(offline(tmp_path, token=""))
    with TestClient(app) as open_client:
        assert open_client.get("/v1/schema/event").status_code == 200


def test_a_bad_turn_is_refused_naming_the_field(client: TestClient) -> None:
    bad = turn()
    bad["messages"][0]["role"] = "wizard"
    answer = client.post("/v1/turns", json=bad, headers=AUTH)
    assert answer.status_code == 422
    body = answer.json()
    assert body["error"] == "invalid_event"
    assert [p["field"] for p in body["problems"]] == ["messages.0.role"]
    assert body["problems"][0]["event_id"] == "evt-1"
    assert "messages.0.role" in body["detail"] and "\n" not in body["detail"]


def test_unparsable_json_is_refused_as_an_invalid_event(client: TestClient) -> None:
    answer = client.post("/v1/turns", content=b'{"schema_version": 1,', headers=AUTH)
    assert answer.status_code == 422
    assert answer.json()["problems"][0]["field"] == "<event>"
    listed = client.post("/v1/turns", content=b"[{", headers=AUTH)
    assert listed.status_code == 422
    empty = client.post("/v1/turns", json=[], headers=AUTH)
    assert empty.status_code == 422


def test_a_list_with_bad_turns_emits_nothing_and_names_each(settings: Settings) -> None:
    bad_sender = turn("evt-2")
    bad_sender["messages"][0]["sender_id"] = "u-nobody"
    no_id = turn("evt-3")
    del no_id["event_id"]
    app = http.create_app(settings)
    with TestClient(app) as client:
        answer = client.post("/v1/turns", json=[turn("evt-1"), bad_sender, no_id], headers=AUTH)
        assert answer.status_code == 422
        problems = answer.json()["problems"]
        assert [(p["index"], p["field"]) for p in problems] == [
            (1, "messages.0.sender_id"),
            (2, "event_id"),
        ]
        # One good turn afterwards: it alone must reach the spool (the broker is away).
        good = client.post("/v1/turns", json=turn("evt-ok"), headers=AUTH)
        assert good.status_code == 202
        assert good.json() == {"accepted": ["evt-ok"]}
        producer = app.state.resources.producer
    # Leaving the client ran the app's shutdown, which closed the producer into its spool.
    assert producer.spool_status().events == 1


def test_a_list_of_good_turns_is_accepted_in_order(client: TestClient) -> None:
    answer = client.post("/v1/turns", json=[turn("e-a"), turn("e-b")], headers=AUTH)
    assert answer.status_code == 202
    assert answer.json() == {"accepted": ["e-a", "e-b"]}


def test_an_oversized_body_is_refused_before_it_is_read_whole(client: TestClient) -> None:
    body = b"[" + b" " * http.MAX_BODY_BYTES + b"]"
    answer = client.post("/v1/turns", content=body, headers=AUTH)
    assert answer.status_code == 413
    assert answer.json()["error"] == "too_large"
    many = [turn(f"e-{i}") for i in range(http.MAX_TURNS_PER_REQUEST + 1)]
    assert client.post("/v1/turns", json=many, headers=AUTH).status_code == 413


def test_a_bad_recall_or_context_request_names_the_field(client: TestClient) -> None:
    recall = client.post("/v1/recall", json={"agent_id": "a-1", "limit": 0}, headers=AUTH)
    assert recall.status_code == 422
    assert [p["field"] for p in recall.json()["problems"]] == ["limit"]
    context = client.post("/v1/context", json={"agent_id": "a-1"}, headers=AUTH)
    assert context.status_code == 422
    assert [p["field"] for p in context.json()["problems"]] == ["channel_id"]
    negative = {"agent_id": "a-1", "channel_id": "c", "budget_tokens": -1}
    budget = client.post("/v1/context", json=negative, headers=AUTH)
    assert [p["field"] for p in budget.json()["problems"]] == ["budget_tokens"]


def test_a_graph_outage_is_a_503_with_one_line(client: TestClient) -> None:
    for answer in (
        client.post("/v1/recall", json={"agent_id": "a-1", "query": "seat"}, headers=AUTH),
        client.post("/v1/context", json={"agent_id": "a-1", "channel_id": "c"}, headers=AUTH),
    ):
        assert answer.status_code == 503, answer.text
        body = answer.json()
        assert body["error"] == "unavailable"
        assert body["detail"] == "the memory graph (Neo4j) is unavailable; retry later"
        assert answer.headers["retry-after"]
        assert "127.0.0.1" not in answer.text and "Traceback" not in answer.text
    # Operators see the failed reads on the server's metrics.
    lines = client.get("/metrics", headers=AUTH).text.splitlines()
    assert 'memsync_reader_calls_total{call="recall",outcome="error"} 1.0' in lines
    assert 'memsync_reader_calls_total{call="build_context",outcome="error"} 1.0' in lines
    assert 'memsync_reader_call_seconds_count{call="recall"} 1.0' in lines


def test_health_says_what_is_down_without_auth_or_addresses(client: TestClient) -> None:
    answer = client.get("/v1/health")
    assert answer.status_code == 503
    assert answer.json() == {"status": "degraded", "redis": False, "neo4j": False, "spooled": 0}


def test_an_unexpected_error_is_a_500_without_a_traceback(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Memory, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("internal detail /etc/secret")

    monkeypatch.setattr(Memory, "recall", broken)
    answer = client.post("/v1/recall", json={"agent_id": "a-1"}, headers=AUTH)
    assert answer.status_code == 500
    assert answer.json()["error"] == "internal"
    assert "secret" not in answer.text and "Traceback" not in answer.text


def test_unknown_paths_answer_in_json(client: TestClient) -> None:
    answer = client.get("/v1/nothing", headers=AUTH)
    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert http.is_loopback(host) is loopback


def test_serving_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    exposed = offline(tmp_path, token=None).model_copy(update={"serve_host": "0.0.0.0"})
    with pytest.raises(ConfigurationError, match="MEMSYNC_API_TOKEN"):
        http.check_exposure(exposed)
    http.check_exposure(offline(tmp_path).model_copy(update={"serve_host": "0.0.0.0"}))
    http.check_exposure(offline(tmp_path, token=None))  # loopback: no token needed


def test_memsync_serve_refuses_an_exposed_host_without_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMSYNC_API_TOKEN", raising=False)
    code = cli.main(["serve", "--host", "0.0.0.0", "--port", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        "memsync: refusing to serve on 0.0.0.0 without a token: set MEMSYNC_API_TOKEN, "
        "or bind to loopback (--host 127.0.0.1)"
    ]


def test_the_event_schema_is_the_turn_event_model() -> None:
    schema = http.event_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert {k: v for k, v in schema.items() if k != "$schema"} == TurnEvent.model_json_schema()


def test_openapi_documents_the_calls_and_the_bearer_scheme(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert set(document["paths"]) == {
        "/v1/turns",
        "/v1/recall",
        "/v1/context",
        "/v1/health",
        "/v1/schema/event",
        "/metrics",
    }
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert "security" not in document["paths"]["/v1/health"]["get"]
    body = document["paths"]["/v1/turns"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["oneOf"][0] == {"$ref": "#/components/schemas/TurnEvent"}
    assert "TurnEvent" in document["components"]["schemas"]
    # What a token changes is who may call, not the document.
    assert document == http.openapi_document()


@pytest.mark.parametrize(
    ("path", "generate"),
    [("docs/openapi.json", http.openapi_document), ("docs/event.schema.json", http.event_schema)],
)
def test_the_committed_documents_match_the_code(path: str, generate: Any) -> None:
    committed = json.loads((ROOT / path).read_text(encoding="utf-8"))
    assert committed == generate(), (
        f"{path} is out of date: run python -m memsync.http --dump-openapi docs/openapi.json "
        "--dump-event-schema docs/event.schema.json"
    )


def test_metrics_need_the_token_and_count_what_the_producer_did(
    client: TestClient, settings: Settings
) -> None:
    assert client.get("/metrics").status_code == 401
    # Redis is away: the accepted turn is spooled, and the scrape says so.
    assert client.post("/v1/turns", json=turn("evt-m"), headers=AUTH).status_code == 202
    client.app.state.resources.producer.flush(5.0)  # type: ignore[attr-defined]
    scrape = client.get("/metrics", headers=AUTH)
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain")
    lines = scrape.text.splitlines()
    assert 'memsync_producer_turns_total{outcome="emitted"} 1.0' in lines
    assert 'memsync_producer_turns_total{outcome="spooled"} 1.0' in lines
    assert "memsync_producer_spooled 1.0" in lines
    # The reader's side too, before any read: its vector cache and what it may hold.
    assert "memsync_reader_vector_cache_bytes 0.0" in lines
    limits = [x.split()[-1] for x in lines if x.startswith("memsync_reader_vector_cache_limit")]
    assert [float(x) for x in limits] == [settings.recall_vector_cache_mb * 2**20]
