"""Read-side latency and embedding lag, on a private Neo4j holding one large tenant.

Per size (episodes in the tenant, grown in place: 10k, then 100k, then 1M), bench/bulkload.py
loads the tenant (its shape is described there), the embed worker's own `drain` embeds the
backlog with the real embedder, and once every index is online N queries (held-out FriendsQA
questions and IRC lines, each for a random agent, half of them in one of its channels) are timed
for recall keyword-only, recall hybrid, and build_context with the query (always in a channel,
which build_context needs). The first query of each kind after loading is reported apart
("cold"), then a warm-up, then the measured queries. A breakdown per Cypher statement, and
PROFILE of the costliest one, say where the time goes.

Then embedding lag under sustained ingest: episodes are written at a steady rate (bulk path, a
separate tenant in the same graph) while another process runs `drain` in a loop, and the
backlog and the age of the oldest unembedded episode are sampled every second.

Run: `.venv/bin/python -m bench.latency [--sizes 10000,100000] [--queries 200] [--json [PATH]]`
(add 1000000 to the sizes for 1M; see docs/benchmarks.md "Read latency"). To time several
versions of the code on one loaded graph: `--hold PATH` keeps it up after the timed queries and
`--attach PATH` times the same queries on it; `--vector-memo` makes a second load quick.
Neo4j gets a 4 GB heap and a 6 GB page cache (enough for the whole 1M-episode store to stay in
memory on the 24 GB machine); change with --heap-mb and --page-cache-mb.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import neo4j
import numpy

from bench.bulkload import Corpus, Tenant, ensure_people, load, load_corpus, shape_check, write_rows
from bench.shared import shared_data_dir
from memsync.settings import Settings
from pipeline.embedder import Embedder, make_embedder, query_precision
from pipeline.graph.cypher import bulkload as bulk_cypher
from pipeline.graph.cypher import search as search_cypher
from pipeline.graph.schema import init_schema
from pipeline.graph.search import recall
from pipeline.graph.segments import extend_segments
from pipeline.graph.store import GraphStore
from pipeline.graph.vectorcache import VectorCache
from pipeline.minilm import MiniLMEmbedder
from schemas.recall import RecallMode, RecallQuery
from tests.datasets import TESTS_DATA_DIR
from workers.local import services

EmbedderName = Literal["minilm", "wordllama"]
TENANT = "bench-latency"
LAG_TENANT = "bench-lag"
# Queries per kind before timing. A freshly started Neo4j's CPU per query fell fourfold over
# its first thousand or so queries (its JIT compiler warming up: docs/benchmarks.md), so a
# graph loaded and timed in one process needs more than a handful.
WARMUP = 200
TARGET_P95_MS = 50.0
KINDS = ("recall keyword", "recall hybrid", "build_context")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
    }


# -- per-statement timing ---------------------------------------------------------------------


def _statement_names() -> dict[str, str]:
    """Every read-side statement text -> its constant's name, for the breakdown."""
    names: dict[str, str] = {}
    modules: list[Any] = [search_cypher]
    for module_name in ("context", "summary"):
        try:
            modules.append(__import__(f"pipeline.graph.cypher.{module_name}", fromlist=["_"]))
        except ImportError:
            continue
    for module in modules:
        short = module.__name__.rsplit(".", 1)[-1]
        for attr, value in vars(module).items():
            if attr.startswith("_"):
                continue
            if isinstance(value, str):
                names.setdefault(value, f"{short}.{attr}")
            elif isinstance(value, dict):
                for label, text in value.items():
                    if isinstance(text, str):
                        names.setdefault(text, f"{short}.{attr}[{label}]")
    return names


_PART_LABEL = re.compile(r"RETURN '(\w+)' AS label")


def _combined_name(statement: str) -> str:
    """A name for a statement built at run time: a combined search is named by how its first
    part searches and the labels it covers; anything else by its opening words."""
    labels = _PART_LABEL.findall(statement)
    if not labels:
        return " ".join(statement.split())[:48]
    how = (
        "fulltext"
        if "fulltext.queryNodes" in statement
        else "vector index"
        if "vector.queryNodes" in statement
        else "cached candidates"
        if "$candidates" in statement
        else "exact cosine"
    )
    return f"search.combined {how} [{'+'.join(labels)}]"


@dataclass
class Timings:
    """Wall time per statement (run and fetch every record), and the slowest call's params."""

    ms: dict[str, list[float]] = field(default_factory=dict)
    slowest: dict[str, tuple[float, str, dict[str, Any]]] = field(default_factory=dict)


class _Fetched:
    """A result already fetched: iterable, with single() and consume() like the driver's."""

    def __init__(self, records: list[neo4j.Record]) -> None:
        self.records = records

    def __iter__(self) -> Iterator[neo4j.Record]:
        return iter(self.records)

    def single(self, strict: bool = False) -> neo4j.Record | None:
        if len(self.records) != 1:
            if strict:
                raise ValueError(f"expected one record, got {len(self.records)}")
            return self.records[0] if self.records else None
        return self.records[0]

    def consume(self) -> None:
        return None


class _TimedSession:
    def __init__(self, session: neo4j.Session, timings: Timings, names: dict[str, str]) -> None:
        self._session = session
        self._timings = timings
        self._names = names

    def run(self, statement: str, parameters: dict[str, Any] | None = None, **kw: Any) -> Any:
        params = {**(parameters or {}), **kw}
        started = time.perf_counter()
        records = list(self._session.run(statement, params))
        ms = (time.perf_counter() - started) * 1000
        name = self._names.get(statement) or _combined_name(statement)
        self._timings.ms.setdefault(name, []).append(ms)
        if ms > self._timings.slowest.get(name, (0.0, "", {}))[0]:
            self._timings.slowest[name] = (ms, statement, params)
        return _Fetched(records)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class TimedGraph(GraphStore):
    """A GraphStore whose sessions time every statement they run."""

    def timed(self, timings: Timings) -> GraphStore:
        names = _statement_names()
        outer = self

        class _Store(GraphStore):
            @contextmanager
            def session(
                self, *, write: bool = True, fetch_size: int | None = None
            ) -> Iterator[neo4j.Session]:
                with GraphStore.session(outer, write=write, fetch_size=fetch_size) as session:
                    yield _TimedSession(session, timings, names)  # type: ignore[misc]

        # The same caches as the untimed store, so the timed pass runs what a real call runs.
        return _Store(
            driver=self.driver,
            database=self.database,
            health=self.health,
            index_status=self.index_status,
            scope_sizes=self.scope_sizes,
            vectors=self.vectors,
        )


def profile(graph: GraphStore, statement: str, params: dict[str, Any]) -> list[str]:
    """PROFILE a statement; the operator tree with rows, db hits and time per operator."""
    with graph.session(write=False) as session:
        result = session.run("PROFILE " + statement, params)
        summary_ = result.consume()
    lines: list[str] = []

    def walk(op: Any, depth: int) -> None:
        args = op.get("args", {}) if isinstance(op, dict) else {}
        details = str(args.get("Details", ""))[:90]
        rows = op.get("rows", "?")
        hits = op.get("dbHits", "?")
        t = args.get("Time")
        took = f"{int(t) / 1e6:8.2f} ms" if isinstance(t, int) else "        "
        lines.append(
            f"{'  ' * depth}{op.get('operatorType', '?'):<32} rows {rows!s:>8} "
            f"hits {hits!s:>9} {took}  {details}"
        )
        for child in op.get("children", []):
            walk(child, depth + 1)

    if summary_.profile is not None:
        walk(summary_.profile, 0)
    return lines


# -- queries ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """One benchmark query: whose memory, which channel (or none), the question."""

    agent_id: str
    channel_id: str | None
    context_channel: str
    text: str


def asks(tenant: Tenant, corpus: Corpus, count: int, seed: int) -> list[Ask]:
    rng = random.Random(seed)
    by_agent: dict[str, list[str]] = {}
    for room in tenant.channels:
        for member in room.agents:
            by_agent.setdefault(member.id, []).append(room.id)
    agents = sorted(by_agent)
    result = []
    for _ in range(count):
        agent_id = rng.choice(agents)
        channel_id = rng.choice(by_agent[agent_id])
        scoped = channel_id if rng.random() < 0.5 else None
        result.append(Ask(agent_id, scoped, channel_id, rng.choice(corpus.queries)))
    return result


Runner = Callable[[GraphStore, Ask], object]


def query_embedder(embedder: Embedder, runtime: str) -> Embedder:
    """The embedder recall uses for its queries: MiniLM on the runtime asked for (the vectors
    are the same either way), any other model as it is."""
    if isinstance(embedder, MiniLMEmbedder) and runtime == "numpy":
        return MiniLMEmbedder(runtime="numpy")
    return embedder


def runners(embedder: Embedder, dm_policy: str) -> dict[str, Runner]:
    def recall_in(mode: RecallMode) -> Runner:
        def run(graph: GraphStore, ask: Ask) -> object:
            query = RecallQuery(
                tenant=TENANT,
                agent_id=ask.agent_id,
                channel_id=ask.channel_id,
                query=ask.text,
                mode=mode,
            )
            return recall(graph, query, embedder=embedder, dm_policy=dm_policy)

        return run

    result: dict[str, Runner] = {
        "recall keyword": recall_in("keyword"),
        "recall hybrid": recall_in("hybrid"),
    }
    try:
        from pipeline.graph.context import build_context
    except ImportError:
        return result

    def context(graph: GraphStore, ask: Ask) -> object:
        return build_context(
            graph,
            TENANT,
            ask.agent_id,
            ask.context_channel,
            query=ask.text,
            embedder=embedder,
            dm_policy=dm_policy,
        )

    result["build_context"] = context
    return result


def measure(
    graph: TimedGraph,
    run: dict[str, Runner],
    queries: Sequence[Ask],
    warm: Sequence[Ask],
    neo4j_pid: int | None = None,
) -> tuple[dict[str, Any], dict[str, Timings]]:
    """Cold first query, warm-up, then every query per kind; and per-statement timings. CPU
    per query too, this process's (every thread) and Neo4j's: on a box whose speed varies
    from hour to hour it compares versions better than wall time does."""
    figures: dict[str, Any] = {}
    timings: dict[str, Timings] = {}
    for kind, runner in run.items():
        started = time.perf_counter()
        runner(graph, warm[0])
        cold = (time.perf_counter() - started) * 1000
        for ask in warm[1:]:
            runner(graph, ask)
        # The vector cache reads agents' scopes in the background, and a load (the driver
        # unpacking tens of thousands of vectors) holds the interpreter while the timed queries
        # run: every agent asked about is warmed, and the timed queries start once the loads
        # are in, so the figures are the steady state; `cold` above is a first recall.
        for ask in {ask.agent_id: ask for ask in queries}.values():
            runner(graph, ask)
        graph.vectors.wait_for_loads(600)
        took = []
        cpu = time.process_time()
        neo4j_cpu = _cpu_seconds(neo4j_pid) if neo4j_pid else 0.0
        for ask in queries:
            started = time.perf_counter()
            runner(graph, ask)
            took.append((time.perf_counter() - started) * 1000)
        per_query = 1000 / max(len(queries), 1)
        figures[kind] = {
            "cold_ms": cold,
            **summary(took),
            "reader_cpu_ms": (time.process_time() - cpu) * per_query,
            "neo4j_cpu_ms": (_cpu_seconds(neo4j_pid) - neo4j_cpu) * per_query
            if neo4j_pid
            else None,
        }
        # A second pass with every statement timed (slower by the proxy's bookkeeping only).
        timings[kind] = Timings()
        timed = graph.timed(timings[kind])
        for ask in queries[: max(20, len(queries) // 4)]:
            runner(timed, ask)
    return figures, timings


# -- embedding --------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, quiet: float = 0.1, limit: float = 600.0) -> float:
    """Wait until Neo4j uses under `quiet` of a core for 3 s running, so that the timed queries
    do not share the machine with what loading left behind (index merges, page flushes, GC).
    Seconds waited; gives up after `limit`. (Embedded Community has no db.checkpoint().)"""
    started = time.perf_counter()
    calm = 0
    while calm < 3 and time.perf_counter() - started < limit:
        before, at = _cpu_seconds(pid), time.perf_counter()
        time.sleep(1.0)  # one sampling window of the CPU counter
        used = (_cpu_seconds(pid) - before) / (time.perf_counter() - at)
        calm = calm + 1 if used < quiet else 0
    return time.perf_counter() - started


class Remembering:
    """An embedder that embeds each distinct text once (`--reuse-vectors`): the tenant cycles a
    corpus of about 15k texts, so the same text always gets the vector the model gave it, and a
    100k load need not spend half an hour re-embedding repeats. Only for loading: the lag test
    pays the model's real cost. Vectors are held as one float32 matrix: at 1M episodes (about
    950k distinct texts with their pairs) lists of Python floats took 12 GB and the bench was
    killed for memory once the reader's cache loaded."""

    def __init__(self, inner: Embedder, memo: Path | None = None) -> None:
        self.inner = inner
        self.memo = memo
        self.rows: dict[str, int] = {}
        self.vectors = numpy.zeros((1024, inner.dimensions), dtype=numpy.float32)
        if memo is not None and memo.exists():
            with numpy.load(memo) as saved:
                # A memo of another model is not used.
                if str(saved["model"]) == inner.model:
                    self.rows = {text: row for row, text in enumerate(saved["texts"].tolist())}
                    self.vectors = numpy.ascontiguousarray(saved["vectors"], dtype=numpy.float32)
        self._saved = len(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def save(self) -> None:
        """Write every vector known to `--vector-memo` (kept across runs, so the next run's load
        of the same tenant embeds nothing it has seen). Float32 vectors and fixed-width texts:
        0.9 GB for the 100k tenant, 3.9 GB for 1M."""
        if self.memo is None or len(self.rows) == self._saved:
            return
        numpy.savez(
            self.memo.with_suffix(".tmp.npz"),
            model=numpy.array(self.inner.model),
            texts=numpy.array(list(self.rows)),
            vectors=self.vectors[: len(self.rows)],
        )
        self.memo.with_suffix(".tmp.npz").replace(self.memo)
        self._saved = len(self.rows)

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        new = list(dict.fromkeys(t for t in texts if t not in self.rows))
        if new:
            start = len(self.rows)
            if start + len(new) > len(self.vectors):
                grown = numpy.zeros(
                    (max(2 * len(self.vectors), start + len(new)), self.dimensions),
                    dtype=numpy.float32,
                )
                grown[:start] = self.vectors[:start]
                self.vectors = grown
            self.vectors[start : start + len(new)] = self.inner.embed(new)
            self.rows.update((text, start + i) for i, text in enumerate(new))
        picked: list[list[float]] = self.vectors[[self.rows[t] for t in texts]].tolist()
        return picked


def embed_all(
    graph: GraphStore, embedder: Embedder, batch: int, *, in_context: bool = True
) -> tuple[int, float]:
    """Drain the whole backlog with the embed worker's own drain; (nodes stored, seconds)."""
    from workers.worker.embedding import drain

    started = time.perf_counter()
    stored = 0
    while True:
        _, done, more = drain(graph, embedder, batch, run_seconds=600, in_context=in_context)
        stored += done
        if not more:
            return stored, time.perf_counter() - started


def _embed_loop(uri: str, name: EmbedderName, batch: int, stop: Any, counts: Any) -> None:
    """The embed side of the lag test (own process): drain continuously until told to stop."""
    from workers.worker.embedding import drain

    embedder = make_embedder(Settings(embedder=name), use="batches")
    assert embedder is not None
    graph = GraphStore.connect(uri, "neo4j", None, "neo4j")
    try:
        while not stop.is_set():
            _, stored, more = drain(graph, embedder, batch, run_seconds=30)
            with counts.get_lock():
                counts.value += stored
            if not stored and not more:
                stop.wait(0.2)
    finally:
        graph.close()


def lag_run(
    graph: GraphStore,
    uri: str,
    corpus: Corpus,
    rate: int,
    seconds: float,
    batch: int,
    base: int,
    name: EmbedderName,
) -> dict[str, Any]:
    """Write `rate` episodes/s for `seconds` (ticks of 0.1 s) with an embed process beside;
    sample backlog and lag every second, then until the backlog is gone."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    counts = context.Value("q", 0)
    embedder = context.Process(
        target=_embed_loop, args=(uri, name, batch, stop, counts), daemon=True
    )
    tenant = Tenant(LAG_TENANT, corpus)
    ensure_people(graph, tenant)
    samples: list[dict[str, float]] = []
    per_tick = max(1, rate // 10)
    written = 0
    embedder.start()
    try:
        started = time.monotonic()
        next_tick = next_sample = started
        while time.monotonic() - started < seconds:
            now = time.monotonic()
            if now >= next_tick:
                rows, memories = tenant.rows(
                    base + written, base + written + per_tick, datetime.now(UTC), datetime.now(UTC)
                )
                write_rows(graph, rows, memories)
                written += per_tick
                next_tick += 0.1
            if now >= next_sample:
                samples.append(_lag_sample(graph, now - started))
                next_sample += 1.0
            pause = min(next_tick, next_sample) - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # pacing the feed, not waiting for a condition
        fed = time.monotonic() - started
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            sample = _lag_sample(graph, time.monotonic() - started)
            samples.append(sample)
            if sample["pending"] == 0:
                break
            time.sleep(1.0)
        drained = time.monotonic() - started
    finally:
        stop.set()
        embedder.join(60)
        if embedder.is_alive():
            embedder.terminate()
    return {
        "rate_target": rate,
        "written": written,
        "rate_achieved": written / fed,
        "feed_seconds": fed,
        "drained_after_s": drained,
        "max_backlog": max(s["pending"] for s in samples),
        "max_lag_s": max(s["lag_s"] for s in samples),
        "embedded": counts.value,
        "samples": samples,
    }


def _lag_sample(graph: GraphStore, t: float) -> dict[str, float]:
    with graph.session(write=False) as session:
        record = session.run(bulk_cypher.EPISODE_LAG, tenant=LAG_TENANT).single(strict=True)
    oldest = record["oldest"]
    lag = (datetime.now(UTC) - oldest.to_native()).total_seconds() if oldest is not None else 0.0
    return {"t": round(t, 1), "pending": int(record["pending"]), "lag_s": round(lag, 2)}


Say = Callable[..., None]


def timed(
    graph: TimedGraph,
    tenant: Tenant,
    corpus: Corpus,
    size: int,
    runs: dict[str, dict[str, Runner]],
    args: argparse.Namespace,
    say: Say,
    neo4j_pid: int | None = None,
) -> dict[str, Any]:
    """The timed queries on a loaded graph, once per vector cache size and query runtime asked
    for; the same queries (seeded by the size) every time, so runs compare."""
    # What the process holds by now (the loader's memo: a list of floats per distinct text,
    # about 39 million floats at 100k) leaves the collector's view: a full collection walked
    # all of it (0.75 s measured alone) inside whichever timed query it fell on.
    gc.collect()
    gc.freeze()
    rng_seed = 8
    queries = asks(tenant, corpus, args.queries, rng_seed)
    warm = asks(tenant, corpus, args.warmup, rng_seed + size)
    entry: dict[str, Any] = {"by_vector_cache_mb": {}}
    cache_sizes = [int(mb) for mb in args.vector_cache_mb.split(",") if mb]
    for mb, runtime in itertools.product(cache_sizes, runs):
        # Each setting on the same graph, from an empty cache (its loads are timed).
        reader = dataclasses.replace(graph, vectors=VectorCache(mb << 20))
        figures, timings = measure(reader, runs[runtime], queries, warm, neo4j_pid)
        say(
            f"\nreader's vector cache: {f'{mb} MB' if mb else 'off'}"
            + (f"; queries embedded by {runtime}" if len(runs) > 1 else "")
        )
        _print_table(size, figures)
        setting = str(mb) if len(runs) == 1 else f"{mb}/{runtime}"
        entry["by_vector_cache_mb"][setting] = {
            "latency_ms": figures,
            "statement_median_ms": _print_breakdown(timings),
            "cache_mb_used": reader.vectors.nbytes / 2**20,
        }
        if size == args.profile_at:
            entry["profile"] = _profile_slowest(reader, timings, say)
    return entry


def hold(path: Path, uri: str, size: int, pid: int, say: Say) -> None:
    """Keep the loaded graph up for `--attach` runs (code changes measured on the same graph
    without loading it again) until `path` is removed."""
    path.write_text(json.dumps({"uri": uri, "size": size, "pid": pid}))
    say(f"\nholding the {size:,}-episode graph at {uri}: --attach {path}; remove it to stop")
    while path.exists():
        time.sleep(1.0)  # polling a file the operator removes, not a condition of the graph


def attach(
    path: Path,
    corpus: Corpus,
    runs: dict[str, dict[str, Runner]],
    args: argparse.Namespace,
    say: Say,
) -> dict[str, Any]:
    """Time the queries on a graph another run holds (`--hold`)."""
    held = json.loads(path.read_text())
    graph = TimedGraph.connect(held["uri"], "neo4j", None, "neo4j")
    assert isinstance(graph, TimedGraph)
    try:
        say(f"attached to the {held['size']:,}-episode graph at {held['uri']}")
        say(f"Neo4j settled in {settle(held['pid']):.1f} s")
        return timed(
            graph, Tenant(TENANT, corpus), corpus, held["size"], runs, args, say, held["pid"]
        )
    finally:
        graph.close()


# -- main -------------------------------------------------------------------------------------


def _print_table(size: int, figures: dict[str, Any]) -> None:
    print(f"\n{size:,} episodes  (ms; CPU per query: this reader's threads, Neo4j's)")
    print(
        f"  {'kind':<16}{'cold':>8}{'mean':>8}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}"
        f"{'cpu':>8}{'neo4j':>8}"
    )
    for kind, f in figures.items():
        neo4j_cpu = f.get("neo4j_cpu_ms")
        print(
            f"  {kind:<16}{f['cold_ms']:8.1f}{f['mean']:8.1f}{f['p50']:8.1f}"
            f"{f['p95']:8.1f}{f['p99']:8.1f}{f['max']:8.1f}{f['reader_cpu_ms']:8.1f}"
            + (f"{neo4j_cpu:8.1f}" if neo4j_cpu is not None else f"{'-':>8}")
        )


def _print_breakdown(timings: dict[str, Timings]) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = {}
    for kind, t in timings.items():
        print(f"  per statement, {kind} (median ms per call, calls per query):")
        queries = max(len(v) for v in t.ms.values()) if t.ms else 1
        rows = sorted(t.ms.items(), key=lambda kv: -statistics.median(kv[1]) * len(kv[1]))
        for name, values in rows:
            med = statistics.median(values)
            result.setdefault(kind, {})[name] = med
            print(f"    {name:<44}{med:8.2f}  x{len(values) / queries:.1f}")
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="e.g. 10000,100000,1000000")
    parser.add_argument(
        "--embedder",
        choices=("minilm", "wordllama"),
        default="minilm",
        help="minilm embeds about 80 episodes/s here: 100k take about 20 minutes to load",
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--warmup", type=int, default=WARMUP, help="queries per kind before timing (at least 1)"
    )
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH")
    parser.add_argument("--rates", default="200,1000,5000", help="episodes/s; empty: skip")
    parser.add_argument("--lag-seconds", type=float, default=60.0)
    parser.add_argument("--heap-mb", type=int, default=4096)
    parser.add_argument("--page-cache-mb", type=int, default=6144)
    parser.add_argument("--embed-batch", type=int, default=None, help="lag test")
    parser.add_argument("--load-embed-batch", type=int, default=2048, help="initial embedding")
    parser.add_argument(
        "--reuse-vectors",
        action="store_true",
        help="loading embeds each distinct text once (the corpus repeats): same vectors, faster",
    )
    parser.add_argument(
        "--no-embed-context",
        action="store_true",
        help="load with one embedding per message (MEMSYNC_EMBED_CONTEXT=false): half the "
        "texts to embed, and with --reuse-vectors about 15k instead of 100k for a 100k tenant; "
        "reading is the same either way (one vector per episode)",
    )
    parser.add_argument(
        "--vector-memo",
        type=Path,
        default=None,
        metavar="PATH",
        help="with --reuse-vectors: keep the distinct texts' vectors in this file across runs "
        "(a second 100k load embeds nothing; 0.9 GB for 100k; name it *.npz)",
    )
    parser.add_argument(
        "--vector-cache-mb",
        default=str(Settings().recall_vector_cache_mb),
        help="the reader's vector cache (MEMSYNC_RECALL_VECTOR_CACHE_MB; 0: off); a list such "
        "as 0,512 measures each on the same graph",
    )
    parser.add_argument(
        "--query-runtime",
        default="onnx",
        help="MiniLM's runtime for the queries timed (onnx, numpy); a list such as onnx,numpy "
        "measures each on the same graph (same vectors, so the same answers)",
    )
    parser.add_argument("--profile-at", type=int, default=100000, help="size to PROFILE at")
    parser.add_argument(
        "--hold",
        type=Path,
        default=None,
        metavar="PATH",
        help="after the timed queries keep Neo4j and the loaded graph up until PATH is removed",
    )
    parser.add_argument(
        "--attach",
        type=Path,
        default=None,
        metavar="PATH",
        help="time the queries on the graph a --hold run keeps (nothing is loaded)",
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    rates = [int(r) for r in args.rates.split(",") if r]
    cache_sizes = [int(mb) for mb in args.vector_cache_mb.split(",") if mb]
    runtimes = [r for r in args.query_runtime.split(",") if r] or ["onnx"]
    if set(runtimes) - {"onnx", "numpy"}:
        parser.error(f"--query-runtime: onnx or numpy (got {args.query_runtime!r})")
    try:
        root = shared_data_dir()
    except FileNotFoundError:
        root = TESTS_DATA_DIR
    out = sys.stderr if args.json == "-" else sys.stdout

    def say(*parts: object) -> None:
        print(*parts, file=out, flush=True)

    corpus = load_corpus(root)
    # Every query pays its embedding: the same questions recur across kinds and the warm-up,
    # so a reader's memory of recent query vectors would time its look-ups instead.
    settings = Settings(embedder=args.embedder, recall_query_vectors=0)
    # Queries as a reader embeds them (MiniLM in int8 unless MEMSYNC_QUANTIZED_QUERIES=false);
    # the tenant's memory as an embed worker does (float, every core).
    embedder = make_embedder(settings)
    storing = make_embedder(settings, use="batches")
    assert embedder is not None and storing is not None  # both choices build one
    batch = args.embed_batch or settings.embed_batch
    if args.vector_memo is not None and not args.reuse_vectors:
        parser.error("--vector-memo needs --reuse-vectors")
    if args.warmup < 1:
        parser.error(f"--warmup: at least 1, the cold query (got {args.warmup})")
    loader: Embedder = Remembering(storing, args.vector_memo) if args.reuse_vectors else storing
    say(
        f"corpus {len(corpus.texts):,} texts, {len(corpus.names):,} speakers, "
        f"{len(corpus.queries):,} held-out queries ({root}); queries embedded in "
        f"{query_precision(settings)}"
    )
    runs = {r: runners(query_embedder(embedder, r), settings.dm_memory_policy) for r in runtimes}
    if args.attach is not None:
        _report(args.json, {"attached": attach(args.attach, corpus, runs, args, say)})
        return
    work = Path(tempfile.mkdtemp(prefix="memsync-latency-"))
    port = services.free_port()
    uri = f"bolt://127.0.0.1:{port}"
    neo = services.start_neo4j(
        "127.0.0.1",
        port,
        work / "neo4j",
        settings.state_dir,
        heap_mb=args.heap_mb,
        page_cache_mb=args.page_cache_mb,
    )
    graph = TimedGraph.connect(uri, "neo4j", None, "neo4j", vector_cache_mb=args.vector_cache_mb)
    assert isinstance(graph, TimedGraph)
    report: dict[str, Any] = {
        "machine": "2 cores, 24 GB",
        "neo4j": {"heap_mb": args.heap_mb, "page_cache_mb": args.page_cache_mb},
        "embedder": embedder.model,
        "embed_batch": {"load": args.load_embed_batch, "lag": batch},
        "reuse_vectors": args.reuse_vectors,
        "embed_context": not args.no_embed_context,
        "vector_cache_mb": cache_sizes,
        "query_runtimes": runtimes,
        "queries": args.queries,
        "sizes": {},
    }
    try:
        init_schema(graph, vector_dimensions=embedder.dimensions)
        problems = shape_check(graph, corpus)
        report["shape_check"] = problems or "identical"
        say(f"shape check (bulk loader vs writer): {problems or 'identical'}")
        tenant = Tenant(TENANT, corpus)
        loaded = 0
        for size in sizes:
            started = time.perf_counter()
            for _ in load(graph, tenant, loaded, size):
                pass
            loaded = size
            load_s = time.perf_counter() - started
            say(f"\nloaded to {size:,} episodes in {load_s:.1f} s")
            # What the workers' fold checks do behind the writes (workers/worker/folding.py).
            started = time.perf_counter()
            segmented = sum(
                extend_segments(
                    graph, TENANT, tenant.key(agent), tenant.channel_key(channel)
                ).appended
                for channel in tenant.channels
                for agent in channel.agents
            )
            segment_s = time.perf_counter() - started
            say(f"segmented {segmented:,} observations in {segment_s:.1f} s")
            stored, embed_s = embed_all(
                graph, loader, args.load_embed_batch, in_context=not args.no_embed_context
            )
            say(f"embedded {stored:,} nodes in {embed_s:.1f} s ({stored / embed_s:,.0f}/s)")
            if isinstance(loader, Remembering):
                loader.save()
                say(f"  ({len(loader):,} distinct texts embedded so far: --reuse-vectors)")
            started = time.perf_counter()
            with graph.session() as session:
                session.run(bulk_cypher.AWAIT_INDEXES, seconds=3600).consume()
            online_s = time.perf_counter() - started
            settle_s = settle(neo.process.pid)
            say(f"indexes online in {online_s:.1f} s; Neo4j settled in {settle_s:.1f} s")
            entry = {
                "load_s": load_s,
                "segment_s": segment_s,
                "embedded": stored,
                "embed_s": embed_s,
                "embed_per_s": stored / embed_s if embed_s else None,
                "indexes_online_s": online_s,
                "settle_s": settle_s,
            }
            entry.update(timed(graph, tenant, corpus, size, runs, args, say, neo.process.pid))
            report["sizes"][str(size)] = entry
        if args.hold is not None:
            hold(args.hold, uri, loaded, neo.process.pid, say)
        if rates:
            base = 0
            report["lag"] = []
            say(f"\nembedding lag under sustained ingest ({args.lag_seconds:.0f} s each)")
            for rate in rates:
                lag = lag_run(
                    graph, uri, corpus, rate, args.lag_seconds, batch, base, args.embedder
                )
                base += lag["written"]
                report["lag"].append(lag)
                say(
                    f"  target {rate:>5}/s  achieved {lag['rate_achieved']:7.0f}/s  "
                    f"max backlog {lag['max_backlog']:>7,}  max lag {lag['max_lag_s']:6.1f} s  "
                    f"backlog gone {lag['drained_after_s']:6.1f} s after start"
                )
                trace = "  ".join(
                    f"{s['t']:.0f}s:{s['pending']}"
                    for s in lag["samples"][:: max(1, len(lag["samples"]) // 12)]
                )
                say(f"    backlog over time: {trace}")
    finally:
        graph.close()
        neo.stop()
    _report(args.json, report)


def _report(where: str | None, report: dict[str, Any]) -> None:
    if where == "-":
        json.dump(report, sys.stdout, indent=2, default=str)
        print()
    elif where:
        Path(where).write_text(json.dumps(report, indent=2, default=str))


def _profile_slowest(
    graph: GraphStore, timings: dict[str, Timings], say: Callable[..., None]
) -> dict[str, Any]:
    """PROFILE the statement with the largest total time per kind, with its slowest params."""
    result: dict[str, Any] = {}
    for kind, t in timings.items():
        if not t.ms:
            continue
        name = max(t.ms, key=lambda n: sum(t.ms[n]))
        ms, statement, params = t.slowest[name]
        lines = profile(graph, statement, params)
        say(f"\n  PROFILE {kind}: {name} (slowest call {ms:.1f} ms)")
        for line in lines:
            say(f"    {line}")
        result[kind] = {"statement": name, "slowest_ms": ms, "plan": lines}
    return result


if __name__ == "__main__":
    main()
