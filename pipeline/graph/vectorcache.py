"""Vectors of each agent's scope held in the reading process, so recall's cosine is one matrix
product instead of Neo4j reading every vector row by row (about 20 us a row in its Community
runtime: 60 ms for an agent's 30k messages, where numpy takes 3).

Each vector is held in int8 with a scale (pipeline/graph/quantised.py): a quarter of float32's
memory, and the product reads it in about half the time.

The cache only proposes candidates: recall sends their keys back to Neo4j, whose statement
applies the agent's whole scope (observed, channel, tenant, audience, current) and returns the
rows. So a stale cache can cost a result, never leak one. It stays fresh by reading, on every
use, what was embedded after its watermark (`embedded_at`, a range index; now and then a short
margin behind it, for transactions that committed out of order) and reloads whole every
RELOAD_SECONDS (longer for a scope slow to read), which drops what was deleted. Bounded by a
byte budget; the least recently used scopes go first, and a scope that does not fit is not
cached (recall asks Neo4j as before).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from pipeline.graph.cypher import vectors as cypher
from pipeline.graph.quantised import Cosines, quantise

Group = Literal["episode", "memory"]
# Cosines of int8 rows (with their scales) and a unit query, however they are computed.
Product = Callable[
    [npt.NDArray[np.int8], npt.NDArray[np.float32], npt.NDArray[np.float32]],
    npt.NDArray[np.float32],
]
# Runs a statement with its parameters and yields its records (key, embedding, channel_key, at).
Rows = Callable[[str, dict[str, Any]], Iterable[Any]]

# A whole reload this often: what was deleted (forgotten, expired) leaves the cache, and
# anything an out-of-order commit hid from the watermark comes in.
RELOAD_SECONDS: Final = 300.0
# ...or, for a scope whose whole read took long (an agent with hundreds of thousands of
# vectors reads for a minute or more), this many times that long: reloads then cost at most
# about 2 % of a thread and of Neo4j, whatever the size. Deleted vectors stay that much longer;
# they are never shown (Neo4j checks every proposed key), they only take a candidate's place.
RELOAD_COST_FACTOR: Final = 50.0
# Each use reads what was stamped after the newest vector it has seen; every RECHECK_SECONDS
# it reads again from MARGIN_MS behind that: an embed transaction stamps `embedded_at` when it
# runs and may commit a little after a later one. (Re-reading the margin on every use cost a
# whole embed batch's rows each time.)
RECHECK_SECONDS: Final = 10.0
MARGIN_MS: Final = 5000
# Whole reads running at once in one reader: the rest wait their turn, so on a cold reader of
# many large agents the first scopes are in after one read's time rather than all after the
# sum (and the pages in flight, and Neo4j's share of the cores, stay bounded).
WHOLE_READS_AT_ONCE: Final = 2
# A product over a scope of more elements than this (rows x dimensions) runs in two halves, the
# second on a helper thread, each on one thread. Measured alone in float32: an agent's 333k
# vectors of 256 dimensions (1M episodes) took 38 ms on one thread and 23 split, at 4 ms more
# CPU; smaller products gained less than the second core cost (35.6k x 384: 6.3 ms on one
# thread, 4.7 split at twice the CPU). In int8 (bench/vectorproduct.py), 333k x 384 took 29.7
# ms whole and 28.9 split on a box whose two cores gained nothing from splitting it.
SPLIT_ELEMENTS: Final = 64_000_000
# A background read that failed (Neo4j away, say) is tried again no sooner than this.
LOAD_RETRY_SECONDS: Final = 10.0
_INITIAL_ROWS: Final = 1024
# A whole read is turned into int8 rows this many at a time: the driver's records (a Python
# float list per vector, ~30x the matrix's bytes) never pile up beyond one page.
PAGE_ROWS: Final = 4096

log = logging.getLogger(__name__)


@dataclass
class _Scope:
    """One agent's vectors of one group, unit length, a row each; rows only ever added or
    overwritten, so readers under the lock see a consistent matrix."""

    dimensions: int
    matrix: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]  # the row's vector is about its int8 row times this
    tags: npt.NDArray[np.int32]  # the row's channel (episodes) or label (memories), coded
    stamps: npt.NDArray[np.int64]  # the row's `embedded_at`
    keys: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    watermark: int = 0
    loaded_at: float = 0.0
    load_seconds: float = 0.0  # how long the last whole read took
    checked_at: float = 0.0
    # Every vector stamped before this (Neo4j's clock, ms) was committed and read by the last
    # margin check: the next one starts here if that is later than the margin.
    settled_ms: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.scales.nbytes + self.tags.nbytes + self.stamps.nbytes)

    @property
    def used_bytes(self) -> int:
        """What the rows held take, without the room kept for growth."""
        row = (
            self.matrix.itemsize * self.dimensions
            + self.scales.itemsize
            + self.tags.itemsize
            + self.stamps.itemsize
        )
        return len(self.keys) * row

    def trim(self) -> None:
        """Give back the room kept for growth (after a whole read, whose size is now known)."""
        count = len(self.keys)
        if count < len(self.matrix):
            self.matrix = self.matrix[:count].copy()
            self.scales = self.scales[:count].copy()
            self.tags = self.tags[:count].copy()
            self.stamps = self.stamps[:count].copy()

    def put(self, records: Iterable[Any]) -> bool:
        """Add or overwrite rows (records with key, embedding, channel_key, at); False if a
        vector of another size came (the model changed: the scope must be rebuilt)."""
        keys: list[str] = []
        vectors: list[Any] = []
        tags: list[int] = []
        stamps: list[int] = []
        for record in records:
            if len(record["embedding"]) != self.dimensions:
                return False
            keys.append(record["key"])
            vectors.append(record["embedding"])
            tags.append(self.codes.setdefault(str(record["channel_key"]), len(self.codes)))
            stamps.append(int(record["at"] or 0))
            self.watermark = max(self.watermark, stamps[-1])
        if not keys:
            return True
        block = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        block /= np.where(norms == 0.0, 1.0, norms)
        quantised, scales = quantise(block)
        at = np.empty(len(keys), dtype=np.intp)
        for i, key in enumerate(keys):
            row = self.rows.get(key)
            if row is None:
                row = len(self.keys)
                self.keys.append(key)
                self.rows[key] = row
            at[i] = row
        if len(self.keys) > len(self.matrix):
            self.matrix = _grown(self.matrix, len(self.keys))
            self.scales = np.resize(self.scales, len(self.matrix))
            self.tags = np.resize(self.tags, len(self.matrix))
            self.stamps = np.resize(self.stamps, len(self.matrix))
        self.matrix[at] = quantised
        self.scales[at] = scales
        self.tags[at] = tags
        self.stamps[at] = stamps
        return True

    def stamped_since(self, from_ms: int) -> int:
        """How many rows were stamped at or after `from_ms`."""
        return int(np.count_nonzero(self.stamps[: len(self.keys)] >= from_ms))

    def nearest(
        self, query: npt.NDArray[np.float32], k: int, tag: str | None, product: Product
    ) -> list[tuple[str, float]]:
        """The k rows closest to `query` (unit length), scored as the vector index scores,
        (1 + cosine) / 2; only rows tagged `tag` when it is given."""
        count = len(self.keys)
        if k <= 0:
            return []
        if tag is None:
            picked = None
            scores = product(self.matrix[:count], self.scales[:count], query)
        else:
            code = self.codes.get(tag)
            if code is None:
                return []
            picked = np.flatnonzero(self.tags[:count] == code)
            scores = product(self.matrix[picked], self.scales[picked], query)
        best = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        best = best[np.argsort(-scores[best], kind="stable")]
        rows = best if picked is None else picked[best]
        return [
            (self.keys[int(row)], (1.0 + float(cosine)) / 2.0)
            for row, cosine in zip(rows, scores[best], strict=True)
        ]


def _grown(matrix: npt.NDArray[np.int8], needed: int) -> npt.NDArray[np.int8]:
    # A quarter more, not double: a whole read is trimmed to its size, and the first catch-up
    # after it would otherwise double a large scope's memory for a few new rows.
    rows = max(len(matrix) + len(matrix) // 4, needed, _INITIAL_ROWS)
    bigger = np.zeros((rows, matrix.shape[1]), dtype=matrix.dtype)
    bigger[: len(matrix)] = matrix
    return bigger


class VectorCache:
    """Per (group, tenant, agent), the agent's vectors, within `max_bytes` (0: cache nothing)."""

    def __init__(self, max_bytes: int, *, split_elements: int = SPLIT_ELEMENTS) -> None:
        self.max_bytes = max_bytes
        self.split_elements = split_elements
        self._scopes: OrderedDict[tuple[str, str, str], _Scope] = OrderedDict()
        self._lock = threading.Lock()
        # Scopes found too big for the budget, by their size then, so they are not read again.
        self._too_big: dict[tuple[str, str, str], float] = {}
        # Scopes being read in the background, and when a background read last failed.
        self._loading: dict[tuple[str, str, str], threading.Event] = {}
        self._failed: dict[tuple[str, str, str], float] = {}
        self._whole_reads = threading.BoundedSemaphore(WHOLE_READS_AT_ONCE)
        # Made once numpy has loaded its BLAS (it finds it then); cheap to use after.
        self._blas = ThreadpoolController()
        self._one_blas_thread = threading.Lock()
        self._cosines = Cosines()
        # Its thread starts with the first large product.
        self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsync-product")

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(scope.nbytes for scope in self._scopes.values())

    @property
    def scopes(self) -> int:
        """How many scopes (an agent's messages, or its facts and commitments) are held."""
        with self._lock:
            return len(self._scopes)

    def refresh(
        self, rows: Rows, group: Group, *, tenant: str, agent_key: str, dimensions: int
    ) -> bool:
        """Bring the agent's scope of `group` up to date through `rows` (runs a statement,
        yields records); False when it is not cached (see `refresh_groups`)."""
        fresh = self.refresh_groups(
            rows, (group,), tenant=tenant, agent_key=agent_key, dimensions=dimensions
        )
        return group in fresh

    def refresh_groups(
        self,
        rows: Rows,
        groups: Sequence[Group],
        *,
        tenant: str,
        agent_key: str,
        dimensions: int,
        load: Rows | None = None,
    ) -> set[Group]:
        """Bring the agent's scopes of `groups` up to date: each read whole the first time and
        every RELOAD_SECONDS, else only what was embedded since, all groups' new vectors in one
        statement. The groups that are cached (none when caching is off, or a scope too big for
        the budget).

        With `load` (a rows function another thread may call), the whole reads run in the
        background: a scope being read for the first time is not cached yet (recall asks Neo4j
        meanwhile), and one due for its periodic reload serves as it is until the new one is
        in. An agent's first recall then costs what it cost without the cache, not the two
        seconds of reading its 30k vectors; nor does any recall wait for a reload."""
        if not self.enabled:
            return set()
        params: dict[str, Any] = {"tenant": tenant, "agent_key": agent_key}
        fresh: set[Group] = set()
        behind: dict[Group, tuple[_Scope, int]] = {}
        held: dict[Group, _Scope] = {}
        try:
            # Scope locks in one order (the groups'), so two readers never wait on each other.
            for group in sorted(set(groups)):
                key = (group, tenant, agent_key)
                refused = self._too_big.get(key)
                if refused is not None:
                    if time.monotonic() - refused < RELOAD_SECONDS:
                        continue
                    self._too_big.pop(key, None)
                scope = self._scope(key, dimensions)
                scope.lock.acquire()
                held[group] = scope
                if key in self._too_big:
                    continue
                due = scope.loaded_at == 0.0 or time.monotonic() - scope.loaded_at > max(
                    RELOAD_SECONDS, RELOAD_COST_FACTOR * scope.load_seconds
                )
                if due and load is not None:
                    self._load_later(key, dimensions, load, params)
                    if scope.loaded_at == 0.0:
                        continue
                elif due:
                    if self._reload(key, scope, rows, params):
                        fresh.add(group)
                    continue
                since = scope.watermark + 1
                if time.monotonic() - scope.checked_at > RECHECK_SECONDS:
                    margin = max(scope.watermark - MARGIN_MS, scope.settled_ms, 0)
                    scope.checked_at = time.monotonic()
                    if load is None:
                        since = margin
                    else:
                        # The margin holds a whole embed batch's rows: read off the query path.
                        self._load_later(key, dimensions, load, params, from_ms=margin)
                behind[group] = (scope, since)
            fresh |= self._catch_up(rows, behind, params, tenant, agent_key)
        finally:
            for scope in held.values():
                scope.lock.release()
        for group in fresh:
            self._account((group, tenant, agent_key), held[group])
        return fresh

    def _catch_up(
        self,
        rows: Rows,
        behind: dict[Group, tuple[_Scope, int]],
        params: dict[str, Any],
        tenant: str,
        agent_key: str,
    ) -> set[Group]:
        """Read what each scope in `behind` (its lock held) lacks since its watermark, in one
        statement; the groups brought up to date."""
        if not behind:
            return set()
        if len(behind) == 1:
            ((group, (scope, since)),) = behind.items()
            records: dict[Group, list[Any]] = {
                group: list(rows(cypher.READS[group][1], {**params, "from_ms": since}))
            }
        else:
            records = {group: [] for group in behind}
            values = {f"from_ms_{group}": since for group, (_, since) in behind.items()}
            for record in rows(cypher.NEW_VECTORS_BOTH, {**params, **values}):
                records[record["part"]].append(record)
        fresh: set[Group] = set()
        for group, (scope, _) in behind.items():
            if scope.put(records[group]):
                fresh.add(group)
            else:
                self._drop((group, tenant, agent_key))
        return fresh

    def nearest(
        self,
        group: Group,
        *,
        tenant: str,
        agent_key: str,
        vector: Sequence[float],
        wanted: Mapping[str | None, int],
    ) -> dict[str | None, list[tuple[str, float]]] | None:
        """Per tag asked for (a channel key or a label; None for all), the agent's nearest
        nodes of `group` to `vector` as (key, score), best first, as many as `wanted` says,
        from the scope as last refreshed; None when it is not cached."""
        with self._lock:
            scope = self._scopes.get((group, tenant, agent_key))
        query = np.asarray(vector, dtype=np.float32)
        if scope is None or scope.dimensions != len(query):
            return None
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            return {tag: [] for tag in wanted}
        query = query / norm
        # One BLAS thread for numpy's products (small scopes, channel-held searches; the
        # integer product runs on one thread of its own): a second one saved a few milliseconds
        # on an agent's 35k float vectors, but OpenBLAS's threads spin after every call, and on
        # a reader sharing its cores with Neo4j that spinning cost more than the product (hybrid
        # recall at 100k episodes: 65 -> 30 ms of the reader's CPU a query). The limit is
        # process-wide while it lasts, so one search sets it at a time.
        with scope.lock, self._one_blas_thread, self._blas.limit(limits=1, user_api="blas"):
            return {tag: scope.nearest(query, k, tag, self._product) for tag, k in wanted.items()}

    def _product(
        self,
        matrix: npt.NDArray[np.int8],
        scales: npt.NDArray[np.float32],
        query: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]:
        """The rows' cosines with `query`, a large matrix in two halves at once (the caller
        holds the one BLAS thread limit, which the helper's half runs under too)."""
        if matrix.size <= self.split_elements:
            return self._cosines(matrix, scales, query)
        half = len(matrix) // 2
        second = self._helper.submit(self._cosines, matrix[half:], scales[half:], query)
        return np.concatenate((self._cosines(matrix[:half], scales[:half], query), second.result()))

    def clear(self) -> None:
        with self._lock:
            self._scopes.clear()
            self._too_big.clear()

    def _scope(self, key: tuple[str, str, str], dimensions: int) -> _Scope:
        with self._lock:
            scope = self._scopes.get(key)
            if scope is None or scope.dimensions != dimensions:
                scope = _empty(dimensions)
                self._scopes[key] = scope
            self._scopes.move_to_end(key)
            return scope

    def _reload(
        self, key: tuple[str, str, str], old: _Scope, rows: Rows, params: dict[str, Any]
    ) -> bool:
        """Read the whole scope anew into `old` (this thread holds its lock); False when it
        cannot be cached."""
        scope = self._read_whole(key, old.dimensions, rows, params)
        if scope is None:
            return False
        _swap(old, scope)
        return True

    def _read_whole(
        self, key: tuple[str, str, str], dimensions: int, rows: Rows, params: dict[str, Any]
    ) -> _Scope | None:
        """The whole scope as Neo4j has it now; None (and the scope dropped) when it cannot be
        cached: vectors of another size, or too big for the budget."""
        scope = _empty(dimensions)
        scope.loaded_at = time.monotonic()
        records = iter(rows(cypher.READS[key[0]][0], params))
        try:
            while page := list(islice(records, PAGE_ROWS)):
                if not scope.put(page):
                    self._drop(key)
                    return None
                if scope.used_bytes > self.max_bytes:
                    # Stop reading here: the rest would only be thrown away.
                    self._drop(key)
                    self._too_big[key] = time.monotonic()
                    return None
        finally:
            close = getattr(records, "close", None)
            if close is not None:
                close()
        scope.trim()
        scope.load_seconds = time.monotonic() - scope.loaded_at
        return scope

    def _load_later(
        self,
        key: tuple[str, str, str],
        dimensions: int,
        load: Rows,
        params: dict[str, Any],
        *,
        from_ms: int | None = None,
    ) -> None:
        """Read the scope in a thread of its own, whole and then swapped in, or (`from_ms`)
        what was stamped since then added: one read at a time per scope; a failed one is tried
        again LOAD_RETRY_SECONDS on."""
        with self._lock:
            failed = self._failed.get(key)
            if key in self._loading or (failed and time.monotonic() - failed < LOAD_RETRY_SECONDS):
                return
            done = threading.Event()
            self._loading[key] = done

        def run() -> None:
            try:
                if from_ms is not None:
                    self._read_since(key, dimensions, load, {**params, "from_ms": from_ms})
                    return
                with self._whole_reads:
                    scope = self._read_whole(key, dimensions, load, params)
                if scope is not None:
                    with self._lock:
                        current = self._scopes.get(key)
                    if current is not None and current.dimensions == dimensions:
                        with current.lock:
                            _swap(current, scope)
                        self._account(key, current)
            except Exception:
                # Recall goes on without the cache for this scope (Neo4j answers it).
                log.warning("vector cache: reading %s failed", key[0], exc_info=True)
                with self._lock:
                    self._failed[key] = time.monotonic()
            finally:
                with self._lock:
                    self._loading.pop(key, None)
                done.set()

        threading.Thread(target=run, name="memsync-vector-load", daemon=True).start()

    def _read_since(
        self, key: tuple[str, str, str], dimensions: int, load: Rows, params: dict[str, Any]
    ) -> None:
        """The margin re-read: count first (a few index hits, no vectors), read the rows only
        when Neo4j holds more stamped since `from_ms` than this scope does."""
        with self._lock:
            scope = self._scopes.get(key)
        if scope is None or scope.dimensions != dimensions:
            return
        (counted,) = load(cypher.COUNTS[key[0]], params)
        # Once this check is done, what was stamped MARGIN_MS before it began is settled: an
        # idle scope's next check counts nothing instead of its last embed batch again.
        settled = int(counted["now"]) - MARGIN_MS
        with scope.lock:
            if int(counted["stamped"]) <= scope.stamped_since(params["from_ms"]):
                scope.settled_ms = max(scope.settled_ms, settled)
                return
        records = load(cypher.READS[key[0]][1], params)
        with scope.lock:
            if not scope.put(records):
                self._drop(key)
                return
            scope.settled_ms = max(scope.settled_ms, settled)

    def wait_for_loads(self, timeout: float) -> bool:
        """Wait until no scope is being read in the background; False if `timeout` passed."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pending = list(self._loading.values())
            if not pending:
                return True
            if not pending[0].wait(max(deadline - time.monotonic(), 0.0)):
                return False

    def _drop(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            self._scopes.pop(key, None)

    def _account(self, key: tuple[str, str, str], keep: _Scope) -> None:
        """Evict the least recently used scopes (never `keep`) until the cache fits."""
        with self._lock:
            total = sum(scope.nbytes for scope in self._scopes.values())
            for other in list(self._scopes):
                if total <= self.max_bytes:
                    break
                if other != key:
                    total -= self._scopes.pop(other).nbytes


def _swap(old: _Scope, new: _Scope) -> None:
    """Give `old` (its lock held) everything `new` read: readers keep their reference."""
    old.matrix, old.scales = new.matrix, new.scales
    old.tags, old.keys, old.rows = new.tags, new.keys, new.rows
    old.stamps = new.stamps
    old.codes, old.watermark = new.codes, new.watermark
    old.loaded_at = old.checked_at = new.loaded_at
    old.load_seconds = new.load_seconds


def _empty(dimensions: int) -> _Scope:
    return _Scope(
        dimensions=dimensions,
        matrix=np.zeros((0, dimensions), dtype=np.int8),
        scales=np.zeros(0, dtype=np.float32),
        tags=np.zeros(0, dtype=np.int32),
        stamps=np.zeros(0, dtype=np.int64),
    )
