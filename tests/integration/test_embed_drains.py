"""Several embed drains at once, on a real Redis and Neo4j: they claim apart (no node embedded by
two of them), a claim expires by itself, lease slots bound how many run, and together they
leave nothing pending."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

import pytest
import redis

from memsync import keys
from memsync.settings import Settings
from pipeline.embedder import Embedder, labelled, make_embedder
from pipeline.graph.embeddings import pending_for_episodes
from pipeline.graph.store import GraphStore
from pipeline.minilm import INT8_SUFFIX
from workers.worker import embedding
from workers.worker.embedding import LEASE_SECONDS, SETTLED_CLAIM_SECONDS, claimer, drain

pytestmark = pytest.mark.integration


@pytest.fixture()
def client(fresh_redis: redis.Redis) -> redis.Redis:
    return fresh_redis


def test_two_claimers_on_one_page_take_apart(client: redis.Redis) -> None:
    page = [f"t:episode:c:m-{i}" for i in range(10)]
    first = claimer(client, "drain-a")(page, 4)
    second = claimer(client, "drain-b")(page, 4)
    assert first == page[:4]
    assert second == page[4:8]
    # What is left is the last two, whatever the most asked.
    assert claimer(client, "drain-c")(page, 10) == page[8:]
    assert claimer(client, "drain-d")(page, 10) == []
    ttl = client.ttl(keys.embed_claim(page[0]))
    assert 0 < ttl <= LEASE_SECONDS
    assert client.get(keys.embed_claim(page[5])) == b"drain-b"
    client.delete(keys.embed_claim(page[0]))  # as when the claim expires
    assert claimer(client, "drain-d")(page, 10) == [page[0]]


def test_a_settled_claim_is_kept_only_briefly_and_only_by_its_drain(client: redis.Redis) -> None:
    """A node stored and queued again soon (a reembed, an edit) waits seconds for the next
    drain, not the rest of the lease; settling never touches another drain's claim."""
    page = [f"t:episode:s:m-{i}" for i in range(6)]
    first = claimer(client, "drain-a")
    assert first(page, 3) == page[:3]
    assert claimer(client, "drain-b")(page, 3) == page[3:]
    client.delete(keys.embed_claim(page[0]))  # as when a claim expires...
    assert claimer(client, "drain-c")(page, 1) == [page[0]]  # ...and another drain takes it
    first.settle()
    settled = [client.ttl(keys.embed_claim(k)) for k in page[1:3]]
    assert all(0 < ttl <= SETTLED_CLAIM_SECONDS for ttl in settled), settled
    assert client.get(keys.embed_claim(page[1])) == b"drain-a"  # still held meanwhile
    untouched = [client.ttl(keys.embed_claim(k)) for k in (page[0], *page[3:])]
    assert all(SETTLED_CLAIM_SECONDS < ttl <= LEASE_SECONDS for ttl in untouched), untouched
    assert client.get(keys.embed_claim(page[0])) == b"drain-c"
    first.settle()  # nothing new held: no round trip, nothing changes
    assert client.get(keys.embed_claim(page[1])) == b"drain-a"


def test_lease_slots_bound_the_drains_at_once(client: redis.Redis) -> None:
    held = [embedding._lease(client, 2), embedding._lease(client, 2)]
    assert all(lease is not None for lease in held)
    assert embedding._lease(client, 2) is None
    assert held[0] is not None
    held[0].release()
    again = embedding._lease(client, 2)
    assert again is not None
    for lease in (again, held[1]):
        assert lease is not None
        lease.release()


class Recording:
    """The session's embedder, remembering every text it was given."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.texts: list[str] = []

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed(texts)


def test_drains_at_once_embed_apart_and_leave_nothing_pending(
    graph: GraphStore, settings: Settings, client: redis.Redis
) -> None:
    tenant = f"d{uuid.uuid4().hex[:12]}"
    # More than the session's own embed worker takes in one batch (256): it drains the same
    # graph with claims in another Redis, so both drains here still get part of the work.
    node_keys = [f"{tenant}:episode:ch:m-{i}" for i in range(600)]
    with graph.session() as session:
        session.run(
            "UNWIND range(0, size($keys) - 1) AS i "
            "CREATE (:Episode {key: $keys[i], tenant: $tenant, "
            "content: 'message number ' + toString(i) + ' of ' + $tenant, "
            "speaker_label: 'Devon (@devon)', embed_pending: true})",
            keys=node_keys,
            tenant=tenant,
        ).consume()
    made = make_embedder(settings, use="batches")
    assert made is not None
    drains = [Recording(made), Recording(made)]

    def run(recording: Recording, token: str) -> None:
        while True:
            read, _, _ = drain(
                graph, recording, 32, claim=claimer(client, token), drainers=2, run_seconds=60
            )
            if not read:
                return

    threads = [threading.Thread(target=run, args=(d, f"drain-{n}")) for n, d in enumerate(drains)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not any(thread.is_alive() for thread in threads)

    ours = [[t for t in d.texts if tenant in t] for d in drains]
    # Each of this tenant's messages was embedded by one drain only (the session's own embed
    # worker may have taken some too), and both drains did part of the work.
    assert not set(ours[0]) & set(ours[1])
    assert len(ours[0]) == len(set(ours[0])) and len(ours[1]) == len(set(ours[1]))
    assert all(ours)
    assert pending_for_episodes(graph, node_keys) == 0


def test_an_int8_drain_stores_its_vectors_under_its_own_model_name(
    graph: GraphStore, settings: Settings
) -> None:
    """MEMSYNC_EMBED_QUANTIZED: what an int8 drain stores is named as int8 (so reembed and
    stats can tell it apart) and lies within a small angle of the float vector."""
    tenant = f"q{uuid.uuid4().hex[:12]}"
    subjects = ["the invoice", "the deploy", "the flight", "the refund", "the seat", "the hotel"]
    contents = [f"{tenant} asks about {s}, number {i}" for i, s in enumerate(subjects * 3)]
    node_keys = [f"{tenant}:episode:ch:m-{i}" for i in range(len(contents))]
    # The session's embed worker (float) drains the same graph: every node is claimed in the
    # session's Redis before it exists, so that worker can never take one and this drain is
    # the author of all of them (drains sharing nodes: the test above).
    client = redis.Redis.from_url(settings.broker_url)
    try:
        held = claimer(client, f"int8-{tenant}")(node_keys, len(node_keys))
    finally:
        client.close()
    assert held == node_keys

    def claim(keys: Sequence[str], most: int) -> list[str]:
        return [k for k in keys if k in held][:most]

    with graph.session() as session:
        session.run(
            "UNWIND range(0, size($keys) - 1) AS i "
            "CREATE (:Episode {key: $keys[i], tenant: $tenant, content: $contents[i], "
            "speaker_label: 'Devon (@devon)', embed_pending: true})",
            keys=node_keys,
            tenant=tenant,
            contents=contents,
        ).consume()
    quantized = make_embedder(settings.model_copy(update={"embed_quantized": True}), use="batches")
    full = make_embedder(settings, use="batches")
    assert quantized is not None and full is not None
    assert quantized.model == full.model + INT8_SUFFIX
    recording = Recording(quantized)
    while drain(graph, recording, 8, claim=claim, in_context=False)[0]:
        pass
    assert pending_for_episodes(graph, node_keys) == 0
    with graph.session() as session:
        stored = {
            r["content"]: (r["model"], r["embedding"])
            for r in session.run(
                "MATCH (n:Episode) WHERE n.tenant = $tenant "
                "RETURN n.content AS content, n.embedded_with AS model, n.embedding AS embedding",
                tenant=tenant,
            )
        }
    assert set(stored) == set(contents)
    for content in contents:
        assert any(content in text for text in recording.texts), content
        model, vector = stored[content]
        assert model == quantized.model, content
        reference = full.embed([labelled("Devon (@devon)", content)])[0]
        cosine = sum(a * b for a, b in zip(vector, reference, strict=True))
        assert cosine > 0.95, (content, model, cosine)
