"""Embedding throughput on FriendsQA utterances, in messages per second, and the cost of one
query (what recall pays before its vector search), for each offline embedder.

Each utterance is embedded as the vector index stores it, labelled with its speaker
("Name (@handle): text"), in batches of 256 (MEMSYNC_EMBED_BATCH's default), in this process.
Reads the full set from ../shared/data, or the vendored slice in tests/data when it is absent.

Run: `.venv/bin/python -m bench.embedding [--embedder minilm|minilm-numpy|minilm-int8|wordllama|
all] [--batch 256] [--repeat 3] [--load N] [--use queries|batches|both]` (`minilm-numpy`: the same
model on its numpy fallback runtime; `minilm-int8`: in int8 throughout, as embed workers run it
with MEMSYNC_EMBED_QUANTIZED; `minilm-reader`: as `make_embedder` builds it for a long-lived
reader, queries in int8 and the latest 256 remembered by default; `--load N`: N CPU-bound
processes run beside it, as Neo4j and the other workers would on a shared machine; `--use`: as
a reader embeds, as an embed worker does, or both in turn).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

from bench.emitlatency import start_burners, stop_burners
from bench.shared import shared_data_dir
from memsync.settings import Settings
from pipeline.embedder import Embedder, WordLlamaEmbedder, labelled, make_embedder
from pipeline.minilm import MiniLMEmbedder
from tests.datasets import TESTS_DATA_DIR, friends_raw_events


def utterances() -> tuple[list[str], Path]:
    """Every FriendsQA utterance as labelled text, and the tree it came from."""
    try:
        root = shared_data_dir()
    except FileNotFoundError:
        root = TESTS_DATA_DIR
    texts: list[str] = []
    for event in friends_raw_events(root=root):
        names = {p["id"]: f"{p['display_name']} (@{p['handle']})" for p in event["participants"]}
        texts += [labelled(names[m["sender_id"]], m["content"]) for m in event["messages"]]
    return texts, root


def _reader(batches: bool) -> Embedder:
    """MiniLM as `make_embedder` builds it for a long-lived reader (for batches, an embed
    worker), under this process's MEMSYNC_* settings."""
    made = make_embedder(Settings(embedder="minilm"), use="batches" if batches else "queries")
    assert made is not None  # MiniLM is never "none"
    return made


# Each embedder as a reader (queries) or an embed worker (batches) would make it.
EMBEDDERS: dict[str, Callable[[bool], Embedder]] = {
    "minilm": lambda batches: MiniLMEmbedder(batches=batches),
    "minilm-numpy": lambda batches: MiniLMEmbedder(runtime="numpy", batches=batches),
    "minilm-int8": lambda batches: MiniLMEmbedder(batches=batches, quantized=True),
    "minilm-reader": _reader,
    "wordllama": lambda batches: WordLlamaEmbedder(),
}


QUERIES = (
    "what's our prod region?",
    "What did Ross say about the dinosaur exhibit at the museum?",
    "when is the launch?",
)


def rss_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(
    name: str, embedder: Embedder, texts: list[str], batch: int, repeat: int, use: str
) -> None:
    """Load time; as a reader (`use` queries) one query's p50, as an embed worker (batches) the
    throughput over `texts` (best of `repeat` passes); and the memory the process grew by."""
    before = rss_mb()
    started = time.perf_counter()
    embedder.embed(texts[:1])
    loaded = time.perf_counter() - started
    print(
        f"{name}: model {embedder.model}, {embedder.dimensions} dimensions, loaded in {loaded:.2f}s"
    )
    if use in ("queries", "both"):
        # The first round asks each question for the first time, the others again (which a
        # reader that remembers its recent queries answers without the model).
        rounds: list[list[float]] = []
        for _ in range(20):
            rounds.append([])
            for query in QUERIES:
                started = time.perf_counter()
                embedder.embed([query])
                rounds[-1].append(time.perf_counter() - started)
        first = sorted(rounds[0])
        again = sorted(t for later in rounds[1:] for t in later)
        print(
            f"  one query: first time p50 {first[len(first) // 2] * 1000:.2f} ms, max "
            f"{first[-1] * 1000:.2f} ms; asked again p50 {again[len(again) // 2] * 1000:.2f} ms, "
            f"max {again[-1] * 1000:.2f} ms; memory +{rss_mb() - before:,.0f} MB"
        )
    if use in ("batches", "both"):
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            for i in range(0, len(texts), batch):
                embedder.embed(texts[i : i + batch])
            best = min(best, time.perf_counter() - started)
        print(
            f"  batch {batch}: {len(texts) / best:,.0f} messages/s ({best:.2f}s per pass); "
            f"memory +{rss_mb() - before:,.0f} MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", choices=[*EMBEDDERS, "all"], default="all")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best is shown")
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes beside it")
    parser.add_argument(
        "--use",
        choices=("queries", "batches", "both"),
        default="both",
        help="as a reader, as an embed worker, or both in turn (run one use a process for a "
        "clean memory figure)",
    )
    args = parser.parse_args()
    texts, root = utterances()
    print(f"{len(texts)} labelled utterances from {root}; {args.load} CPU-bound processes beside")
    names = list(EMBEDDERS) if args.embedder == "all" else [args.embedder]
    burners = start_burners(args.load)
    try:
        for name in names:
            embedder = EMBEDDERS[name](args.use == "batches")
            measure(name, embedder, texts, args.batch, args.repeat, args.use)
    finally:
        stop_burners(burners)


if __name__ == "__main__":
    main()
