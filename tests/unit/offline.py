"""Settings whose Redis and Neo4j are at port 1 (connection refused at once), for the HTTP app's
unit tests: a call that reaches a service answers 503, an accepted turn lands in the spool."""

from __future__ import annotations

from pathlib import Path

from memsync.settings import Settings


def offline_settings(tmp_path: Path, token: str | None) -> Settings:
    return Settings(
        broker_url="redis://127.0.0.1:1/0",
        neo4j_uri="bolt://127.0.0.1:1",
        spool_dir=tmp_path / "spool",
        embedder="none",
        api_token=token,
        publish_timeout=0.5,
        neo4j_connect_timeout=1.0,
        neo4j_retry_seconds=0.0,
    )
