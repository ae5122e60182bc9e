"""What a summary's re-anchor costs as a channel grows, and what its horizon keeps.

Every `MEMSYNC_SUMMARY_REANCHOR_EVERY` folds a rolling summary is rebuilt from raw episodes. Read
over the channel's whole history, that costs a read and a summary of every message so far, at
every re-anchor: quadratic over a channel's life, and an LLM summarizer's calls grow with it. A
re-anchor reads back only `MEMSYNC_SUMMARY_REANCHOR_TOKENS` from its position.

1. Cost (a private Neo4j): one channel of N episodes (bench/bulkload.py's texts and people, all
   in one channel), one observing agent; the read and the extractive rebuild of one re-anchor
   over the whole history and over the horizon, medians of `--repeats`.
2. Content (pure, ../shared/data): the Ubuntu IRC logs said in one channel, and FriendsQA's
   scenes in another; at twelve positions, the summary a re-anchor over the horizon writes
   against the one from the whole history: identical, and the share of lines in common.

    .venv/bin/python -m bench.reanchor --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from bench.bulkload import EPOCH, IRC_LINE, Channel, Person, Tenant, load, load_corpus
from bench.localservices import start_local
from memsync.settings import Settings
from pipeline.graph.schema import init_schema
from pipeline.graph.store import GraphStore
from pipeline.graph.summaries import channel_episodes
from pipeline.summarize import EpisodeText, ExtractiveSummarizer, episode_tokens, horizon
from tests.datasets import first_speaker, friends_scenes

# A group channel of the synthetic tenant; every episode is said in it.
CHANNEL_INDEX = 100


class OneChannel(Tenant):
    """The bulk tenant with every message in one channel, 30 s apart."""

    def message(self, i: int) -> tuple[Channel, Person, str, str, datetime]:
        _, _, role, text, _ = super().message(i)
        channel = self.channels[CHANNEL_INDEX]
        speaker = channel.agents[0] if role == "ai" else channel.humans[i % len(channel.humans)]
        return channel, speaker, role, text, EPOCH + timedelta(seconds=30 * i)

    @property
    def pair(self) -> tuple[str, str, str]:
        """(tenant, agent key, channel key) of the channel's observing agent."""
        channel = self.channels[CHANNEL_INDEX]
        return self.name, self.key(channel.agents[0]), self.channel_key(channel)


def grown_channel(
    name: str, sizes: Sequence[int], data: Path
) -> Iterator[tuple[GraphStore, OneChannel, int]]:
    """A private Neo4j (schema applied) whose one channel grows to each size in turn; stopped
    when the caller is done."""
    services = start_local(Path(tempfile.mkdtemp(prefix=f"memsync-{name}-")))
    try:
        init_schema(services.graph)
        tenant = OneChannel(f"bench-{name}", load_corpus(data))
        loaded = 0
        for size in sorted(sizes):
            for _ in load(services.graph, tenant, loaded, size):
                pass
            loaded = size
            yield services.graph, tenant, size
    finally:
        services.stop()


def timed(run: Callable[[], tuple[int, str]], repeats: int) -> tuple[float, int]:
    """Median seconds of `run` and the episodes it read."""
    seconds, read = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        read, _ = run()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), read


def rebuild(
    graph: GraphStore,
    pair: tuple[str, str, str],
    summarizer: ExtractiveSummarizer,
    last_tokens: int | None,
) -> tuple[int, str]:
    """One re-anchor: the episodes it reads (the last `last_tokens`, or all) and its summary."""
    raw = channel_episodes(graph, pair[1], pair[2], last_tokens=last_tokens)
    return len(raw), summarizer.rebuild(raw)


def cost(sizes: Sequence[int], repeats: int, data: Path) -> None:
    """Part 1: one re-anchor's read and rebuild at each size, whole history against horizon."""
    settings = Settings()
    summarizer = ExtractiveSummarizer(settings.summary_max_tokens)
    window = settings.summary_reanchor_tokens
    for graph, tenant, size in grown_channel("reanchor", sizes, data):
        reads = partial(rebuild, graph, tenant.pair, summarizer)
        whole, whole_read = timed(partial(reads, None), repeats)
        part, part_read = timed(partial(reads, window), repeats)
        print(
            f"{size:>9,} episodes: whole history {whole * 1000:8.0f} ms ({whole_read:,} read)"
            f" | last {window:,} tokens {part * 1000:6.0f} ms ({part_read:,} read)",
            flush=True,
        )


def irc_channel(data: Path) -> list[EpisodeText]:
    """The IRC logs, one file after another, as one channel."""
    found: list[EpisodeText] = []
    for day, path in enumerate(sorted((data / "irc-dev").glob("*.ascii.txt"))):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            match = IRC_LINE.match(line)
            if match:
                found.append(_episode(len(found), match[1], match[2], day))
    return found


def friends_channel(data: Path) -> list[EpisodeText]:
    """FriendsQA's scenes, one after another, as one channel."""
    found: list[EpisodeText] = []
    for scene in friends_scenes(data):
        for utterance in scene["utterances"]:
            found.append(_episode(len(found), first_speaker(utterance), utterance["utterance"], 0))
    return found


def _episode(i: int, speaker: str, text: str, day: int) -> EpisodeText:
    return EpisodeText(
        key=f"e{i:07d}",
        speaker_label=speaker,
        content=text,
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day, seconds=30 * i),
    )


def content(data: Path, horizons: Sequence[int]) -> None:
    """Part 2: the horizon's summary against the whole history's, on real channels."""
    summarizer = ExtractiveSummarizer(Settings().summary_max_tokens)
    for name, episodes in (("IRC", irc_channel(data)), ("FriendsQA", friends_channel(data))):
        tokens = sum(episode_tokens(e) for e in episodes)
        print(f"{name}: {len(episodes):,} messages, {tokens:,} tokens in one channel")
        step = len(episodes) // 12
        positions = range(step, step * 12 + 1, step)
        whole = {p: summarizer.rebuild(episodes[:p]) for p in positions}
        for cap in horizons:
            same, shares = 0, []
            # Where the history fits the horizon the two are the same by construction.
            longer = sum(sum(episode_tokens(e) for e in episodes[:p]) > cap for p in positions)
            for p in positions:
                part = summarizer.rebuild(horizon(episodes[:p], cap))
                same += part == whole[p]
                a, b = set(whole[p].splitlines()), set(part.splitlines())
                shares.append(len(a & b) / max(1, len(a | b)))
            print(
                f"  last {cap:>6,} tokens: identical at {same} of {len(shares)} positions"
                f" ({longer} with a longer history), lines in common"
                f" {statistics.mean(shares):.2f} (least {min(shares):.2f})"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--sizes", default="10000,100000", help="episodes in the channel")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--horizons", default="8000,16000,32000,64000")
    parser.add_argument("--no-cost", action="store_true", help="part 2 only (no Neo4j)")
    args = parser.parse_args(argv)
    content(args.data, [int(h) for h in args.horizons.split(",")])
    if not args.no_cost:
        cost([int(s) for s in args.sizes.split(",")], args.repeats, args.data)


if __name__ == "__main__":
    main()
