"""MiniLM on onnxruntime gives numpy's vectors (so a graph embedded by either needs no
re-embedding), numpy stands in where onnxruntime cannot be imported, and the hand-written
protobuf encodes as the wire format says."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from memsync.settings import Settings
from pipeline import onnxproto
from pipeline.embedder import WordLlamaEmbedder, make_embedder
from pipeline.errors import ConfigurationError
from pipeline.minilm import MiniLMEmbedder, NumpyEncoder, make_encoder
from pipeline.minilmgraph import OnnxEncoder

TEXTS = [
    "the flight to Lisbon leaves at nine",
    "Devon (@devon): I prefer window seats",
    # Past the model's 256 word pieces: truncated the same way on both runtimes.
    "a much longer message about something else entirely, " * 40,
    "ok",
    "",
]


@pytest.fixture(scope="module")
def onnx_embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_onnxruntime_is_the_default_runtime(onnx_embedder: MiniLMEmbedder) -> None:
    onnx_embedder.embed(["load"])
    encoder, _ = onnx_embedder._model()
    assert isinstance(encoder, OnnxEncoder)


class _CountingEncoder(OnnxEncoder):
    """Sessions as plain objects, each one made recorded with its thread count and graph."""

    def __init__(
        self,
        *,
        batches: bool = False,
        quantized_queries: bool = False,
        quantized_batches: bool = False,
    ) -> None:
        super().__init__(
            lambda quantized: b"graph",
            batches=batches,
            quantized_queries=quantized_queries,
            quantized_batches=quantized_batches,
        )
        self.made: list[int] = []
        self.quantized: list[bool] = []

    def _make(self, threads: int, *, quantized: bool) -> object:
        self.made.append(threads)
        self.quantized.append(quantized)
        return object()


def test_one_session_at_a_time() -> None:
    """The query session goes when the batch session comes: each holds its own copy of the
    weights."""
    encoder = _CountingEncoder()
    query = encoder.session(small=True)
    assert encoder.session(small=True) is query
    batch = encoder.session(small=False)
    assert batch is not query
    assert encoder.session(small=True) is batch
    assert encoder.session(small=False) is batch
    assert len(encoder.made) == 2
    # A query on at most two threads; a batch on every core.
    assert encoder.made == [min(2, len(os.sched_getaffinity(0))), len(os.sched_getaffinity(0))]
    assert encoder.quantized == [False, False]


def test_only_a_readers_query_session_is_quantised() -> None:
    """Stored vectors always come from the float graph: a batch session never runs int8, nor
    does an embed worker's encoder (`batches`) even for a single short text."""
    reader = _CountingEncoder(quantized_queries=True)
    reader.session(small=True)
    reader.session(small=False)
    assert reader.quantized == [True, False]
    worker = _CountingEncoder(batches=True, quantized_queries=True)
    worker.session(small=True)
    assert worker.quantized == [False]


def test_a_quantised_query_keeps_the_float_vectors_direction() -> None:
    """int8 weights move a query's vector by about 0.005 in cosine (a one-word text by up to
    about 0.035: its few tokens' outliers set the whole input's scale), and what is close stays
    closest: each text's quantised vector is nearest its own float vector."""
    reference = np.array(MiniLMEmbedder(runtime="numpy").embed(TEXTS))
    quantised = MiniLMEmbedder(quantized_queries=True)
    alone = np.array([quantised.embed([t])[0] for t in TEXTS[:2] + TEXTS[3:4]])
    chosen = reference[[0, 1, 3]]
    similarity = alone @ chosen.T
    assert np.diag(similarity)[:2].min() > 0.99
    assert np.diag(similarity).min() > 0.95
    # Not the float vectors themselves: the int8 graph really ran.
    assert np.abs(alone - chosen).max() > 1e-4
    assert (similarity.argmax(axis=1) == np.arange(3)).all()
    encoder, _ = quantised._model()
    assert isinstance(encoder, OnnxEncoder) and encoder._quantized_queries


def test_onnxruntime_and_numpy_give_the_same_vectors() -> None:
    reference = np.array(MiniLMEmbedder(runtime="numpy").embed(TEXTS))
    fresh = MiniLMEmbedder()
    # Queries first (the one-thread session), then a padded batch (the session on every core,
    # which serves queries too from then on).
    alone = np.array([fresh.embed([t])[0] for t in TEXTS])
    batched = np.array(fresh.embed(TEXTS))
    after = np.array([fresh.embed([t])[0] for t in TEXTS])
    for vectors in (alone, batched, after):
        assert np.abs(vectors - reference).max() < 1e-5
    # Not trivially equal: the texts' vectors differ from one another.
    assert float(reference[0] @ reference[1]) < 0.9


def test_numpy_stands_in_without_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # the import now fails
    assert isinstance(make_encoder({}, "onnx"), NumpyEncoder)
    assert isinstance(make_encoder({}, "numpy"), NumpyEncoder)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (150, b"\x96\x01"),
        (300, b"\xac\x02"),
        (-1, b"\xff" * 9 + b"\x01"),  # int64 -1 as its two's complement, ten bytes
    ],
)
def test_varints_as_the_protobuf_encoding_guide_gives_them(value: int, wire: bytes) -> None:
    assert onnxproto._varint(value) == wire


def test_a_tensor_carries_its_dims_type_name_and_little_endian_data() -> None:
    encoded = onnxproto.tensor("t", np.array([[1, 2]], dtype=np.int64))
    # dims 1 and 2 (field 1), data_type INT64 (field 2), name "t" (field 8), 16 raw bytes (9).
    assert encoded == (
        b"\x08\x01\x08\x02\x10\x07" + b"\x42\x01t" + b"\x4a\x10" + np.array([1, 2], "<i8").tobytes()
    )


def test_a_one_shot_process_gets_numpy_and_a_long_lived_one_onnxruntime() -> None:
    """The CLI's recall embeds one query and exits: numpy is ready sooner than a session."""
    one_shot = make_embedder(Settings(), use="once")
    long_lived = make_embedder(Settings())
    assert isinstance(one_shot, MiniLMEmbedder) and isinstance(long_lived, MiniLMEmbedder)
    one_shot.embed(["load"])
    assert isinstance(one_shot._model()[0], NumpyEncoder)
    assert isinstance(make_embedder(Settings(embedder="wordllama"), use="once"), WordLlamaEmbedder)


def test_a_readers_batch_is_float_even_when_it_comes_first() -> None:
    """The graph made from the loaded weights serves the first session in that session's own
    precision: a reader whose first call is a batch runs it in float, then stays there."""
    reference = np.array(MiniLMEmbedder(runtime="numpy").embed(TEXTS))
    reader = MiniLMEmbedder(quantized_queries=True)
    batched = np.array(reader.embed(TEXTS))
    alone = np.array([reader.embed([t])[0] for t in TEXTS])
    for vectors in (batched, alone):
        assert np.abs(vectors - reference).max() < 1e-5


def test_a_reader_quantises_its_queries_and_an_embed_worker_never() -> None:
    reader = make_embedder(Settings())
    exact_reader = make_embedder(Settings(quantized_queries=False))
    worker = make_embedder(Settings(), use="batches")
    assert isinstance(reader, MiniLMEmbedder) and reader._quantized_queries
    assert isinstance(exact_reader, MiniLMEmbedder) and not exact_reader._quantized_queries
    assert isinstance(worker, MiniLMEmbedder) and not worker._quantized_queries


def test_an_int8_embed_worker_runs_int8_throughout_and_names_its_vectors_so() -> None:
    """MEMSYNC_EMBED_QUANTIZED: every session of the worker's encoder is int8, its vectors
    carry a model name of their own, and they stay near the float ones."""
    encoder = _CountingEncoder(batches=True, quantized_batches=True)
    encoder.session(small=True)
    reader = _CountingEncoder(quantized_batches=True)
    reader.session(small=True)
    reader.session(small=False)
    assert encoder.quantized == [True] and reader.quantized == [True, True]

    worker = make_embedder(Settings(embed_quantized=True), use="batches")
    float_worker = make_embedder(Settings(), use="batches")
    assert isinstance(worker, MiniLMEmbedder) and isinstance(float_worker, MiniLMEmbedder)
    assert worker.model == float_worker.model + "+int8"
    # A reader's model is unchanged by the setting: it stores nothing.
    reader_embedder = make_embedder(Settings(embed_quantized=True))
    assert isinstance(reader_embedder, MiniLMEmbedder) and not reader_embedder._quantized
    texts = TEXTS[:2]
    int8 = np.array(worker.embed(texts))
    exact = np.array(float_worker.embed(texts))
    assert (int8 * exact).sum(axis=1).min() > 0.98
    assert np.abs(int8 - exact).max() > 1e-4


def test_int8_vectors_need_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="needs onnxruntime"):
        MiniLMEmbedder(runtime="numpy", quantized=True)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # the import now fails
    with pytest.raises(ConfigurationError, match="MEMSYNC_EMBED_QUANTIZED needs onnxruntime"):
        MiniLMEmbedder(quantized=True).embed(["x"])
