"""Segments: an agent's messages of one channel cut, in time order, into stretches of at most
SEGMENT_SIZE messages of one sitting, each searched by keyword as one document.

Why: a question usually names several things said across a stretch of conversation (who was
there, what happened), while the message that answers it names few of them. Scoring each
stretch as a whole tells recall which part of which conversation a question is about, and a
message in that part ranks above an equal match elsewhere (pipeline/rank.py `segment_prior`).
Measured offline on the FriendsQA dev half, plain BM25 over single messages: recall@10 0.511
alone, 0.586 with stretches of 16 (docs/benchmarks.md).

Pure: `segment` plans what to append, the graph side (pipeline/graph/segments.py) reads and
writes. The last segment of a pair stays open until it holds SEGMENT_SIZE messages or the
conversation pauses for longer than SITTING_GAP, so new messages append to it; later ones open
the next. A long conversation's sittings (chats days apart) so never share a segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from pydantic import BaseModel, ConfigDict

from pipeline.summarize import EpisodeText
from schemas.keys import compose_key

SEGMENT_SIZE: Final = 16
# A pause longer than this ends a sitting: the next message opens a new segment, and recall
# does not treat messages either side of it as neighbours (pipeline/rank.py). Thirty minutes of
# silence is the usual cut between two visits in session analytics; a busy channel's messages
# never pause that long mid-conversation, and two chats days apart are about different things.
SITTING_GAP: Final = timedelta(minutes=30)


class OpenSegment(BaseModel):
    """The pair's last segment as stored: its number and how many messages it holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    count: int
    # When its last message was said (None: not known, so no pause can be measured from it).
    last_at: datetime | None = None


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
    *,
    size: int = SEGMENT_SIZE,
    gap: timedelta = SITTING_GAP,
) -> list[SegmentAppend]:
    """Where each new episode (in time order, none segmented yet) goes: the open segment while
    it has room and the conversation has not paused for longer than `gap`, else a new one."""
    if size < 1:
        raise ValueError(f"segment size must be at least 1 (got {size})")
    seq, count = (0, size) if last is None else (last.seq, last.count)
    previous = None if last is None else last.last_at
    parts: list[tuple[int, list[EpisodeText]]] = []
    for episode in episodes:
        if count >= size or (previous is not None and episode.created_at - previous > gap):
            seq, count = seq + 1, 0
        if not parts or parts[-1][0] != seq:
            parts.append((seq, []))
        parts[-1][1].append(episode)
        count += 1
        previous = episode.created_at if previous is None else max(previous, episode.created_at)
    return [
        SegmentAppend(
            key=segment_key(agent_key, channel_key, number),
            seq=number,
            episode_keys=[e.key for e in part],
            lines=[line(e) for e in part],
            last_at=part[-1].created_at,
            last_key=part[-1].key,
        )
        for number, part in parts
    ]
