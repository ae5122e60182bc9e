"""The sync path of issue 9: the Celery pipeline beside the inline baseline and the write ceiling.

Starts a private Redis (AOF) and Neo4j (1 GB heap) on free loopback ports and writes the same
turns (bench/syncload.py, real FriendsQA and tau-bench text) three ways, each phase on a fresh
tenant:

- `pipeline`, for each process count P: P `celery worker` processes (each `--concurrency C`),
  every turn emitted through memsync.Producer as fast as emit() allows, then the ledger polled
  every POLL_SECONDS until every turn is complete. Reports turns/s (first emit to last turn
  seen complete), emit() p50/p99/max, emit-to-written lag p50/p99 and each worker process's
  peak RSS (VmHWM).
- `inline`: no Celery; one thread validates, runs stages 1-4 (open trust, the worker's name,
  label and trust look-ups), memorizes with the rules extractor and default lenses and writes
  with write_sync_jobs: one transaction per turn.
- `ceiling`: the same participants, channels, members, episodes, SAID, IN and OBSERVED, planned by
  plan_batch, written as plain UNWIND statements of BATCH_ROWS rows, one transaction each.

Run: `.venv/bin/python -m bench.syncpath [--turns 4000] [--processes 1,2,4] [--concurrency 1]
[--agents 3] [--phases pipeline,inline,ceiling] [--fold] [--stored N] [--warmup N]
[--warmup-rounds R] [--rate R] [--json PATH]`. Pipeline workers consume the ingest and sync
queues (`--fold`: the fold queue too, as `memsync worker` does); `--stored N` bulk-loads N
episodes of another tenant first; `--rate R` paces the emits at R turns a second (default: all
at once, a burst). The warm-up writes `--warmup` turns inline, a turn at a time, then in batches
round after round until Neo4j's JIT compiler settles; every phase reports Neo4j's CPU by thread
role (queries, JIT compiler, GC), since a JVM still compiling slows whatever runs beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import neo4j

from bench import threadcpu
from bench.bulkload import Tenant, load_corpus
from bench.bulkload import load as load_episodes
from bench.gcpauses import Collections, slowest_call
from bench.shared import shared_data_dir
from bench.syncload import DEFAULT_SEED, RawEvent, jsonable, retenant, spread, workload
from memsync.producer import Producer
from memsync.settings import FOLD_QUEUE, INGEST_QUEUE, SYNC_QUEUE, Settings
from pipeline.extract import Extractor
from pipeline.graph.model import AGENT, CHANNEL, EPISODE, IN, MEMBER_OF, OBSERVED, PARTICIPANT, SAID
from pipeline.graph.reader import tenant_counts
from pipeline.graph.schema import init_schema
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import SyncBatch, plan_batch, write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import Lens
from pipeline.memorize import memorize
from pipeline.resolve import labels_needed, names_needed
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from workers.cli.demo import worker_env
from workers.local import services
from workers.worker import runtime

POLL_SECONDS: Final = 0.5
SAMPLE_EVERY: Final = 10
SAMPLE_TAIL: Final = 50
FULL_EVERY: Final = 10
BATCH_ROWS: Final = 5000
PHASES: Final = ("pipeline", "inline", "ceiling")
# Warm-up rounds stop once Neo4j's JIT compiler threads take less than this share of its CPU.
WARM_COMPILER_SHARE: Final = 0.2

# The ceiling's statements: a measuring instrument, so it holds its own Cypher. Nodes are
# MERGEd by key (the uniqueness constraints apply, as for the writer); edges are CREATEd.
CEILING_PARTICIPANTS: Final = f"""
UNWIND $rows AS row
MERGE (p:{PARTICIPANT} {{key: row.key}})
ON CREATE SET p.tenant = row.tenant, p.id = row.id, p.kind = row.kind,
              p.display_name = row.display_name, p.handle = row.handle, p.label = row.label,
              p.anonymous = row.anonymous
"""
CEILING_AGENTS: Final = f"""
UNWIND $rows AS key
MATCH (p:{PARTICIPANT} {{key: key}})
SET p:{AGENT}
"""
CEILING_CHANNELS: Final = f"""
UNWIND $rows AS row
MERGE (c:{CHANNEL} {{key: row.key}})
ON CREATE SET c.tenant = row.tenant, c.id = row.id, c.kind = row.kind, c.title = row.title
"""
CEILING_MEMBERS: Final = f"""
UNWIND $rows AS row
MATCH (p:{PARTICIPANT} {{key: row.participant_key}})
MATCH (c:{CHANNEL} {{key: row.channel_key}})
MERGE (p)-[:{MEMBER_OF}]->(c)
"""
CEILING_EPISODES: Final = f"""
UNWIND $rows AS row
MATCH (s:{PARTICIPANT} {{key: row.speaker_key}})
MATCH (c:{CHANNEL} {{key: row.channel_key}})
MERGE (e:{EPISODE} {{key: row.key}})
ON CREATE SET e.tenant = row.tenant, e.id = row.id, e.role = row.role, e.content = row.content,
              e.speaker_label = row.speaker_label, e.speaker_id = row.speaker_id,
              e.fingerprint = row.fingerprint,
              e.created_at = datetime({{epochSeconds: row.created_us / 1000000,
                                        nanosecond: row.created_us % 1000000 * 1000}}),
              e.channel_key = row.channel_key, e.embed_pending = true
CREATE (s)-[:{SAID}]->(e)
CREATE (e)-[:{IN}]->(c)
"""
CEILING_OBSERVED: Final = f"""
UNWIND $rows AS row
MATCH (a:{PARTICIPANT}:{AGENT} {{key: row.agent_key}})
MATCH (e:{EPISODE} {{key: row.episode_key}})
CREATE (a)-[:{OBSERVED} {{synced_at: $synced_at, event_id: row.event_id}}]->(e)
"""


@dataclass
class Bench:
    """The private services and the settings every phase shares."""

    root: Path
    settings: Settings
    graph: GraphStore
    redis: services.Service
    neo4j: services.Service


# -- process memory ---------------------------------------------------------------------------


def _status_kb(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_kb(pid: int) -> int | None:
    """Peak resident memory (VmHWM) of a live process, in KiB; None once it is gone."""
    return _status_kb(pid, "VmHWM")


def children(pid: int) -> list[int]:
    """Direct children of a process (from /proc/<pid>/task/*/children, else a /proc scan)."""
    found: list[int] = []
    tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
    if tasks:
        for path in tasks:
            with contextlib.suppress(OSError, ValueError):
                found.extend(int(x) for x in path.read_text().split())
        return sorted(set(found))
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _status_kb(int(entry.name), "PPid") == pid:
            found.append(int(entry.name))
    return sorted(found)


def tree_peaks(pid: int) -> list[dict[str, Any]]:
    """VmHWM of a process and all its descendants (a worker's main process and pool children)."""
    rows: list[dict[str, Any]] = []
    stack = [(pid, "main")]
    while stack:
        current, role = stack.pop()
        kb = peak_rss_kb(current)
        if kb is not None:
            rows.append({"pid": current, "role": role, "peak_rss_mb": kb / 1024})
        stack.extend((child, "child") for child in children(current))
    return rows


def reset_peak(pid: int) -> None:
    """Start a process's VmHWM over (Linux clear_refs 5), so each phase reports its own peak."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def own_peak_mb() -> float:
    kb = peak_rss_kb(os.getpid())
    if kb is None:  # no /proc: the lifetime peak instead
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024


def service_peaks(bench: Bench) -> dict[str, float | None]:
    return {
        s.name: (kb / 1024 if (kb := peak_rss_kb(s.process.pid)) is not None else None)
        for s in (bench.redis, bench.neo4j)
    }


def reset_peaks(bench: Bench) -> None:
    """Start the VmHWM of this process, Redis and Neo4j over before a phase."""
    for pid in (os.getpid(), bench.redis.process.pid, bench.neo4j.process.pid):
        reset_peak(pid)


# -- phases -----------------------------------------------------------------------------------


def _ms(ns: float) -> float:
    return ns / 1e6


def _us(ns: float) -> float:
    return ns / 1e3


def run_pipeline(
    bench: Bench,
    load: list[RawEvent],
    processes: int,
    concurrency: int,
    timeout: float,
    queues: Sequence[str] = (INGEST_QUEUE, SYNC_QUEUE),
    rate: float = 0.0,
) -> dict[str, Any]:
    """Emit every turn through the producer to `processes` workers; time until all are written."""
    tenant = load[0]["tenant"]
    settings = bench.settings.model_copy(
        update={
            "spool_dir": bench.root / f"spool-{tenant}",
            "producer_buffer": max(bench.settings.producer_buffer, len(load) + 1),
        }
    )
    workers: list[services.Service] = []
    reset_peaks(bench)
    try:
        for k in range(processes):
            workers.append(
                services.start_worker(
                    worker_env(settings),
                    bench.root / f"worker-{tenant}-{k}.log",
                    concurrency=concurrency,
                    name=f"syncbench-p{processes}-{k}",
                    queues=queues,
                )
            )
        # What the workers spent starting (imports, connections, forking the pool), kept apart
        # so the per-turn CPU below counts the work alone.
        startup_cpu = _workers_cpu(workers)
        producer = Producer(settings)
        emit_ns: list[int] = []
        sent_at: list[int] = []
        sampler = LagSampler(tenant, load, sent_at)
        sampler.start()
        collections = Collections()
        try:
            start = time.perf_counter_ns()
            with collections:
                for index, turn in enumerate(load):
                    if rate:
                        # Paced: turn i leaves at i / rate seconds (a sustained load, not a burst).
                        due = start + int(index * 1e9 / rate)
                        wait = (due - time.perf_counter_ns()) / 1e9
                        if wait > 0:
                            time.sleep(wait)
                    before = time.perf_counter_ns()
                    producer.emit(turn)
                    after = time.perf_counter_ns()
                    sent_at.append(before)
                    emit_ns.append(after - before)
            emitted = time.perf_counter_ns()
            producer.flush(timeout=timeout)
        finally:
            producer.close(timeout=timeout)
            sampler.halt()
        waited = _wait_written(bench, tenant, load, sent_at, timeout, sampler.seen)
        # CPU since each worker started (its start-up included), pool processes too.
        worker_cpu = _workers_cpu(workers)
        peaks = [row for w in workers for row in tree_peaks(w.process.pid)]
        producer_peak = own_peak_mb()
        service_peak = service_peaks(bench)
    finally:
        for worker in workers:
            worker.stop()
    # The driver logs each transaction it retries (lock waits that ended in a deadlock, say).
    retried = sum(
        log.read_text(errors="replace").count("will be retried")
        for log in bench.root.glob(f"worker-{tenant}-*.log")
    )
    written_at = waited["done_ns"]
    elapsed = (max(written_at) - start) / 1e9 if written_at else math.nan
    complete = len(written_at)
    return {
        "phase": f"pipeline P={processes}",
        "kind": "pipeline",
        "processes": processes,
        "concurrency": concurrency,
        "tenant": tenant,
        "turns": len(load),
        "complete": complete,
        "failed": waited["failed"],
        "seconds": elapsed,
        "turns_per_s": complete / elapsed if elapsed and complete else math.nan,
        "emit_us": {k: _us(v) if k != "n" else v for k, v in spread(emit_ns).items()},
        "emit_slowest": slowest_call(sent_at, emit_ns, collections),
        "emit_total_ms": _ms(emitted - start),
        "lag_ms": {k: _ms(v) if k != "n" else v for k, v in spread(waited["lags_ns"]).items()},
        "complete_at_first_poll": waited["first_poll_complete"],
        "poll": {
            "interval_ms": POLL_SECONDS * 1000,
            "polls": waited["polls"],
            "cost_ms": {k: _ms(v) if k != "n" else v for k, v in spread(waited["cost_ns"]).items()},
        },
        "transactions_retried": retried,
        "workers_cpu_s": round(worker_cpu, 2),
        "workers_startup_cpu_s": round(startup_cpu, 2),
        "worker_peak_rss_mb": peaks,
        "peak_rss_mb": max((r["peak_rss_mb"] for r in peaks), default=math.nan),
        "workers_rss_sum_mb": sum(r["peak_rss_mb"] for r in peaks),
        "bench_peak_rss_mb": producer_peak,
        "service_peak_rss_mb": service_peak,
    }


def _workers_cpu(workers: Sequence[services.Service]) -> float:
    """CPU seconds the worker processes and their pool processes have used so far."""
    return sum(
        threadcpu.process_seconds(row["pid"]) for w in workers for row in tree_peaks(w.process.pid)
    )


def sampled_indexes(count: int) -> list[int]:
    """The turns whose lag is measured: every SAMPLE_EVERY-th and the last SAMPLE_TAIL."""
    return sorted(
        set(range(0, count, SAMPLE_EVERY)) | set(range(max(0, count - SAMPLE_TAIL), count))
    )


class LagSampler(threading.Thread):
    """Polls the sampled turns already emitted while the emitting goes on, so a paced run's lag
    is measured as it happens (the poll after the last emit would see them all late)."""

    def __init__(self, tenant: str, load: list[RawEvent], sent_at: list[int]) -> None:
        super().__init__(name="lag-sampler", daemon=True)
        self.keys = [(tenant, e["event_id"]) for e in load]
        self.sent_at = sent_at
        self.sampled = sampled_indexes(len(load))
        self.seen: dict[tuple[str, str], int] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        ledger = runtime.ledger()
        while not self._halt.is_set():
            emitted = len(self.sent_at)
            keys = [self.keys[i] for i in self.sampled if i < emitted]
            keys = [k for k in keys if k not in self.seen]
            if keys:
                statuses = ledger.statuses(keys)
                now = time.perf_counter_ns()
                for key, status in zip(keys, statuses, strict=True):
                    if status.complete:
                        self.seen[key] = now
            self._halt.wait(POLL_SECONDS)

    def halt(self) -> None:
        self._halt.set()
        self.join(timeout=30)


def _wait_written(
    bench: Bench,
    tenant: str,
    load: list[RawEvent],
    sent_at: list[int],
    timeout: float,
    seen: dict[tuple[str, str], int] | None = None,
) -> dict[str, Any]:
    """Poll the ledger for the turns not yet complete; each turn's time is the first poll that
    sees it complete (the reply's arrival), so a sampled turn's lag is late by at most one
    interval plus one poll."""
    ledger = runtime.ledger()
    pending = {(tenant, e["event_id"]): sent for e, sent in zip(load, sent_at, strict=True)}
    lags: list[int] = []
    done: list[int] = []
    cost: list[int] = []
    failed = 0
    first_poll_complete: int | None = None
    deadline = time.monotonic() + timeout
    order = list(pending)
    # A poll of every pending turn costs the workers' Redis and CPU, so most polls ask a sample
    # (every SAMPLE_EVERY-th turn and the last SAMPLE_TAIL), which the lag figures come from;
    # every FULL_EVERY-th poll, and once the sample is done, asks every pending turn.
    sampled = {order[i] for i in sampled_indexes(len(order))}
    for key, at in (seen or {}).items():  # seen complete while the emitting went on
        lags.append(at - pending.pop(key))
        done.append(at)
    polls = 0
    while pending and time.monotonic() < deadline:
        asked = time.perf_counter_ns()
        polls += 1
        keys = [k for k in pending if k in sampled]
        if not keys or polls % FULL_EVERY == 0:
            keys = list(pending)
        statuses = ledger.statuses(keys)
        answered = time.perf_counter_ns()
        cost.append(answered - asked)
        for key, status in zip(keys, statuses, strict=True):
            if status.complete:
                sent = pending.pop(key)
                if key in sampled:
                    lags.append(answered - sent)
                done.append(answered)
            elif status.finished:  # rejected or dead-lettered: never written
                pending.pop(key)
                failed += 1
        if first_poll_complete is None:
            first_poll_complete = len(done)
        time.sleep(max(0.0, POLL_SECONDS - (time.perf_counter_ns() - asked) / 1e9))
    return {
        "lags_ns": lags,
        "done_ns": done,
        "failed": failed + len(pending),
        "polls": len(cost),
        "cost_ns": cost,
        "first_poll_complete": first_poll_complete or 0,
    }


def _stages_inputs(events: list[TurnEvent]) -> tuple[Any, Any, Any]:
    """What the ingest task looks up before stages 1-4: known names, label owners, trust."""
    known = runtime.known_names(names_needed(events))
    taken = runtime.label_owners(labels_needed(events, known))
    return known, taken, runtime.trust_policy(events)


def write_inline(
    raws: Sequence[RawEvent], extractor: Extractor, lenses: Mapping[str, Lens], graph: GraphStore
) -> None:
    """Validation, stages 1-4, memory and the writer for these turns, in one transaction."""
    events = [validate_event(raw) for raw in raws]
    known, taken, policy = _stages_inputs(events)
    outcome = ingest_turns(events, known, policy, taken)
    write_sync_jobs(graph, outcome.jobs, memorize(outcome.jobs, extractor, lenses))


def run_inline(bench: Bench, load: list[RawEvent]) -> dict[str, Any]:
    """Every turn through validation, stages 1-4, memorize and the writer: one transaction each."""
    calls: list[int] = []
    extractor, lenses, graph = runtime.extractor(), runtime.lenses(), runtime.graph()
    reset_peaks(bench)
    start = time.perf_counter_ns()
    for raw in load:
        before = time.perf_counter_ns()
        write_inline([raw], extractor, lenses, graph)
        calls.append(time.perf_counter_ns() - before)
    elapsed = (time.perf_counter_ns() - start) / 1e9
    peak = own_peak_mb()
    return {
        "phase": "inline",
        "kind": "inline",
        "tenant": load[0]["tenant"],
        "turns": len(load),
        "complete": len(load),
        "seconds": elapsed,
        "turns_per_s": len(load) / elapsed,
        "call_ms": {k: _ms(v) if k != "n" else v for k, v in spread(calls).items()},
        "peak_rss_mb": peak,
        "service_peak_rss_mb": service_peaks(bench),
    }


def run_batched(bench: Bench, load: list[RawEvent], batch: int) -> float:
    """The inline path in batches of `batch` turns, one transaction each (the shape of the
    pipeline's sync transactions); returns turns/s. Used to warm Neo4j up."""
    extractor, lenses, graph = runtime.extractor(), runtime.lenses(), runtime.graph()
    start = time.perf_counter()
    for first in range(0, len(load), batch):
        write_inline(load[first : first + batch], extractor, lenses, graph)
    return len(load) / (time.perf_counter() - start)


def warm_up(bench: Bench, load: list[RawEvent], batch: int, rounds: int, tenant: str) -> None:
    """Write `load` inline a turn at a time, then in batches, round after round on fresh
    tenants, until Neo4j's JIT compiler takes less than WARM_COMPILER_SHARE of its CPU."""
    run_inline(bench, retenant(load, f"{tenant}-0"))
    for index in range(1, rounds + 1):
        before = threadcpu.by_thread(bench.neo4j.process.pid)
        rate = run_batched(bench, retenant(load, f"{tenant}-{index}"), batch)
        cpu = threadcpu.by_role(before, threadcpu.by_thread(bench.neo4j.process.pid))
        share = cpu["compiler"] / cpu["total"] if cpu["total"] else 0.0
        print(
            f"   round {index}: {rate:.0f} turns/s in batches of {batch}; Neo4j CPU "
            f"{cpu['total']:.1f} s, {share:.0%} of it compiling",
            flush=True,
        )
        if share < WARM_COMPILER_SHARE:
            return


def ceiling_batches(
    batch: SyncBatch, rows_per_batch: int = BATCH_ROWS
) -> list[tuple[str, str, list[Any]]]:
    """(kind, statement, rows) in write order, each at most `rows_per_batch` rows."""
    kinds: list[tuple[str, str, Sequence[Any]]] = [
        ("participants", CEILING_PARTICIPANTS, batch.participants),
        ("agents", CEILING_AGENTS, batch.agents),
        ("channels", CEILING_CHANNELS, batch.channels),
        ("members", CEILING_MEMBERS, batch.members),
        ("episodes", CEILING_EPISODES, batch.episodes),
        ("observed", CEILING_OBSERVED, batch.observed),
    ]
    return [
        (kind, statement, list(rows[i : i + rows_per_batch]))
        for kind, statement, rows in kinds
        for i in range(0, len(rows), rows_per_batch)
    ]


def _run_rows(
    tx: neo4j.ManagedTransaction, statement: str, rows: list[Any], synced_at: Any
) -> None:
    tx.run(statement, rows=rows, synced_at=synced_at).consume()


def run_ceiling(bench: Bench, load: list[RawEvent]) -> dict[str, Any]:
    """The writer's own rows (plan_batch over the same jobs) as batched plain UNWINDs."""
    reset_peaks(bench)
    planning = time.perf_counter_ns()
    events = [validate_event(raw) for raw in load]
    known, taken, policy = _stages_inputs(events)
    batch = plan_batch(ingest_turns(events, known, policy, taken).jobs)
    work = ceiling_batches(batch)
    start = time.perf_counter_ns()
    with bench.graph.session() as session:
        for _, statement, rows in work:
            session.execute_write(_run_rows, statement, rows, batch.synced_at)
    end = time.perf_counter_ns()
    peak = own_peak_mb()
    row_counts: dict[str, int] = {}
    for kind, _, part in work:
        row_counts[kind] = row_counts.get(kind, 0) + len(part)
    elapsed = (end - start) / 1e9
    return {
        "phase": "ceiling",
        "kind": "ceiling",
        "tenant": load[0]["tenant"],
        "turns": len(load),
        "complete": len(load),
        "seconds": elapsed,
        "plan_ms": _ms(start - planning),
        "transactions": len(work),
        "rows": row_counts,
        "turns_per_s": len(load) / elapsed,
        "peak_rss_mb": peak,
        "service_peak_rss_mb": service_peaks(bench),
    }


# -- report -----------------------------------------------------------------------------------


def _fmt(value: float, spec: str = ".0f") -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:{spec}}"
    )


def table(results: list[dict[str, Any]]) -> str:
    """The one summary table: throughput against the ceiling and inline, latencies, memory."""
    ceiling = next((r["turns_per_s"] for r in results if r["kind"] == "ceiling"), math.nan)
    inline = next((r["turns_per_s"] for r in results if r["kind"] == "inline"), math.nan)
    header = (
        f"{'phase':<14} {'turns/s':>8} {'vs ceil':>8} {'vs inline':>9} "
        f"{'emit p50/p99/max us':>21} {'lag p50/p99 ms':>15} {'call p50/p99 ms':>16} "
        f"{'peak RSS MB':>12}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        rate = r["turns_per_s"]
        emit = r.get("emit_us")
        lag = r.get("lag_ms")
        call = r.get("call_ms")
        emit_text = f"{_fmt(emit['p50'])}/{_fmt(emit['p99'])}/{_fmt(emit['max'])}" if emit else "-"
        lag_text = f"{_fmt(lag['p50'])}/{_fmt(lag['p99'])}" if lag else "-"
        call_text = f"{_fmt(call['p50'], '.1f')}/{_fmt(call['p99'], '.1f')}" if call else "-"
        lines.append(
            f"{r['phase']:<14} {_fmt(rate, '.1f'):>8} {_fmt(rate / ceiling * 100, '.1f') + '%':>8} "
            f"{_fmt(rate / inline, '.2f') + 'x':>9} {emit_text:>21} {lag_text:>15} "
            f"{call_text:>16} {_fmt(r['peak_rss_mb'], '.0f'):>12}"
        )
    return "\n".join(lines)


def cpu_budget(results: list[dict[str, Any]], cores: int) -> list[str]:
    """Each pipeline phase's CPU a turn by process (bench: this process, the producer and its
    polling of the ledger), against what `cores` give a turn at half the ceiling measured in the
    same run: the share the workers would have there, and the ceiling's own Python (validating,
    planning and packing its rows) for scale."""
    ceiling = next((r for r in results if r["kind"] == "ceiling"), None)
    lines: list[str] = []
    for r in results:
        if r["kind"] != "pipeline" or not r["complete"]:
            continue
        per = 1000 / r["complete"]
        workers = (r["workers_cpu_s"] - r["workers_startup_cpu_s"]) * per
        neo4j, redis, bench = (
            r["neo4j_cpu_s"]["total"] * per,
            r["redis_cpu_s"] * per,
            r["bench_cpu_s"] * per,
        )
        text = (
            f"{r['phase']:<15} ms of CPU a turn: workers {workers:.2f} (start-up "
            f"{r['workers_startup_cpu_s']:.1f} s left out), neo4j {neo4j:.2f}, redis {redis:.2f}, "
            f"bench {bench:.2f}; total {workers + neo4j + redis + bench:.2f}"
        )
        if ceiling is not None and ceiling["turns_per_s"] > 0:
            half = ceiling["turns_per_s"] / 2
            budget = cores * 1000 / half
            left = budget - neo4j - redis - bench
            own = ceiling["bench_cpu_s"] * 1000 / ceiling["turns"]
            text += (
                f"\n{'':<15} at half the ceiling ({half:.0f} turns/s) {cores} cores give "
                f"{budget:.2f} ms a turn; with Neo4j, Redis and this process as here the workers "
                f"would have {left:.2f} ms; the ceiling's Python took {own:.2f} ms a turn to "
                "validate, plan and send the same rows (only the sending is in its timed window)"
            )
        lines.append(text)
    return lines


def slowest_text(run: dict[str, Any]) -> str:
    """The slowest emit() and how much of it this process's full collections took."""
    slow = run.get("emit_slowest") or {}
    if not slow:
        return "no emit() timed"
    return (
        f"slowest emit() {slow['ms']:.1f} ms, of which full garbage collections "
        f"{slow['full_gc_ms']:.1f} ms ({slow['full_gcs']:.0f} while emitting)"
    )


def counts_table(counts: dict[str, dict[str, int]]) -> str:
    """Node and edge counts per phase's tenant, so the reader sees they wrote the same graph."""
    phases = list(counts)
    kinds = list(next(iter(counts.values()), {}))
    width = max((len(p) for p in phases), default=8) + 2
    lines = [f"{'kind':<12}" + "".join(f"{p:>{width}}" for p in phases)]
    for kind in kinds:
        lines.append(f"{kind:<12}" + "".join(f"{counts[p].get(kind, 0):>{width}}" for p in phases))
    return "\n".join(lines)


# -- entry point ------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def start_bench(root: Path, concurrency: int, batch: int) -> Bench:
    redis_port, neo4j_port = services.free_port(), services.free_port()
    settings = Settings(
        broker_url=f"redis://127.0.0.1:{redis_port}/0",
        neo4j_uri=f"bolt://127.0.0.1:{neo4j_port}",
        spool_dir=root / "spool",
        producer_batch=batch,
        worker_concurrency=concurrency,
        trust_mode="open",  # the workload's humans have no owners or grants
    )
    redis = services.start_redis("127.0.0.1", redis_port, root / "redis", aof=True)
    neo4j: services.Service | None = None
    try:
        neo4j = services.start_neo4j(
            "127.0.0.1", neo4j_port, root / "neo4j", Settings().state_dir, heap_mb=1024
        )
        runtime.configure(settings)  # the ledger, the look-ups and the inline writer use these
        return Bench(root, settings, runtime.graph(), redis, neo4j)
    except BaseException:
        runtime.close()
        if neo4j is not None:
            neo4j.stop()
        redis.stop()
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=4000)
    parser.add_argument("--processes", type=_ints, default=[1, 2, 4], help="e.g. 1,2,4")
    parser.add_argument("--concurrency", type=int, default=1, help="pool processes per worker")
    parser.add_argument("--agents", type=int, default=3, help="agents per channel")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--batch", type=int, default=50, help="events per ingest task")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--warmup", type=int, default=4000, help="turns written inline first, untimed"
    )
    parser.add_argument(
        "--warmup-rounds",
        type=int,
        default=10,
        help="batched warm-up rounds at most (they stop once Neo4j's JIT settles)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per phase")
    parser.add_argument("--data", type=Path, default=None, help="data tree (../shared/data)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="emit turns/s, paced (default: all at once)"
    )
    parser.add_argument(
        "--stored", type=int, default=0, help="episodes bulk-loaded (another tenant) first"
    )
    parser.add_argument(
        "--fold",
        action="store_true",
        help="pipeline workers also fold summaries (memsync worker's default queues)",
    )
    args = parser.parse_args()
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; choose from {', '.join(PHASES)}")
    try:
        data = shared_data_dir(args.data)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    base = workload(data, turns=args.turns, agents=args.agents, seed=args.seed)
    messages = sum(len(e["messages"]) for e in base)
    run = uuid.uuid4().hex[:6]
    root = Path(tempfile.mkdtemp(prefix="memsync-syncpath-"))
    results: list[dict[str, Any]] = []
    counts: dict[str, dict[str, int]] = {}
    try:
        bench = start_bench(root, args.concurrency, args.batch)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        init_schema(bench.graph)
        if args.stored > 0:
            # Episodes already in the graph (another tenant, bulk-loaded): the per-turn cost
            # should not grow with them.
            print(f"-- storing {args.stored} episodes first (bench/bulkload.py) ...", flush=True)
            began = time.perf_counter()
            stored = Tenant(f"sync{run}-stored", load_corpus(data))
            for _ in load_episodes(bench.graph, stored, 0, args.stored):
                pass
            print(f"   stored in {time.perf_counter() - began:.0f} s", flush=True)
        if args.warmup > 0 and base:
            # A cold JVM and empty plan caches would handicap whichever phase runs first.
            print(f"-- warm-up: {args.warmup} turns inline on their own tenants ...", flush=True)
            warm_up(bench, base[: args.warmup], args.batch, args.warmup_rounds, f"sync{run}-warmup")
        for phase in phases:
            steps = args.processes if phase == "pipeline" else [0]
            for processes in steps:
                label = f"p{processes}" if phase == "pipeline" else phase
                load = retenant(base, f"sync{run}-{label}")
                print(f"-- {phase}{f' P={processes}' if processes else ''} ...", flush=True)
                neo4j_before = threadcpu.by_thread(bench.neo4j.process.pid)
                redis_before = threadcpu.process_seconds(bench.redis.process.pid)
                own_before = time.process_time()
                if phase == "pipeline":
                    queues = (INGEST_QUEUE, SYNC_QUEUE, *((FOLD_QUEUE,) if args.fold else ()))
                    result = run_pipeline(
                        bench, load, processes, args.concurrency, args.timeout, queues, args.rate
                    )
                elif phase == "inline":
                    result = run_inline(bench, load)
                else:
                    result = run_ceiling(bench, load)
                result["neo4j_cpu_s"] = threadcpu.by_role(
                    neo4j_before, threadcpu.by_thread(bench.neo4j.process.pid)
                )
                result["redis_cpu_s"] = round(
                    threadcpu.process_seconds(bench.redis.process.pid) - redis_before, 2
                )
                result["bench_cpu_s"] = round(time.process_time() - own_before, 2)
                counts[result["phase"]] = tenant_counts(bench.graph, load[0]["tenant"])
                result["graph"] = counts[result["phase"]]
                results.append(result)
                print(f"   {result['turns_per_s']:.1f} turns/s in {result['seconds']:.2f} s")
    finally:
        runtime.close()
        bench.neo4j.stop()
        bench.redis.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"\nturns {args.turns} ({messages} messages, {args.agents} agents a channel, 10 channels, "
        f"seed {args.seed}); producer batch {args.batch}; worker concurrency {args.concurrency}; "
        f"warm-up {args.warmup} turns inline, a turn at a time then in batches until Neo4j's "
        f"JIT compiler took under {WARM_COMPILER_SHARE:.0%} of its CPU; ledger polled every "
        f"{POLL_SECONDS * 1000:.0f} ms "
        f"(a lag is late by at most that plus one poll); ceiling: UNWIND batches of {BATCH_ROWS} "
        "rows"
    )
    print("\ngraph written per phase (tenant_counts):")
    print(counts_table(counts))
    for r in results:
        if r["kind"] == "ceiling":
            print(f"ceiling rows: {r['rows']} in {r['transactions']} transactions")
        if r["kind"] == "pipeline":
            procs = ", ".join(
                f"{p['role']} {p['peak_rss_mb']:.0f}" for p in r["worker_peak_rss_mb"]
            )
            print(
                f"{r['phase']}: worker peak RSS MB [{procs}]; complete {r['complete']}/"
                f"{r['turns']} ({r['complete_at_first_poll']} at the first poll, after all emits); "
                f"poll cost p50 {r['poll']['cost_ms']['p50']:.1f} ms; "
                f"transactions retried {r['transactions_retried']}; {slowest_text(r)}"
            )
    print(
        "\nCPU seconds per phase: Neo4j (by thread: queries, JIT compiler, GC, other), Redis, "
        "the worker processes (pool processes and start-up included) and this bench process "
        "(the producer, or the inline writer):"
    )
    for r in results:
        c = r["neo4j_cpu_s"]
        workers = f"{r['workers_cpu_s']:6.1f}" if "workers_cpu_s" in r else "     -"
        print(
            f"{r['phase']:<15} neo4j {c['total']:6.1f} (queries {c['queries']:5.1f}, "
            f"compiler {c['compiler']:5.1f}, gc {c['gc']:4.1f}, other {c['other']:4.1f})  "
            f"redis {r['redis_cpu_s']:5.1f}  workers {workers}  bench {r['bench_cpu_s']:6.1f}"
        )
    budget = cpu_budget(results, os.cpu_count() or 1)
    if budget:
        print("\nCPU a turn, start-up left out, and the budget half the ceiling leaves:")
        print("\n".join(budget))
    print()
    print(table(results))
    print(
        "\npeak RSS: pipeline = largest worker process (main or pool child); inline and ceiling "
        "= this bench process. Redis/Neo4j peaks are in the JSON."
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                jsonable(
                    {
                        "config": {
                            "turns": args.turns,
                            "messages": messages,
                            "agents": args.agents,
                            "channels": 10,
                            "seed": args.seed,
                            "processes": args.processes,
                            "concurrency": args.concurrency,
                            "producer_batch": args.batch,
                            "poll_ms": POLL_SECONDS * 1000,
                            "ceiling_batch_rows": BATCH_ROWS,
                            "stored": args.stored,
                            "rate": args.rate,
                            "warmup": args.warmup,
                            "warmup_rounds": args.warmup_rounds,
                            "fold": args.fold,
                            "cpus": os.cpu_count(),
                        },
                        "results": results,
                    }
                ),
                indent=2,
                default=str,
            )
        )
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
