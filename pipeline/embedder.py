"""Embedders: text to unit vectors for the vector index. Recall works without one (keyword only)."""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol

from pipeline.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

    from memsync.settings import Settings


# What a process will embed, which decides how MiniLM runs (make_embedder).
EmbedderUse = Literal["queries", "batches", "once"]


class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed size; one instance per process."""

    @property
    def model(self) -> str:
        """A stable name of the model and its version, stored beside each embedding."""
        ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; batches are the caller's to size."""
        ...


def labelled(speaker_label: str | None, text: str) -> str:
    """What is indexed: who said it together with what was said ("Name (@handle): text")."""
    return f"{speaker_label}: {text}" if speaker_label else text


# The 256-dimension "l2_supercat" static embeddings and their tokenizer ship inside the wheel.
WORDLLAMA_CONFIG: Final = "l2_supercat"
WORDLLAMA_DIMENSIONS: Final = 256
_WEIGHTS: Final = f"weights/{WORDLLAMA_CONFIG}_{WORDLLAMA_DIMENSIONS}.safetensors"
_TOKENIZER: Final = f"tokenizers/{WORDLLAMA_CONFIG}_tokenizer_config.json"
_TENSOR: Final = "embedding.weight"
# Mean pooling over more tokens than this changes little; a huge message then costs no more.
MAX_TOKENS: Final = 512


class _Model:
    """The loaded token-embedding table and tokenizer."""

    def __init__(self, table: NDArray[np.float32], tokenizer: Tokenizer) -> None:
        self.table = table
        self.tokenizer = tokenizer


def package_dir(module: str, missing: str) -> Path:
    """Where a model wheel put its files, found without importing the package (wordllama's
    `__init__` configures the root logger; the MiniLM wheel's would want sentence-transformers).
    `missing` says how to install it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(missing)
    return Path(next(iter(spec.submodule_search_locations)))


def _load() -> _Model:
    """Read the bundled files only: wordllama's own loader looks for the tokenizer in a folder
    the wheel does not have and would download it from Hugging Face instead."""
    import numpy as np
    from safetensors import safe_open
    from tokenizers import Tokenizer

    root = package_dir(
        "wordllama",
        "MEMSYNC_EMBEDDER=wordllama needs the `wordllama` package "
        "(pip install wordllama), or set MEMSYNC_EMBEDDER=none",
    )
    weights, tokenizer_file = root / _WEIGHTS, root / _TOKENIZER
    for path in (weights, tokenizer_file):
        if not path.is_file():
            raise ConfigurationError(f"the wordllama package lacks its bundled {path.name}")
    with safe_open(str(weights), framework="np") as f:
        table = np.ascontiguousarray(f.get_tensor(_TENSOR), dtype=np.float32)
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return _Model(table, tokenizer)


class WordLlamaEmbedder:
    """WordLlama static token embeddings (256 dimensions), mean-pooled and unit-normalised.

    The weights load on the first `embed`, so a worker's main process never loads them and
    each pool child loads its own copy after fork.
    """

    def __init__(self) -> None:
        self._model: _Model | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        try:
            version = metadata.version("wordllama")
        except metadata.PackageNotFoundError:
            version = "unknown"
        return f"wordllama-{version}/{WORDLLAMA_CONFIG}_{WORDLLAMA_DIMENSIONS}"

    @property
    def dimensions(self) -> int:
        return WORDLLAMA_DIMENSIONS

    def _loaded(self) -> _Model:
        with self._lock:
            if self._model is None:
                self._model = _load()
            return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        if not texts:
            return []
        model = self._loaded()
        encoded = model.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        # Summed per text (no padding to the batch's longest): the direction is the mean's.
        summed = np.zeros((len(encoded), self.dimensions), dtype=np.float32)
        for row, enc in enumerate(encoded):
            if enc.ids:
                summed[row] = model.table[enc.ids].sum(axis=0)
        norms = np.linalg.norm(summed, axis=1, keepdims=True)
        # An empty text has no tokens; any fixed unit vector keeps the index's contract.
        empty = norms[:, 0] == 0
        summed[empty] = 1.0
        norms[empty] = np.sqrt(self.dimensions)
        vectors: list[list[float]] = (summed / norms).tolist()
        return vectors


def query_precision(settings: Settings) -> str:
    """How a reader embeds its queries under `settings` ("int8" or "float"), for reports."""
    return "int8" if settings.embedder == "minilm" and settings.quantized_queries else "float"


def make_embedder(settings: Settings, *, use: EmbedderUse = "queries") -> Embedder | None:
    """The configured embedder (MEMSYNC_EMBEDDER), or None when embeddings are off.

    `use` says what the process will embed. "queries": a reader (recall, build_context); MiniLM
    runs each on at most two threads, in int8 unless `quantized_queries` is off. "batches": an embed
    worker; MiniLM runs on every core from the start (float unless `embed_quantized`). "once":
    a process that embeds one query and exits (the CLI's `recall` and `context`); MiniLM runs
    on numpy, ready in about a quarter of the second onnxruntime needs to build its session,
    for a few milliseconds more on the query.
    """
    if settings.embedder == "none":
        return None
    if settings.embedder == "wordllama":
        return WordLlamaEmbedder()
    from pipeline.minilm import MiniLMEmbedder

    if use == "once":
        return MiniLMEmbedder(runtime="numpy")
    if use == "batches":
        return MiniLMEmbedder(batches=True, quantized=settings.embed_quantized)
    return MiniLMEmbedder(
        quantized_queries=settings.quantized_queries, remember=settings.recall_query_vectors
    )


class Remembered:
    """The vectors of the latest `size` distinct texts embedded one at a time (a reader's
    queries), least recently used out first; thread-safe. Each caller gets its own copy."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> list[float] | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is None:
                return None
            self._vectors.move_to_end(text)
            return list(vector)

    def put(self, text: str, vector: Sequence[float]) -> None:
        with self._lock:
            self._vectors[text] = tuple(vector)
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
