"""MiniLM on onnxruntime gives numpy's vectors (so a graph embedded by either needs no
re-embedding), numpy stands in where onnxruntime cannot be imported, and the hand-written
protobuf encodes as the wire format says."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pipeline import onnxproto
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


def test_onnxruntime_and_numpy_give_the_same_vectors(onnx_embedder: MiniLMEmbedder) -> None:
    reference = np.array(MiniLMEmbedder(runtime="numpy").embed(TEXTS))
    batched = np.array(onnx_embedder.embed(TEXTS))  # padded batch, every core
    alone = np.array([onnx_embedder.embed([t])[0] for t in TEXTS])  # one thread each
    assert np.abs(batched - reference).max() < 1e-5
    assert np.abs(alone - reference).max() < 1e-5
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
