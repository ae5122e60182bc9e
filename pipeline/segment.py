"""Segments: an agent's messages of one channel cut, in time order, into stretches of
SEGMENT_SIZE messages, each searched by keyword as one document.

Why: a question usually names several things said across a stretch of conversation (who was
there, what happened), while the message that answers it names few of them. Scoring each
stretch as a whole tells recall which part of which conversation a question is about, and a
message in that part ranks above an equal match elsewhere (pipeline/rank.py `segment_prior`).
Measured offline on the FriendsQA dev half, plain BM25 over single messages: recall@10 0.511
alone, 0.586 with stretches of 16 (docs/benchmarks.md).

Pure: `segment` plans what to append, the graph side (pipeline/graph/segments.py) reads and
writes. The last segment of a pair stays open until it holds SEGMENT_SIZE messages, so new
messages append to it; later ones open the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from pydantic import BaseModel, ConfigDict

from pipeline.summarize import EpisodeText
from schemas.keys import compose_key

SEGMENT_SIZE: Final = 16


class OpenSegment(BaseModel):
    """The pair's last segment as stored: its number and how many messages it holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    count: int


class SegmentAppend(BaseModel):
    """Messages to add to one segment (created when `seq` is new), in time order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    seq: int
    episode_keys: list[str]
    lines: list[str]
    last_at: datetime
    last_key: str


def segment_key(agent_key: str, channel_key: str, seq: int) -> str:
    """One segment's key: agent and channel keys are tenant-qualified already."""
    return compose_key(agent_key, "segment", channel_key, str(seq))


def line(episode: EpisodeText) -> str:
    """A message as its segment's text holds it: who said it, then what."""
    return f"{episode.speaker_label}: {episode.content}"


def segment(
    agent_key: str,
    channel_key: str,
    last: OpenSegment | None,
    episodes: Sequence[EpisodeText],
    size: int = SEGMENT_SIZE,
) -> list[SegmentAppend]:
    """Where each new episode (in time order, none segmented yet) goes: the open segment while
    it has room, then new segments of `size`."""
    if size < 1:
        raise ValueError(f"segment size must be at least 1 (got {size})")
    seq, room = (1, size) if last is None else (last.seq, size - last.count)
    if room <= 0:
        seq, room = seq + 1, size
    appends: list[SegmentAppend] = []
    rest = list(episodes)
    while rest:
        part, rest = rest[:room], rest[room:]
        appends.append(
            SegmentAppend(
                key=segment_key(agent_key, channel_key, seq),
                seq=seq,
                episode_keys=[e.key for e in part],
                lines=[line(e) for e in part],
                last_at=part[-1].created_at,
                last_key=part[-1].key,
            )
        )
        seq, room = seq + 1, size
    return appends
