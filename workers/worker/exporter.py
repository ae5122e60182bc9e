"""The worker's own HTTP endpoint: /metrics for Prometheus, /livez and /readyz for probes.

Served from the worker's main process (a bootstep) on MEMSYNC_METRICS_PORT. /metrics adds up
every pool child's counters and histograms (workers/worker/metrics.py) and, read at scrape
time, what the broker holds: queue depths, dead letters, unsettled turns and the oldest one's
age. /readyz answers 200 only while Redis and Neo4j both answer (a worker that cannot reach
Neo4j can take no sync off its queue), 503 naming what is down; /livez answers while the
process serves at all.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import redis
from celery import bootsteps
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from memsync.settings import Settings
from workers.state.backlog import read_backlog
from workers.state.deadletter import DeadLetterStore
from workers.worker import forkgate, metrics, runtime
from workers.worker.readiness import Check, check_neo4j, check_redis

log = logging.getLogger("memsync.worker")

# A probe every few seconds (kubelet, a scrape, an operator's curl) shares one check.
READY_CACHE_SECONDS: Final = 5.0
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


class BrokerCollector(Collector):
    """Gauges read from Redis at scrape time: the same for every worker of a deployment."""

    def __init__(self, client: redis.Redis, deadletters: DeadLetterStore) -> None:
        self.client = client
        self.deadletters = deadletters

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "memsync_queue_depth", "Messages waiting in each queue", labels=["queue"]
        )
        up = GaugeMetricFamily("memsync_broker_up", "Whether Redis answered this scrape")
        try:
            with forkgate.working():
                backlog = read_backlog(self.client, self.deadletters)
        except (redis.RedisError, OSError) as exc:
            log.warning("metrics: broker gauges unavailable: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for name, length in backlog.queues.items():
            depth.add_metric([name], length)
        yield depth
        yield _gauge(
            "memsync_dead_letters_stored", "Entries in the dead-letter store", backlog.dead_letters
        )
        yield _gauge(
            "memsync_unsettled_turns",
            "Turns emitted whose memories are not all written",
            backlog.unsettled,
        )
        yield _gauge(
            "memsync_oldest_unsettled_seconds",
            "Age of the oldest turn not yet written (0 when none waits)",
            backlog.oldest_unsettled_seconds,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class Readiness:
    """Redis and Neo4j checks, shared by probes that arrive within a few seconds."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._at = 0.0
        self._checks: list[Check] = []

    def checks(self) -> list[Check]:
        with self._lock:
            if time.monotonic() - self._at > READY_CACHE_SECONDS:
                with forkgate.working():
                    self._checks = [
                        check_redis(self.settings),
                        check_neo4j(self.settings, indexes=False),
                    ]
                self._at = time.monotonic()
            return list(self._checks)


class Exporter:
    """The HTTP server and what it serves; started and stopped by `ExporterStep`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = redis.Redis.from_url(
            settings.broker_url, socket_timeout=3.0, socket_connect_timeout=3.0
        )
        self.registry = CollectorRegistry()
        if metrics.multiprocess_enabled():
            MultiProcessCollector(self.registry)  # type: ignore[no-untyped-call]
        else:
            log.warning(
                "metrics: PROMETHEUS_MULTIPROC_DIR was not set before start, so /metrics shows "
                "this process only, not its pool children: start workers with `memsync worker`"
            )
        self.registry.register(
            BrokerCollector(
                self.client,
                DeadLetterStore(
                    self.client,
                    max_entries=settings.dlq_max_entries,
                    ttl_seconds=settings.dlq_ttl_seconds,
                ),
            )
        )
        self.readiness = Readiness(settings)
        handler = _handler(self)
        port = settings.metrics_port or 0
        self.server = ThreadingHTTPServer((settings.metrics_host, port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="memsync-exporter", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        self.thread.start()
        log.info(
            "metrics and probes on http://%s:%d (/metrics, /livez, /readyz)",
            self.settings.metrics_host,
            self.port,
        )

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()

    def respond(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of `path`."""
        if path == "/metrics":
            return 200, CONTENT_TYPE, generate_latest(self.registry)
        if path == "/livez":
            return 200, "text/plain; charset=utf-8", b"ok\n"
        if path == "/readyz":
            checks = self.readiness.checks()
            ready = all(c.ok for c in checks)
            body = {"ready": ready, "checks": [asdict(c) for c in checks]}
            return (200 if ready else 503), "application/json", json.dumps(body).encode()
        return 404, "text/plain; charset=utf-8", b"not found\n"


def _handler(exporter: Exporter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                status, kind, body = exporter.respond(self.path.split("?", 1)[0])
            except Exception:  # a failed scrape must not end the server thread
                log.exception("metrics endpoint failed on %s", self.path)
                status, kind, body = 500, "text/plain; charset=utf-8", b"error\n"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would drown the worker's log

    return Handler


class ExporterStep(bootsteps.StartStopStep):
    """A worker bootstep: serve the exporter while the worker runs, if a port is configured."""

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.exporter: Exporter | None = None

    def start(self, worker: Any) -> None:
        settings = runtime.settings()
        if settings.metrics_port is None:
            return
        self.exporter = Exporter(settings)
        self.exporter.start()

    def stop(self, worker: Any) -> None:
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None
