"""The latency bench's synthetic tenant and statistics (bench/bulkload.py, bench/latency.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.bulkload import BLOCK, CHANNELS, Corpus, Tenant, load_corpus
from bench.latency import percentile
from tests.datasets import TESTS_DATA_DIR


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return load_corpus(TESTS_DATA_DIR)


def test_held_out_queries_are_never_loaded(corpus: Corpus) -> None:
    assert corpus.texts and corpus.queries
    assert not set(corpus.queries) & set(corpus.texts)


def test_episode_rows_have_distinct_keys_and_observers_of_their_channel(corpus: Corpus) -> None:
    tenant = Tenant("t", corpus)
    rows, memories = tenant.rows(0, 3 * BLOCK * CHANNELS // 2, datetime.now(UTC))
    assert len({r["key"] for r in rows}) == len(rows)
    agents = {tenant.channel_key(c): {tenant.key(a) for a in c.agents} for c in tenant.channels}
    humans = {tenant.channel_key(c): {tenant.key(h) for h in c.humans} for c in tenant.channels}
    for row in rows:
        assert set(row["observers"]) == agents[row["channel_key"]]
        speakers = agents if row["role"] == "ai" else humans
        assert row["speaker_key"] in speakers[row["channel_key"]]
    assert memories, "facts and commitments are part of the shape"
    assert {key for key, _ in memories} <= {tenant.key(a) for a in tenant.agents}


def test_growing_a_tenant_continues_where_it_stopped(corpus: Corpus) -> None:
    tenant = Tenant("t", corpus)
    now = datetime.now(UTC)
    whole, _ = tenant.rows(0, 200, now)
    first, _ = tenant.rows(0, 120, now)
    rest, _ = tenant.rows(120, 200, now)
    assert first + rest == whole


def test_raw_events_carry_the_same_messages_as_the_bulk_rows(corpus: Corpus) -> None:
    tenant = Tenant("t", corpus)
    events = tenant.raw_events(0, 2 * BLOCK)
    rows, _ = tenant.rows(0, 2 * BLOCK, datetime.now(UTC))
    sent = [(m["id"], m["content"]) for e in events for m in e["messages"]]
    assert sent == [(r["id"], r["content"]) for r in rows]


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 95) == 7.0


def test_read_load_shares_every_query_among_its_callers_and_counts_failures() -> None:
    import os
    import threading

    from bench.latency import Ask
    from bench.readload import run_level

    queries = [Ask(f"a-{i % 3}", None, "ch", f"question {i}") for i in range(60)]
    seen: list[str] = []
    callers: set[str] = set()
    lock = threading.Lock()

    def call(ask: Ask) -> object:
        with lock:
            seen.append(ask.text)
            callers.add(threading.current_thread().name)
        if ask.text.endswith("7"):
            raise RuntimeError("refused")
        return None

    row = run_level(call, queries, 4, os.getpid())
    assert sorted(seen) == sorted(q.text for q in queries)
    assert row["failed"] == 6 and row["calls"] == 54
    assert row["first_failure"] == "RuntimeError('refused')"
    assert row["callers"] == 4 and callers <= {f"caller-{i}" for i in range(4)}
    assert row["calls_per_second"] > 0 and row["p50"] <= row["p95"] <= row["max"]


def test_read_load_over_http_asks_again_on_a_connection_the_server_closed() -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from typing import Any

    from bench.latency import Ask
    from bench.readload import http_calls

    bodies: list[tuple[str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            bodies.append((self.path, json.loads(self.rfile.read(length))))
            answer = json.dumps([]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            # Every connection is closed after its answer without saying so, as a keep-alive
            # timeout closes an idle one: the client's next request on it fails.
            self.close_connection = True

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        run, close = http_calls(server.server_address[1])
        ask = Ask("a-1", None, "ch-1", "seat preference")
        try:
            for _ in range(3):
                assert run["recall hybrid"](ask) == []
            assert run["build_context"](ask) == []
        finally:
            close()
    finally:
        server.shutdown()
        server.server_close()
    assert [path for path, _ in bodies] == ["/v1/recall"] * 3 + ["/v1/context"]
    assert bodies[0][1]["mode"] == "hybrid" and bodies[0][1]["query"] == "seat preference"
    assert bodies[-1][1]["channel_id"] == "ch-1"


def test_read_load_asks_a_memory_what_it_asks_over_http() -> None:
    from typing import Any, cast

    from bench.latency import Ask
    from bench.readload import calls, context_body, recall_body
    from memsync.reading import Memory

    asked: list[tuple[str, Any]] = []

    class Recording:
        def recall(self, **fields: Any) -> object:
            asked.append(("recall", fields))
            return []

        def build_context(self, agent: str, channel: str, **kw: Any) -> object:
            asked.append(("context", {"agent_id": agent, "channel_id": channel, **kw}))
            return None

    run = calls(cast(Memory, Recording()))
    ask = Ask("a-1", None, "ch-1", "seat preference")
    for kind in ("recall hybrid", "recall keyword", "build_context"):
        run[kind](ask)
    assert asked == [
        ("recall", recall_body(ask, "hybrid")),
        ("recall", recall_body(ask, "keyword")),
        ("context", context_body(ask)),
    ]
