"""Reads at once: how many recalls a second one reading process and its Neo4j serve, and the
latency callers see, as more callers ask at the same time.

A platform calls `memsync.Memory` from many request threads (the HTTP API's `asyncio.to_thread`
does the same), so the figure an operator sizes a reader box by is the throughput at
saturation and the latency on the way there, not one caller's latency alone. For each kind
(recall hybrid, recall keyword, build_context) and each number of concurrent callers, a fixed
count of the latency bench's queries is shared among that many threads, each calling one
shared `Memory` in a closed loop (a caller asks again as soon as it has its answer). Printed per
level: calls a second, p50 / p95 / p99 of each call, and CPU per call of this process (every
thread: the query's embedding, the vector product, the driver) and of Neo4j.

`--serve` asks the same through the HTTP API instead, as a platform not written in Python
would: the bench starts `memsync serve` on the held graph and each thread keeps one HTTP
connection to it; the reader's CPU is then the server process's.

Run on a graph that `bench.latency` holds (its own Neo4j, one tenant of 10k or 100k episodes):
`.venv/bin/python -m bench.latency --sizes 100000 --queries 200 --rates "" --hold FILE`, then
`.venv/bin/python -m bench.readload --attach FILE [--concurrency 1,2,4,8] [--calls 400]
[--serve]`.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.bulkload import Tenant, load_corpus
from bench.latency import TENANT, Ask, _cpu_seconds, asks, settle, summary
from bench.shared import shared_data_dir
from memsync.reading import Memory
from memsync.settings import Settings
from pipeline.embedder import make_embedder
from pipeline.graph.store import GraphStore
from schemas.recall import RecallMode
from tests.datasets import TESTS_DATA_DIR
from workers.local import services

Call = Callable[[Ask], object]
KINDS = ("recall hybrid", "recall keyword", "build_context")


def recall_body(ask: Ask, mode: RecallMode) -> dict[str, Any]:
    """The recall a query asks for: a RecallQuery's fields, as `Memory.recall` and /v1/recall
    take them."""
    return {
        "tenant": TENANT,
        "agent_id": ask.agent_id,
        "channel_id": ask.channel_id,
        "query": ask.text,
        "mode": mode,
    }


def context_body(ask: Ask) -> dict[str, Any]:
    """The context a query asks for, as /v1/context takes it."""
    return {
        "tenant": TENANT,
        "agent_id": ask.agent_id,
        "channel_id": ask.context_channel,
        "query": ask.text,
    }


def kinds_of(
    recall: Callable[[dict[str, Any]], object], context: Callable[[dict[str, Any]], object]
) -> dict[str, Call]:
    """Each kind asked of a reader that takes the bodies above."""
    return {
        "recall hybrid": lambda ask: recall(recall_body(ask, "hybrid")),
        "recall keyword": lambda ask: recall(recall_body(ask, "keyword")),
        "build_context": lambda ask: context(context_body(ask)),
    }


def calls(memory: Memory) -> dict[str, Call]:
    """Each kind as a platform makes it, through the public reading API."""

    def context(body: dict[str, Any]) -> object:
        return memory.build_context(
            body["agent_id"], body["channel_id"], tenant=body["tenant"], query=body["query"]
        )

    return kinds_of(lambda body: memory.recall(**body), context)


def http_calls(port: int) -> tuple[dict[str, Call], Callable[[], None]]:
    """Each kind through the HTTP API on this machine's `port`, one connection per thread; and
    what closes every connection opened."""
    local = threading.local()
    opened: list[http.client.HTTPConnection] = []
    lock = threading.Lock()

    def close() -> None:
        with lock:
            for connection in opened:
                connection.close()

    def post(path: str, body: dict[str, Any]) -> object:
        payload = json.dumps(body)
        for attempt in (1, 2):
            connection: http.client.HTTPConnection | None = getattr(local, "connection", None)
            if connection is None:
                connection = local.connection = http.client.HTTPConnection("127.0.0.1", port, 60)
                with lock:
                    opened.append(connection)
            try:
                connection.request("POST", path, payload, {"Content-Type": "application/json"})
                response = connection.getresponse()
                answer = response.read()
            except (ConnectionError, http.client.RemoteDisconnected):
                # The server closes a connection idle past its keep-alive (a thread that sat
                # out a level): open another and ask again; reads change nothing.
                connection.close()
                local.connection = None
                if attempt == 2:
                    raise
                continue
            if response.status != 200:
                raise RuntimeError(f"{path}: HTTP {response.status}: {answer[:300]!r}")
            return json.loads(answer)
        raise AssertionError("unreachable: the second attempt returns or raises")

    kinds = kinds_of(lambda body: post("/v1/recall", body), lambda body: post("/v1/context", body))
    return kinds, close


@contextmanager
def served(uri: str, cache_mb: int) -> Iterator[tuple[int, int]]:
    """`memsync serve` on a free loopback port over the graph at `uri`: (port, pid). It is
    ready when it answers /v1/health at all (it has no broker here, so health says 503)."""
    port = services.free_port()
    scratch = Path(tempfile.mkdtemp(prefix="memsync-readload-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSYNC_")}
    env.update(
        MEMSYNC_NEO4J_URI=uri,
        MEMSYNC_RECALL_QUERY_VECTORS="0",
        MEMSYNC_RECALL_VECTOR_CACHE_MB=str(cache_mb),
        # Nothing is emitted: an unused broker address, and a spool of its own.
        MEMSYNC_BROKER_URL=f"redis://127.0.0.1:{services.free_port()}/0",
        MEMSYNC_SPOOL_DIR=str(scratch / "spool"),
    )
    log = (scratch / "serve.log").open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "memsync"), "serve", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"memsync serve did not start: see {scratch / 'serve.log'}")
            time.sleep(0.2)  # polling the port until the server listens
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def _answers(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, 2)
    try:
        connection.request("GET", "/v1/health")
        connection.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        connection.close()


def run_level(
    call: Call,
    queries: Sequence[Ask],
    callers: int,
    neo4j_pid: int,
    reader_pid: int | None = None,
) -> dict[str, Any]:
    """`queries` shared among `callers` threads, each asking in a closed loop; throughput,
    latency and CPU per call (the reader's: this process's, or `reader_pid`'s)."""
    took: list[float] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    pending = iter(queries)

    def caller() -> None:
        while True:
            with lock:
                ask = next(pending, None)
            if ask is None:
                return
            started = time.perf_counter()
            try:
                call(ask)
            except Exception as exc:  # counted and reported; the level still finishes
                with lock:
                    failures.append(exc)
                continue
            with lock:
                took.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=caller, name=f"caller-{i}") for i in range(callers)]

    def reader_cpu() -> float:
        return _cpu_seconds(reader_pid) if reader_pid is not None else time.process_time()

    cpu, neo4j_cpu = reader_cpu(), _cpu_seconds(neo4j_pid)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    done = max(len(took), 1)
    return {
        **(summary(took) if took else {}),
        "callers": callers,
        "calls": len(took),
        "failed": len(failures),
        "first_failure": repr(failures[0]) if failures else None,
        "calls_per_second": len(took) / wall,
        "reader_cpu_ms": (reader_cpu() - cpu) * 1000 / done,
        "neo4j_cpu_ms": (_cpu_seconds(neo4j_pid) - neo4j_cpu) * 1000 / done,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attach", type=Path, required=True, help="a graph bench.latency holds")
    parser.add_argument("--concurrency", default="1,2,4,8", help="callers at once, per level")
    parser.add_argument("--calls", type=int, default=400, help="calls per kind and level")
    parser.add_argument("--warmup", type=int, default=200, help="calls per kind before timing")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    parser.add_argument("--vector-cache-mb", type=int, default=512)
    parser.add_argument("--serve", action="store_true", help="through `memsync serve`'s API")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",") if c]
    kinds = [k for k in args.kinds.split(",") if k]
    if not levels or min(levels) < 1:
        parser.error(f"--concurrency: whole numbers of at least 1 (got {args.concurrency!r})")
    if set(kinds) - set(KINDS):
        parser.error(f"--kinds: of {', '.join(KINDS)} (got {args.kinds!r})")
    out = sys.stderr if args.json == "-" else sys.stdout

    def say(*parts: object) -> None:
        print(*parts, file=out, flush=True)

    try:
        root = shared_data_dir()
    except FileNotFoundError:
        root = TESTS_DATA_DIR
    corpus = load_corpus(root)
    held = json.loads(args.attach.read_text())
    tenant = Tenant(TENANT, corpus)
    warm = asks(tenant, corpus, args.warmup, 11)
    queries = asks(tenant, corpus, args.calls, 12)
    report: dict[str, Any] = {"size": held["size"], "served": args.serve, "levels": {}}
    with reader(held["uri"], args.vector_cache_mb, serve=args.serve) as (run, reader_pid, loaded):
        say(
            f"attached to the {held['size']:,}-episode graph at {held['uri']}"
            f"{' through memsync serve' if args.serve else ''}; Neo4j settled in "
            f"{settle(held['pid']):.1f} s"
        )
        for kind in kinds:
            for ask in warm:
                run[kind](ask)
            # Every agent's scope in the reader's vector cache before timing (steady state).
            for ask in {ask.agent_id: ask for ask in queries}.values():
                run[kind](ask)
            loaded()
            say(f"\n{kind}, {held['size']:,} episodes, {len(queries)} calls a level")
            say(
                "  callers   calls/s     p50     p95     p99   reader cpu  neo4j cpu"
                "  (ms; cpu per call)"
            )
            rows = []
            for callers in levels:
                row = run_level(run[kind], queries, callers, held["pid"], reader_pid)
                rows.append(row)
                failed = (
                    f"  {row['failed']} failed, first: {row['first_failure']}"
                    if row["failed"]
                    else ""
                )
                say(
                    f"  {callers:>7} {row['calls_per_second']:>9.1f} {row['p50']:>7.1f} "
                    f"{row['p95']:>7.1f} {row['p99']:>7.1f} {row['reader_cpu_ms']:>12.1f} "
                    f"{row['neo4j_cpu_ms']:>10.1f}{failed}"
                )
            report["levels"][kind] = rows
    if args.json is not None:
        text = json.dumps(report, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")


@contextmanager
def reader(
    uri: str, cache_mb: int, *, serve: bool
) -> Iterator[tuple[dict[str, Call], int | None, Callable[[], object]]]:
    """The calls of a `Memory` in this process or of `memsync serve`; the reader's pid when it
    is another process; and a wait until the reader's vector cache holds what was asked for."""
    if serve:
        with served(uri, cache_mb) as (port, pid):
            run, close = http_calls(port)
            try:
                # The server's background loads are done when it goes quiet.
                yield run, pid, functools.partial(settle, pid)
            finally:
                close()
        return
    # Every call pays its query's embedding, as in bench.latency.
    settings = Settings(recall_query_vectors=0)
    graph = GraphStore.connect(uri, "neo4j", None, "neo4j", vector_cache_mb=cache_mb)
    memory = Memory(
        graph,
        embedder=make_embedder(settings),
        dm_policy=settings.dm_memory_policy,
        owns_graph=True,
    )
    try:
        yield calls(memory), None, functools.partial(graph.vectors.wait_for_loads, 600)
    finally:
        memory.close()


if __name__ == "__main__":
    main()
