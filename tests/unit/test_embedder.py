"""The offline embedder: fixed dimensions, unit vectors, deterministic, meaning over wording; and
the embed kick, which embeddings switched off (or no embed worker) must never send."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator

import fakeredis
import pytest

from memsync import keys
from memsync.settings import Settings
from pipeline.embedder import WordLlamaEmbedder, labelled, make_embedder
from pipeline.graph.cypher.embed import vector_index_statements
from workers.worker.embedding import kick


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_have_the_declared_dimensions_and_unit_length(embedder: WordLlamaEmbedder) -> None:
    vectors = embedder.embed(["Devon (@devon): I prefer window seats", "", "ok"])
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == embedder.dimensions == 256
        assert all(math.isfinite(x) for x in vector)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)
    assert embedder.embed([]) == []


def test_same_text_same_vector_whatever_the_batch(embedder: WordLlamaEmbedder) -> None:
    alone = embedder.embed(["the flight to Lisbon leaves at nine"])[0]
    batched = embedder.embed(["something else entirely", "the flight to Lisbon leaves at nine"])[1]
    assert alone == pytest.approx(batched, abs=1e-6)


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: WordLlamaEmbedder) -> None:
    query, paraphrase, unrelated = embedder.embed(
        [
            "I like to sit by the window on planes",
            "I prefer window seats when I fly",
            "the quarterly tax report is due on Friday",
        ]
    )
    assert _cos(query, paraphrase) > _cos(query, unrelated) + 0.2


def test_the_speaker_label_is_part_of_what_is_embedded(embedder: WordLlamaEmbedder) -> None:
    assert labelled("Devon (@devon)", "hi") == "Devon (@devon): hi"
    assert labelled(None, "hi") == "hi"
    assert labelled("", "hi") == "hi"
    plain, with_devon, with_sarah = embedder.embed(
        ["hi", labelled("Devon (@devon)", "hi"), labelled("Sarah (@sarah)", "hi")]
    )
    assert _cos(with_devon, with_sarah) < 0.999
    assert _cos(plain, with_devon) < 0.999


def test_loading_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network used: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fresh = WordLlamaEmbedder()
    assert len(fresh.embed(["offline"])[0]) == 256
    assert fresh.model.startswith("wordllama-") and fresh.model.endswith("/l2_supercat_256")


def test_none_turns_the_embedder_off() -> None:
    assert make_embedder(Settings(embedder="none")) is None
    made = make_embedder(Settings(embedder="wordllama"))
    assert made is not None and made.dimensions == 256


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "256"])
def test_vector_index_dimensions_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        vector_index_statements(bad)  # type: ignore[arg-type]


def test_vector_index_statements_name_every_index_and_the_dimensions() -> None:
    statements = vector_index_statements(256)
    assert len(statements) == 4
    assert all("`vector.dimensions`: 256" in s and "'cosine'" in s for s in statements)
    assert any("episode_embedding" in s and "(n:Episode)" in s for s in statements)


@pytest.fixture()
def client() -> Iterator[fakeredis.FakeRedis]:
    c = fakeredis.FakeRedis()
    yield c
    c.close()


def test_kick_is_sent_once_per_window_while_an_embed_worker_runs(
    client: fakeredis.FakeRedis,
) -> None:
    sent: list[int] = []
    settings = Settings(embedder="wordllama")
    assert not kick(client, settings, lambda: sent.append(1))  # no embed worker: no kick
    client.set(keys.EMBED_WORKERS, b"w1", ex=30)
    assert kick(client, settings, lambda: sent.append(1))
    assert not kick(client, settings, lambda: sent.append(1))  # deduplicated
    assert sent == [1]
    client.delete(keys.EMBED_KICK)  # the window passed
    assert kick(client, settings, lambda: sent.append(1))
    assert sent == [1, 1]


def test_no_kick_with_embeddings_off(client: fakeredis.FakeRedis) -> None:
    sent: list[int] = []
    client.set(keys.EMBED_WORKERS, b"w1", ex=30)
    assert not kick(client, Settings(embedder="none"), lambda: sent.append(1))
    assert sent == []
    assert not client.exists(keys.EMBED_KICK)
