"""Real services for integration tests: Redis, Neo4j over Bolt and `celery worker` processes.

Each session starts its own Redis and Neo4j on free loopback ports, unless
MEMSYNC_TEST_BROKER_URL / MEMSYNC_TEST_NEO4J_URI name running ones. Tests isolate themselves
by tenant, so nothing is wiped between them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memsync.producer import Producer
from memsync.settings import EMBED_QUEUE, Settings
from pipeline.embedder import Embedder, make_embedder
from pipeline.graph.schema import init_schema
from pipeline.graph.store import GraphStore
from tests.integration.report import FAULT_REPORT
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.ledger import Ledger
from workers.worker import runtime


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the fault tests' figures (events pushed, lost, duplicated, time to recover)."""
    if FAULT_REPORT:
        terminalreporter.section("fault injection figures")
        for line in FAULT_REPORT:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def broker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    named = os.environ.get("MEMSYNC_TEST_BROKER_URL")
    if named:
        yield named
        return
    port = services.free_port()
    server = services.start_redis("127.0.0.1", port, tmp_path_factory.mktemp("redis"), aof=True)
    yield f"redis://127.0.0.1:{port}/0"
    server.stop()


@pytest.fixture(scope="session")
def neo4j_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    named = os.environ.get("MEMSYNC_TEST_NEO4J_URI")
    if named:
        yield named
        return
    port = services.free_port()
    server = services.start_neo4j(
        "127.0.0.1",
        port,
        tmp_path_factory.mktemp("neo4j"),
        Settings().state_dir,
        heap_mb=1024,
        page_cache_mb=256,
    )
    yield f"bolt://127.0.0.1:{port}"
    server.stop()


@pytest.fixture(scope="session")
def settings(broker_url: str, neo4j_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        broker_url=broker_url,
        neo4j_uri=neo4j_uri,
        neo4j_password=os.environ.get("MEMSYNC_TEST_NEO4J_PASSWORD"),
        producer_batch=20,
        spool_dir=tmp_path_factory.mktemp("spool"),
        trust_cache_seconds=1.0,
    )


@pytest.fixture(scope="session")
def graph(settings: Settings) -> Iterator[GraphStore]:
    store = GraphStore.connect(
        settings.neo4j_uri,
        settings.neo4j_user,
        settings.neo4j_password_value,
        settings.neo4j_database,
    )
    embedder = make_embedder(settings)
    init_schema(store, vector_dimensions=embedder.dimensions if embedder else None)
    yield store
    store.close()


@pytest.fixture(scope="session", autouse=True)
def _close_runtime() -> Iterator[None]:
    yield
    runtime.close()


@pytest.fixture(scope="session")
def embedder(settings: Settings) -> Embedder:
    """The session's own model as an embed worker runs it, for tests that embed in-process
    (its embed worker may store some of the same vectors first: they are the same)."""
    made = make_embedder(settings, use="batches")
    assert made is not None
    return made


@pytest.fixture(scope="session")
def ledger(settings: Settings) -> Ledger:
    return Ledger(redis.Redis.from_url(settings.broker_url))


@pytest.fixture(scope="session")
def embed_worker(
    settings: Settings, graph: GraphStore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[services.Service]:
    """One real `celery worker` on the embed queue alone (one process), beside `worker`."""
    log = tmp_path_factory.mktemp("embed-worker") / "worker.log"
    process = services.start_worker(
        worker_env(settings), log, name="memsync-test-embed", queues=[EMBED_QUEUE], concurrency=1
    )
    yield process
    process.stop()
    assert process.process.returncode == 0, process.log_tail(50)


@pytest.fixture(scope="session")
def worker(
    settings: Settings,
    graph: GraphStore,
    embed_worker: services.Service,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[services.Service]:
    """One real `celery worker` (prefork, 2 processes) shared by the session's tests, with an
    embed worker beside it, so the suite runs with embeddings on."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    process = services.start_worker(worker_env(settings), log, name="memsync-test")
    yield process
    process.stop()
    assert process.process.returncode == 0, process.log_tail(50)


@pytest.fixture()
def tenant() -> str:
    """A fresh tenant per test: every graph key is tenant-qualified, so tests never collide."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture()
def producer(settings: Settings) -> Iterator[Producer]:
    p = Producer(settings)
    yield p
    p.close(timeout=10)


@pytest.fixture()
def worker_log(worker: services.Service) -> Path:
    return worker.log_path


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis of the test module's own, for tests that flush it or watch every key."""
    port = services.free_port()
    server = services.start_redis("127.0.0.1", port, tmp_path_factory.mktemp("module-redis"))
    yield f"redis://127.0.0.1:{port}/0"
    server.stop()


@pytest.fixture()
def fresh_redis(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the module's own Redis, emptied before each test."""
    c = redis.Redis.from_url(redis_url)
    c.flushdb()
    yield c
    c.close()
