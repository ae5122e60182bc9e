"""Embedding throughput of the default embedder on FriendsQA utterances, in messages per second.

Each utterance is embedded as the vector index stores it, labelled with its speaker
("Name (@handle): text"), in batches of 256 (MEMSYNC_EMBED_BATCH's default), in this process.
Reads the full set from ../shared/data, or the vendored slice in tests/data when it is absent.

Run: `.venv/bin/python -m bench.embedding [--batch 256] [--repeat 3]`
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.shared import shared_data_dir
from pipeline.embedder import WordLlamaEmbedder, labelled
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best is shown")
    args = parser.parse_args()
    texts, root = utterances()
    embedder = WordLlamaEmbedder()
    started = time.perf_counter()
    embedder.embed(texts[:1])
    loaded = time.perf_counter() - started
    print(f"model {embedder.model}, {embedder.dimensions} dimensions, loaded in {loaded:.2f}s")
    print(f"{len(texts)} labelled utterances from {root}")
    best = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        for i in range(0, len(texts), args.batch):
            embedder.embed(texts[i : i + args.batch])
        best = min(best, time.perf_counter() - started)
    print(f"batch {args.batch}: {len(texts) / best:,.0f} messages/s ({best:.2f}s per pass)")


if __name__ == "__main__":
    main()
