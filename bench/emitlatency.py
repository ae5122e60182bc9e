"""emit() latency with the broker up and down, on a quiet and on a loaded machine (issue 9).

Starts a private Redis (AOF) on a free loopback port; no worker is needed, since emit() only
validates and buffers and the publisher thread sends to Redis. For each condition a fresh
producer (fresh spool directory) emits `--events` turns of the sync-path workload
(bench/syncload.py, real text) at a steady `--rate` (so the publisher thread interleaves with
the caller as it would on a platform, rather than in a tight loop), each call timed with
perf_counter_ns, then the producer is flushed and closed. Broker down means Redis stopped: the
producer spools. Loaded means N CPU-bound processes (`while True: pass`) run beside it.

Each call's involuntary context switches are counted too (getrusage of the calling thread, read
outside the timed span): a slow call with one inside it was preempted by the operating system,
which nothing in the producer can prevent.

Run: `.venv/bin/python -m bench.emitlatency [--events 20000] [--load 0,2] [--rate 2000]
[--json PATH]`.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.gcpauses import Collections, slowest_call
from bench.shared import shared_data_dir
from bench.syncload import DEFAULT_SEED, RawEvent, jsonable, spread, workload
from memsync.producer import Producer
from memsync.settings import Settings
from workers.local import services

BURN = "while True: pass"
SLOW_NS = 1_000_000


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` CPU-bound processes; the caller kills them (see stop_burners) in a finally."""
    burners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            burners.append(subprocess.Popen([sys.executable, "-c", BURN]))
    except BaseException:
        stop_burners(burners)
        raise
    return burners


def stop_burners(burners: list[subprocess.Popen[bytes]]) -> None:
    for process in burners:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def emit_run(
    settings: Settings, events: list[RawEvent], rate: float, flush_timeout: float
) -> dict[str, Any]:
    """Emit every event at `rate` a second through a fresh producer; time each emit() call."""
    producer = Producer(settings)
    latencies: list[int] = []
    starts: list[int] = []
    preempted: list[bool] = []
    interval_ns = int(1e9 / rate)
    collections = Collections()
    try:
        start = time.perf_counter_ns()
        with collections:
            for index, event in enumerate(events):
                due = start + index * interval_ns
                ahead = due - time.perf_counter_ns()
                if ahead > 0:
                    time.sleep(ahead / 1e9)
                switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
                before = time.perf_counter_ns()
                producer.emit(event)
                latencies.append(time.perf_counter_ns() - before)
                starts.append(before)
                preempted.append(resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw > switches)
        emitted = time.perf_counter_ns()
        flushed = producer.flush(timeout=flush_timeout)
        drained = time.perf_counter_ns()
    finally:
        producer.close(timeout=flush_timeout)
    slow = [was for took, was in zip(latencies, preempted, strict=True) if took > SLOW_NS]
    return {
        "events": len(events),
        "rate": rate,
        "achieved_rate": len(events) / ((emitted - start) / 1e9),
        "emit_us": {k: v / 1e3 if k != "n" else v for k, v in spread(latencies).items()},
        "emit_slowest": slowest_call(starts, latencies, collections),
        "slow": len(slow),
        "slow_preempted": sum(slow),
        "preempted": sum(preempted),
        "flushed": flushed,
        "flush_ms": (drained - emitted) / 1e6,
        "published": producer.counters["published"],
        "spooled": producer.counters["spooled"],
    }


def table(runs: list[dict[str, Any]]) -> str:
    header = (
        f"{'broker':<7} {'load':>4} {'events':>7} {'rate/s':>7} {'p50 us':>8} {'p99 us':>8} "
        f"{'max us':>9} {'max in GC us':>12} {'>1 ms':>6} {'preempted':>9} {'published':>9} "
        f"{'spooled':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in runs:
        e = r["emit_us"]
        lines.append(
            f"{r['broker']:<7} {r['load']:>4} {r['events']:>7} {r['achieved_rate']:>7.0f} "
            f"{e['p50']:>8.0f} {e['p99']:>8.0f} {e['max']:>9.0f} "
            f"{r['emit_slowest'].get('full_gc_ms', 0.0) * 1e3:>12.0f} {r['slow']:>6} "
            f"{r['slow_preempted']:>9} {r['published']:>9} "
            f"{r['spooled']:>8}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument(
        "--load", default="0,2", help="CPU-bound processes beside the emitter, e.g. 0,2"
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="emit() calls a second")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--data", type=Path, default=None, help="data tree (../shared/data)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()
    loads = [int(x) for x in args.load.split(",") if x.strip()]
    if args.rate <= 0 or args.events < 1:
        parser.error("--rate and --events must be positive")
    try:
        data = shared_data_dir(args.data)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    events = workload(data, turns=args.events, seed=args.seed, tenant="bench-emit")
    flush_timeout = max(60.0, args.events / 100)
    root = Path(tempfile.mkdtemp(prefix="memsync-emitlatency-"))
    port = services.free_port()
    base = Settings(
        broker_url=f"redis://127.0.0.1:{port}/0",
        spool_dir=root / "spool",
        producer_buffer=max(10_000, args.events + 1),
    )
    runs: list[dict[str, Any]] = []
    redis_service = services.start_redis("127.0.0.1", port, root / "redis", aof=True)
    try:
        for broker in ("up", "down"):
            if broker == "down":
                redis_service.stop()
            for load in loads:
                if broker == "up":  # each run starts from an empty broker
                    client = redis.Redis(host="127.0.0.1", port=port)
                    try:
                        client.flushdb()
                    finally:
                        client.close()
                spool = root / f"spool-{broker}-{load}"
                settings = base.model_copy(update={"spool_dir": spool})
                print(f"-- broker {broker}, {load} CPU-bound processes ...", flush=True)
                burners = start_burners(load)
                try:
                    result = emit_run(settings, events, args.rate, flush_timeout)
                finally:
                    stop_burners(burners)
                shutil.rmtree(spool, ignore_errors=True)
                runs.append({"broker": broker, "load": load, **result})
    finally:
        redis_service.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"\n{args.events} events a run (sync-path workload, seed {args.seed}) at a steady "
        f"{args.rate:.0f}/s; producer batch {base.producer_batch}; {len(loads)} load levels; "
        "broker down = Redis stopped, the producer spools; '>1 ms' counts slow calls, "
        "'preempted' those of them the OS switched out (an involuntary context switch inside)"
    )
    print(table(runs))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        config = {"events": args.events, "rate": args.rate, "loads": loads, "seed": args.seed}
        args.json.write_text(json.dumps(jsonable({"config": config, "runs": runs}), indent=2))
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
