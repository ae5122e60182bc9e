"""A reader's memory of recent query vectors: the same question embedded once, the answer the
model's own, each caller's copy its own."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memsync.settings import Settings
from pipeline.embedder import Remembered, make_embedder
from pipeline.minilm import MiniLMEmbedder


def counting(embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many texts reach the model, one entry per call that does."""
    calls: list[int] = []
    run = embedder._embed

    def spy(texts: Sequence[str]) -> list[list[float]]:
        calls.append(len(texts))
        return run(texts)

    monkeypatch.setattr(embedder, "_embed", spy)
    return calls


def test_a_reader_embeds_a_repeated_question_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = make_embedder(Settings())
    assert isinstance(reader, MiniLMEmbedder)
    calls = counting(reader, monkeypatch)
    first = reader.embed(["what's our prod region?"])
    again = reader.embed(["what's our prod region?"])
    assert again == first and calls == [1]
    # A batch is never a query: it goes to the model, and is not kept.
    reader.embed(["what's our prod region?", "which card is on file?"])
    reader.embed(["which card is on file?"])
    assert calls == [1, 2, 1]


def test_remembered_vectors_are_the_models_own() -> None:
    remembering = MiniLMEmbedder(quantized_queries=True, remember=4)
    plain = MiniLMEmbedder(quantized_queries=True)
    remembering.embed(["when is the loan debited?"])
    assert remembering.embed(["when is the loan debited?"]) == plain.embed(
        ["when is the loan debited?"]
    )


def test_off_means_every_question_reaches_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = make_embedder(Settings(recall_query_vectors=0))
    assert isinstance(reader, MiniLMEmbedder)
    calls = counting(reader, monkeypatch)
    reader.embed(["what's our prod region?"])
    reader.embed(["what's our prod region?"])
    assert calls == [1, 1]


def test_the_least_recently_used_goes_first_and_copies_stay_apart() -> None:
    kept = Remembered(2)
    kept.put("a", [1.0, 0.0])
    kept.put("b", [0.0, 1.0])
    assert kept.get("a") == [1.0, 0.0]  # "a" is now the more recent
    kept.put("c", [0.6, 0.8])
    assert kept.get("b") is None
    assert kept.get("a") == [1.0, 0.0] and kept.get("c") == [0.6, 0.8]
    mine = kept.get("a")
    assert mine is not None
    mine[0] = 9.0
    assert kept.get("a") == [1.0, 0.0]


def test_the_setting_refuses_a_negative_size() -> None:
    with pytest.raises(ValueError, match="recall_query_vectors"):
        Settings(recall_query_vectors=-1)
