"""A bench's own Redis (AOF) and Neo4j on free loopback ports, and the settings that reach them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsync.settings import Settings
from pipeline.graph.store import GraphStore
from workers.local import services


@dataclass
class LocalServices:
    """What `start_local` started; `stop()` ends it all."""

    settings: Settings
    redis: services.Service
    neo4j: services.Service
    graph: GraphStore

    def stop(self) -> None:
        self.graph.close()
        self.neo4j.stop()
        self.redis.stop()


def start_local(root: Path, **overrides: Any) -> LocalServices:
    """Redis and Neo4j under `root`, and Settings for them (trust open: the benches' speakers
    have no owners or grants) with `overrides` applied."""
    redis_port, neo4j_port = services.free_port(), services.free_port()
    settings = Settings(
        broker_url=f"redis://127.0.0.1:{redis_port}/0",
        neo4j_uri=f"bolt://127.0.0.1:{neo4j_port}",
        spool_dir=root / "spool",
        trust_mode="open",
        **overrides,
    )
    redis = services.start_redis("127.0.0.1", redis_port, root / "redis", aof=True)
    try:
        neo4j = services.start_neo4j("127.0.0.1", neo4j_port, root / "neo4j", Settings().state_dir)
    except BaseException:
        redis.stop()
        raise
    graph = GraphStore.connect(settings.neo4j_uri, "neo4j", None, "neo4j")
    return LocalServices(settings, redis, neo4j, graph)
