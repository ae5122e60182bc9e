"""A private set of real services for fault-injection tests: Redis, Neo4j, and worker processes
that can be killed, stopped and restarted on the same ports and data."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from memsync.settings import Settings
from pipeline.graph.schema import init_schema
from pipeline.graph.store import GraphStore
from workers.cli.demo import worker_env
from workers.local import services


class Cluster:
    """Services with short delivery timeouts, so recovery happens within a test's time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.redis_port = services.free_port()
        self.neo4j_port = services.free_port()
        self.settings = Settings(
            broker_url=f"redis://127.0.0.1:{self.redis_port}/0",
            neo4j_uri=f"bolt://127.0.0.1:{self.neo4j_port}",
            spool_dir=root / "spool",
            producer_batch=5,
            trust_mode="open",  # the load's speakers have no owners or grants
            broker_timeout=2.0,
            publish_timeout=1.0,
            task_time_limit=20,
            visibility_timeout=30,
            restore_interval=3,
            # Longer than a load takes to drain on a busy machine: the reconciler re-sends every
            # turn still unsettled after this, and re-sending turns that are merely queued
            # multiplies the backlog (by seven in four minutes of a Neo4j outage at 40 s).
            reconcile_after=120,
            reconcile_interval=5,
            retry_backoff_max=4,
            max_retries=1,
            neo4j_retry_seconds=1.0,
            neo4j_connect_timeout=3.0,
        )
        self.redis: services.Service | None = None
        self.neo4j: services.Service | None = None
        self.workers: list[services.Service] = []
        # Workers ever started: names and logs stay unique when one is removed from `workers`.
        self.started = 0
        self._graph: GraphStore | None = None

    def start_redis(self) -> None:
        self.redis = services.start_redis(
            "127.0.0.1", self.redis_port, self.root / "redis", aof=True
        )

    def stop_redis(self) -> None:
        assert self.redis is not None
        self.redis.stop()

    def start_neo4j(self) -> None:
        self.neo4j = services.start_neo4j(
            "127.0.0.1",
            self.neo4j_port,
            self.root / "neo4j",
            Settings().state_dir,
            heap_mb=768,
            page_cache_mb=128,
        )

    def stop_neo4j(self) -> None:
        assert self.neo4j is not None
        self.neo4j.stop()

    def graph(self) -> GraphStore:
        """One driver for the test process, closed by stop()."""
        if self._graph is None:
            s = self.settings
            self._graph = GraphStore.connect(
                s.neo4j_uri, s.neo4j_user, s.neo4j_password_value, s.neo4j_database
            )
        return self._graph

    def init_graph(self) -> None:
        init_schema(self.graph())

    def start_worker(self) -> services.Service:
        index = self.started
        self.started += 1
        worker = services.start_worker(
            worker_env(self.settings),
            self.root / f"worker-{index}.log",
            name=f"fault-{index}",
            detach=True,  # its own process group, so kill -9 can take the whole worker at once
        )
        self.workers.append(worker)
        return worker

    def kill_worker(self, worker: services.Service) -> None:
        """SIGKILL the worker and its pool children together, as a lost machine would."""
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(10)

    def stop(self) -> None:
        if self._graph is not None:
            self._graph.close()
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.stop()
        for service in (self.neo4j, self.redis):
            if service is not None:
                service.stop()
