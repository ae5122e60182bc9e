"""Episode vectors that know their conversation: a message, and each pair it forms with the
message before and after it in its channel, embedded and summed.

An answer rarely repeats its question's words ("Because I'm going to London" answers "why is
she packing?"); the model only sees them as close when it reads the two lines together. Each
pair is embedded once and lends to both its messages: the earlier one's vector is extended
when the later one arrives. A neighbour lends only if everyone who may see the episode also saw
it, so nothing an agent never heard shapes what it finds. Two embeddings a message, not three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import neo4j

from pipeline.embedder import Embedder, labelled
from pipeline.graph.cypher import embed as embed_cypher
from pipeline.graph.embeddings import Claim, PendingNode, claimed, embed_pending
from pipeline.graph.model import EPISODE
from pipeline.graph.store import GraphStore

# Each side of a pair keeps at most this many characters of what was said (the earlier
# message its end, the later its start, the part where one answers the other): the model reads
# 256 word pieces, about a thousand characters of English, and a long earlier message would
# otherwise push the later one out of the pair altogether.
PAIR_SIDE_CHARS: Final = 480


class Said(Protocol):
    """A message as a pair shows it: who said it and what."""

    @property
    def speaker_label(self) -> str | None: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Neighbour:
    """The message before or after a pending episode in its channel."""

    key: str
    speaker_label: str | None
    text: str


@dataclass(frozen=True)
class PendingEpisode:
    """A pending episode, the neighbours that may lend to its vector, and whether the message
    before it, embedded already without this one, may take their pair."""

    node: PendingNode
    before: Neighbour | None
    after: Neighbour | None
    extends_before: Neighbour | None


def pair_text(first: Said, second: Said) -> str:
    """Two consecutive messages as the model reads them together, each labelled and clipped to
    PAIR_SIDE_CHARS (the end of the first, the start of the second)."""
    earlier, later = first.text, second.text
    if len(earlier) > PAIR_SIDE_CHARS:
        earlier = "..." + earlier[-PAIR_SIDE_CHARS:]
    if len(later) > PAIR_SIDE_CHARS:
        later = later[:PAIR_SIDE_CHARS] + "..."
    return f"{labelled(first.speaker_label, earlier)}\n{labelled(second.speaker_label, later)}"


def pending_episodes(graph: GraphStore, limit: int) -> list[PendingEpisode]:
    """Up to `limit` pending episodes with their lending neighbours."""
    with graph.session(write=False) as session:
        records = list(session.run(embed_cypher.PENDING_EPISODES_IN_CONTEXT, limit=limit))
    found: list[PendingEpisode] = []
    for r in records:
        node = PendingNode(key=r["key"], text=r["text"], speaker_label=r["speaker_label"])
        before = after = None
        if r["before_key"] is not None:
            before = Neighbour(r["before_key"], r["before_speaker"], r["before_text"])
        if r["after_key"] is not None:
            after = Neighbour(r["after_key"], r["after_speaker"], r["after_text"])
        found.append(
            PendingEpisode(
                node=node,
                before=before if r["before_lends"] else None,
                after=after if r["after_lends"] else None,
                extends_before=before if r["before_takes"] else None,
            )
        )
    return found


@dataclass(frozen=True)
class Plan:
    """What one batch embeds: each distinct text once, and how the vectors add up."""

    texts: list[str]
    # Per episode of the batch: indexes into `texts` whose vectors sum to its own.
    parts: list[list[int]]
    # (earlier episode's key, this episode's key, index of their pair in `texts`).
    extensions: list[tuple[str, str, int]]


def plan(episodes: Sequence[PendingEpisode]) -> Plan:
    """Each message and each pair embedded once, however many episodes of the batch use it."""
    texts: list[str] = []
    index: dict[str, int] = {}

    def slot(text: str) -> int:
        if text not in index:
            index[text] = len(texts)
            texts.append(text)
        return index[text]

    parts: list[list[int]] = []
    extensions: list[tuple[str, str, int]] = []
    for episode in episodes:
        own = episode.node
        used = [slot(own.embed_text)]
        if episode.before is not None:
            used.append(slot(pair_text(episode.before, own)))
        if episode.after is not None:
            used.append(slot(pair_text(own, episode.after)))
        parts.append(used)
        if episode.extends_before is not None:
            pair = slot(pair_text(episode.extends_before, own))
            extensions.append((episode.extends_before.key, episode.node.key, pair))
    return Plan(texts, parts, extensions)


def _sum(vectors: Sequence[Sequence[float]]) -> list[float]:
    return [float(sum(column)) for column in zip(*vectors, strict=True)]


def embed_episodes(
    graph: GraphStore,
    embedder: Embedder,
    limit: int,
    claim: Claim | None = None,
    *,
    page: int = 0,
) -> tuple[int, int]:
    """Embed and store one batch of the episode backlog in conversation; returns (episodes
    taken, episodes stored). Vectors are computed before the transaction, never inside it."""
    episodes = claimed(
        lambda most: pending_episodes(graph, most), lambda e: e.node.key, limit, claim, page
    )
    if not episodes:
        return 0, 0
    batch = plan(episodes)
    vectors = embedder.embed(batch.texts)
    rows = [
        {
            "key": e.node.key,
            "text": e.node.text,
            "speaker_label": e.node.speaker_label,
            "embedding": _sum([vectors[i] for i in used]),
            "next_key": e.after.key if e.after is not None else None,
        }
        for e, used in zip(episodes, batch.parts, strict=True)
    ]
    extended = [
        {"key": earlier, "next_key": later, "pair": [float(x) for x in vectors[i]]}
        for earlier, later, i in batch.extensions
    ]
    model = embedder.model

    def write(tx: neo4j.ManagedTransaction) -> int:
        stored = tx.run(embed_cypher.STORE_EPISODES_IN_CONTEXT, rows=rows, model=model)
        count = int(stored.single(strict=True)["stored"])
        if extended:
            tx.run(embed_cypher.EXTEND_EPISODES, rows=extended, model=model).consume()
        return count

    with graph.session() as session:
        return len(episodes), session.execute_write(write)


def embed_batch(
    graph: GraphStore,
    embedder: Embedder,
    label: str,
    limit: int,
    claim: Claim | None = None,
    *,
    page: int = 0,
    in_context: bool = True,
) -> tuple[int, int]:
    """One batch of `label`'s backlog; episodes in conversation unless `in_context` is off
    (MEMSYNC_EMBED_CONTEXT=false: one embedding a message, each on its own)."""
    if label == EPISODE and in_context:
        return embed_episodes(graph, embedder, limit, claim, page=page)
    return embed_pending(graph, embedder, label, limit, claim, page=page)
