"""A real `memsync worker` seen from outside: its /metrics scraped under load (the pool
children's counts, summed), /readyz turning 503 while Neo4j is cut off and back to 200, JSON
log lines that carry the turn's identifiers but never what was said, and one OpenTelemetry
trace from the producer's publish through the tasks to the graph write, received over OTLP (in
the ingest task, or across a sync task where ingest sends its batch on).

The worker has a Redis of this module's own, so it alone consumes the turns emitted here, and
reaches the session's Neo4j through a proxy the tests can cut.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memsync.producer import Producer
from memsync.settings import Settings
from pipeline.graph.store import GraphStore
from tests.integration.proxy import SilenceableProxy
from tests.integration.report import send_task
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

MEMSYNC = Path(sys.executable).parent / "memsync"
TURNS = 120
SECRET_TEXT = "zebra-crossing-passphrase"


@dataclass
class ObservedWorker:
    """A `memsync worker` process, where it serves, its log, and the proxy to its Neo4j."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    proxy: SilenceableProxy
    settings: Settings

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()

    def samples(self) -> dict[str, float]:
        """Every sample of a scrape, by its full name with labels, e.g. `x_total{a="b"}`."""
        status, text = self.get("/metrics")
        assert status == 200, text
        found: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                found[name] = float(value)
        return found


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


class Collector:
    """An OTLP/HTTP trace receiver on loopback: every span it was sent, as (trace id, span id,
    parent span id, name)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str, str]] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                with collector.lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            collector.spans.extend(
                                (s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name)
                                for s in scope.spans
                            )
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of_trace(self, trace_id: str) -> dict[str, tuple[str, str]]:
        """Span name -> (span id, parent span id), for one trace."""
        with self.lock:
            return {name: (sid, parent) for tid, sid, parent, name in self.spans if tid == trace_id}


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    receiver = Collector()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


@pytest.fixture(scope="module")
def observed(
    settings: Settings,
    graph: GraphStore,
    collector: Collector,
    redis_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ObservedWorker]:
    neo4j = urlsplit(settings.neo4j_uri)
    assert neo4j.port is not None
    proxy = SilenceableProxy(neo4j.port)
    own = settings.model_copy(
        update={
            "broker_url": redis_url,
            "neo4j_uri": f"bolt://127.0.0.1:{proxy.port}",
            "log_format": "json",
            # Every agent may remember every turn here: this module counts writes, not trust.
            "trust_mode": "open",
            "neo4j_retry_seconds": 2.0,
            "tracing": True,
        }
    )
    port = services.free_port()
    log = tmp_path_factory.mktemp("observed-worker") / "worker.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(MEMSYNC), "worker", "--metrics-port", str(port), "-c", "2"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                **worker_env(own),
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
                # Spans leave within a fraction of a second, not OpenTelemetry's 5 s default.
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            },
        )
    worker = ObservedWorker(process, port, log, proxy, own)
    try:
        wait_for(lambda: _answers(worker), "the worker's /livez")
        yield worker
    finally:
        process.terminate()
        process.wait(timeout=120)
        proxy.close()
    assert process.returncode == 0, log.read_text(errors="replace")[-4000:]


def _answers(worker: ObservedWorker) -> bool:
    assert worker.process.poll() is None, worker.log.read_text(errors="replace")[-4000:]
    try:
        return worker.get("/livez")[0] == 200
    except OSError:
        return False


def _event(tenant: str, number: int, **message: Any) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "event_id": f"obs-{number}",
        "tenant": tenant,
        "channel": {"id": "c-obs", "kind": "group", "title": "ops"},
        "participants": [
            {"id": "u-ana", "kind": "human", "display_name": "Ana", "handle": "ana"},
            {"id": "a-ops", "kind": "agent", "display_name": "Ops", "handle": "ops"},
        ],
        "messages": [
            {
                "id": f"m-{number}",
                "role": "human",
                "sender_id": "u-ana",
                "content": f"deploy number {number} went to us-east-1",
                "created_at": f"2026-11-30T10:{number // 60:02d}:{number % 60:02d}Z",
                **message,
            }
        ],
    }


def test_metrics_sum_the_pool_children_under_load(observed: ObservedWorker, tenant: str) -> None:
    producer = Producer(observed.settings)
    try:
        for number in range(TURNS):
            producer.emit(_event(tenant, number))
        assert producer.flush(30)
    finally:
        producer.close()
    ledger = Ledger(redis.Redis.from_url(observed.settings.broker_url))
    turns = [(tenant, f"obs-{n}") for n in range(TURNS)]
    wait_for(lambda: all(s.finished for s in ledger.statuses(turns)), "every turn written")
    # A task counts what it wrote after the ledger says so, so the ledger may say finished first.
    accepted = f'memsync_events_total{{outcome="accepted",tenant="{tenant}"}}'
    synced = f'memsync_sync_jobs_total{{tenant="{tenant}"}}'
    wait_for(
        lambda: min(observed.samples().get(name, 0.0) for name in (accepted, synced)) >= TURNS,
        "every event and job counted",
    )

    seen = observed.samples()
    # Tasks ran in the pool's children only: any count here was summed across processes.
    assert seen[accepted] == TURNS
    assert seen[synced] == TURNS
    assert seen[f'memsync_emit_to_written_seconds_count{{tenant="{tenant}"}}'] >= 1
    for stage in ("validate", "lookup", "plan", "account", "extract", "write"):
        assert seen[f'memsync_stage_seconds_count{{stage="{stage}"}}'] >= 1, stage
    assert seen['memsync_task_seconds_count{task="ingest"}'] >= 1
    assert seen['memsync_queue_wait_seconds_count{queue="memsync.ingest"}'] >= 1
    # The worker takes both queues, so each ingest task wrote its batch itself.
    assert seen['memsync_sync_in_ingest_total{outcome="written"}'] >= 1
    assert seen.get('memsync_sync_in_ingest_total{outcome="sent_on"}', 0) == 0
    assert seen['memsync_trust_decisions_total{reason="trusted",trusted="true"}'] >= TURNS
    # Read from Redis at scrape time.
    assert seen["memsync_broker_up"] == 1
    assert seen['memsync_queue_depth{queue="memsync.ingest"}'] >= 0
    assert seen["memsync_unsettled_turns"] == 0


def test_readiness_follows_neo4j(observed: ObservedWorker) -> None:
    def ready() -> tuple[int, dict[str, Any]]:
        status, body = observed.get("/readyz")
        return status, json.loads(body)

    wait_for(lambda: ready()[0] == 200, "ready with Neo4j up")
    observed.proxy.cut()
    try:
        wait_for(lambda: ready()[0] == 503, "not ready with Neo4j cut off")
        report = ready()[1]
        checks = {c["name"]: c for c in report["checks"]}
        assert report["ready"] is False
        assert checks["neo4j"]["ok"] is False and checks["redis"]["ok"] is True
        # Alive all the same: a worker cut off from Neo4j is not restarted, only kept unready.
        assert observed.get("/livez")[0] == 200
    finally:
        observed.proxy.restore()
    wait_for(lambda: ready()[0] == 200, "ready again once Neo4j is back")


def test_json_logs_name_the_turn_never_its_text(observed: ObservedWorker, tenant: str) -> None:
    # Sent past the producer (which validates what it emits), as an older client might.
    bad = _event(tenant, 999, role="robot", content=SECRET_TEXT)
    send_task(observed.settings.broker_url, "memsync.ingest", [bad])

    def dead_letter_line() -> dict[str, Any] | None:
        for line in observed.log.read_text(errors="replace").splitlines():
            if line.startswith("{") and "dead-lettered" in line and tenant in line:
                parsed: dict[str, Any] = json.loads(line)
                return parsed
        return None

    wait_for(lambda: dead_letter_line() is not None, "the dead-letter log line")
    line = dead_letter_line()
    assert line is not None
    assert line["level"] == "ERROR" and line["tenant"] == tenant
    assert line["event_id"] == "obs-999" and line["task_name"] == "memsync.ingest"
    assert line["task_id"]
    assert "messages.0.role" in line["message"]
    assert SECRET_TEXT not in observed.log.read_text(errors="replace")
    assert observed.samples()['memsync_dead_letters_total{kind="permanent",task="ingest"}'] >= 1


@pytest.fixture(scope="module")
def platform_spans() -> InMemorySpanExporter:
    """The platform's side: its own tracer provider (an application sets one; memsync only uses
    the API), set once: OpenTelemetry refuses to replace it."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "another test set a tracer provider first"
    return spans


def _traced_turn(
    own: Settings,
    spans: InMemorySpanExporter,
    collector: Collector,
    tenant: str,
    expected: set[str],
) -> tuple[dict[str, Any], str]:
    """Emit one turn; the worker's spans of its trace (the worker's pool children export them
    over OTLP to `collector`), once all of `expected` arrived, and the publish span's id."""
    spans.clear()
    producer = Producer(own)
    try:
        producer.emit(_event(tenant, 1))
        assert producer.flush(30)
    finally:
        producer.close()
    (publish,) = [s for s in spans.get_finished_spans() if s.name == "memsync.publish"]
    assert publish.context is not None
    trace_id = f"{publish.context.trace_id:032x}"
    wait_for(lambda: expected <= set(collector.of_trace(trace_id)), "the worker's spans")
    return collector.of_trace(trace_id), f"{publish.context.span_id:016x}"


def test_one_trace_runs_from_the_publish_to_the_write(
    observed: ObservedWorker,
    platform_spans: InMemorySpanExporter,
    collector: Collector,
    tenant: str,
) -> None:
    expected = {"memsync.ingest", "validate", "plan", "extract", "write"}
    found, publish = _traced_turn(observed.settings, platform_spans, collector, tenant, expected)
    # The parent link crosses the broker: publish -> ingest -> write (in the ingest task).
    assert found["memsync.ingest"][1] == publish
    assert found["write"][1] == found["memsync.ingest"][0]
    assert "memsync.sync" not in found


def test_the_trace_crosses_to_a_sync_task(
    observed: ObservedWorker,
    platform_spans: InMemorySpanExporter,
    collector: Collector,
    tenant: str,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """Where ingest sends its batch on (here: writing in ingest turned off), the sync task's
    spans join the same trace."""
    own = observed.settings.model_copy(
        update={"broker_url": redis_url.rsplit("/", 1)[0] + "/8", "sync_in_ingest": False}
    )
    env = {
        **worker_env(own),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    worker = services.start_worker(env, tmp_path / "sent-on.log", name="sent-on")
    try:
        expected = {"memsync.ingest", "fan_out", "memsync.sync", "extract", "write"}
        found, publish = _traced_turn(own, platform_spans, collector, tenant, expected)
    finally:
        worker.stop()
    # Parent links cross the broker twice: publish -> ingest -> sync -> write.
    assert found["memsync.ingest"][1] == publish
    assert found["memsync.sync"][1] == found["memsync.ingest"][0]
    assert found["write"][1] == found["memsync.sync"][0]
