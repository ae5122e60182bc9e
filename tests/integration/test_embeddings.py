"""Embeddings against real services: the embed worker drains the backlog off the sync path, the
vectors land in the vector index, `emit --wait` waits for them, and stale text is never marked."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memsync.settings import Settings
from pipeline.embedder import Embedder, labelled, make_embedder
from pipeline.errors import ConfigurationError
from pipeline.graph.embeddings import (
    PendingNode,
    pending_for_episodes,
    require_vector_indexes,
    store,
)
from pipeline.graph.model import EPISODE, VECTOR_INDEXES
from pipeline.graph.store import GraphStore
from schemas.keys import episode_key
from workers.cli.demo import worker_env
from workers.local import services

pytestmark = pytest.mark.integration

HUMAN = {"id": "u-dev", "kind": "human", "display_name": "Devon", "handle": "devon"}
OWNED = {"id": "a-own", "kind": "agent", "owner_id": "u-dev"}  # Devon's own agent: trusted
SAID = [
    "My cat Biscuit is allergic to salmon",
    "The quarterly tax report is due on Friday",
    "Let's book the conference room for the design review",
    "I finally fixed the leaking kitchen tap",
]


def _turns(tenant: str) -> list[dict[str, Any]]:
    return [
        {
            "schema_version": 1,
            "event_id": f"e-{i}",
            "tenant": tenant,
            "channel": {"id": "ch-dm", "kind": "dm"},
            "participants": [HUMAN, OWNED],
            "messages": [
                {
                    "id": f"m-{i}",
                    "role": "human",
                    "sender_id": "u-dev",
                    "content": text,
                    "created_at": f"2026-11-29T10:00:0{i}Z",
                }
            ],
        }
        for i, text in enumerate(SAID)
    ]


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.cli.main", *args],
        env=worker_env(settings),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )


def _emitted(settings: Settings, tenant: str, tmp_path: Path) -> tuple[Embedder, list[str]]:
    """The session's embedder, and the episode keys of SAID once `emit --wait` returned."""
    embedder = make_embedder(settings)
    assert embedder is not None
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in _turns(tenant)))
    done = _cli(settings, "emit", str(path), "--wait", "--timeout", "180")
    assert done.returncode == 0, done.stderr
    return embedder, [episode_key(tenant, "ch-dm", f"m-{i}") for i in range(len(SAID))]


def test_emitted_turns_are_embedded_and_found_by_meaning(
    worker: services.Service, settings: Settings, graph: GraphStore, tenant: str, tmp_path: Path
) -> None:
    embedder, keys = _emitted(settings, tenant, tmp_path)
    # `--wait` returned only once every episode of these turns had its vector.
    assert pending_for_episodes(graph, keys) == 0
    with graph.session(write=False) as session:
        rows = list(
            session.run(
                "UNWIND $keys AS key MATCH (e:Episode {key: key}) "
                "RETURN e.content AS content, e.speaker_label AS speaker, "
                "size(e.embedding) AS size, e.embedded_with AS model, "
                "e.embed_pending AS pending",
                keys=keys,
            )
        )
    assert len(rows) == len(SAID)
    assert {r["size"] for r in rows} == {embedder.dimensions}
    assert {r["model"] for r in rows} == {embedder.model}
    assert {r["pending"] for r in rows} == {None}

    # The vector stored is the labelled text's ("Devon (@devon): ...").
    speaker = rows[0]["speaker"]
    assert speaker == "Devon (@devon)"
    query = embedder.embed([labelled(speaker, "Biscuit the cat cannot eat fish")])[0]
    with graph.session(write=False) as session:
        found = [
            r["content"]
            for r in session.run(
                "CALL db.index.vector.queryNodes($index, 200, $vector) YIELD node, score "
                "WHERE node.tenant = $tenant RETURN node.content AS content ORDER BY score DESC",
                index=VECTOR_INDEXES[EPISODE],
                vector=query,
                tenant=tenant,
            )
        ]
    assert found[0] == SAID[0], found

    stats = _cli(settings, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    shown = json.loads(stats.stdout)
    assert shown["embed.model"] == embedder.model
    assert shown["embed.context"] == ("on" if settings.embed_context else "off")
    assert {f"embed.backlog.{label}" for label in VECTOR_INDEXES} <= shown.keys()
    assert isinstance(shown["embed.lag_seconds"], float) and shown["embed.lag_seconds"] >= 0


def test_a_vector_for_text_that_changed_meanwhile_is_not_stored(
    settings: Settings, graph: GraphStore, tenant: str
) -> None:
    key = f"{tenant}:episode:stale"
    with graph.session() as session:
        session.run(
            "CREATE (e:Episode {key: $key, tenant: $tenant, content: 'new text', "
            "speaker_label: 'Devon (@devon)', embed_pending: true})",
            key=key,
            tenant=tenant,
        ).consume()
    marker = [1.0] + [0.0] * 255
    stale = PendingNode(key=key, text="old text", speaker_label="Devon (@devon)")
    assert store(graph, EPISODE, [stale], [marker], "test-model") == 0
    relabelled = PendingNode(key=key, text="new text", speaker_label="Sam (@sam)")
    assert store(graph, EPISODE, [relabelled], [marker], "test-model") == 0
    with graph.session(write=False) as session:
        record = session.run(
            "MATCH (e:Episode {key: $key}) RETURN e.embedded_with AS model", key=key
        ).single(strict=True)
    # Never our stale vector (an embed worker may have embedded the real text meanwhile).
    assert record["model"] != "test-model"


def test_vector_indexes_of_another_dimension_count_are_refused(
    graph: GraphStore, settings: Settings
) -> None:
    embedder = make_embedder(settings)
    assert embedder is not None
    require_vector_indexes(graph, embedder.dimensions)
    with pytest.raises(ConfigurationError, match="other dimensions than the embedder's 128"):
        require_vector_indexes(graph, 128)


def test_reembed_moves_vectors_of_another_model_to_this_one(
    worker: services.Service, settings: Settings, graph: GraphStore, tenant: str, tmp_path: Path
) -> None:
    embedder, keys = _emitted(settings, tenant, tmp_path)
    # As if an older model had embedded them: same size, another space.
    with graph.session() as session:
        session.run(
            "UNWIND $keys AS key MATCH (e:Episode {key: key}) "
            "SET e.embedded_with = 'older-model', e.embedding = $vector",
            keys=keys,
            vector=[1.0] + [0.0] * (embedder.dimensions - 1),
        ).consume()

    moved = _cli(settings, "graph", "reembed")
    assert moved.returncode == 0, moved.stderr
    assert f"queued for {embedder.model}: Episode " in moved.stdout
    assert "dropped" not in moved.stdout  # the indexes already have these dimensions
    with graph.session(write=False) as session:
        models = session.run(
            "UNWIND $keys AS key MATCH (e:Episode {key: key}) "
            "RETURN collect(e.embedded_with) AS models",
            keys=keys,
        ).single(strict=True)
    # Either still waiting (no vector at all) or already redone by the embed worker.
    assert set(models["models"]) <= {embedder.model}

    # The embed worker's own periodic kick picks them up: no new turn is needed.
    deadline = time.monotonic() + 120
    while pending_for_episodes(graph, keys) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the embed worker's backlog, bounded by the deadline
    assert pending_for_episodes(graph, keys) == 0
    with graph.session(write=False) as session:
        rows = list(
            session.run(
                "UNWIND $keys AS key MATCH (e:Episode {key: key}) "
                "RETURN e.embedded_with AS model, e.embedding[0] AS first",
                keys=keys,
            )
        )
    assert {r["model"] for r in rows} == {embedder.model}
    assert all(r["first"] != 1.0 for r in rows)
    again = _cli(settings, "graph", "reembed")
    assert again.returncode == 0, again.stderr
    assert "Episode 0," in again.stdout  # nothing left from another model
