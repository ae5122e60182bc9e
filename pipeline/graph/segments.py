"""Segments in the graph: extend a pair's segments with its new episodes, and repair those an
erasure touched. The plan is pure (pipeline/segment.py); this module only reads and writes.

Maintained off the sync path, by the fold check that already runs per (agent, channel) under
that pair's lock (workers/worker/folding.py), so no two passes extend one pair at once and a
busy channel's sync transactions never share a segment node. A segment lags its channel by a
fold check (seconds); until then its messages rank on their own words alone.

Position: a pair's segments cover its episodes up to the last segment's (last_at, last_key) in
(created_at, key) order, and a pass reads what lies after it. An episode that arrives late with
an earlier time (a replayed dead letter, a spooled turn) lies before it: once a pass has caught
up, it reads which messages said since `late_since` no segment lists and appends them to the
open segment, out of time order (a segment is a bag of words to the ranking) and without moving
the position. `late_since` bounds that look by how late a message came, not by how long the
channel is: the fold check passes the earliest message time written since its last pass
(workers/state/latemessages.py), None when nothing written could be late, or EVER (an audit,
now and then: how many messages the segments list against how many the agent observed, the
whole channel counted, and only when they differ which are missing).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

import neo4j

from pipeline.graph.cypher import segment as segment_cypher
from pipeline.graph.store import GraphStore, native
from pipeline.graph.summaries import Position, channel_episodes
from pipeline.segment import SEGMENT_SIZE, OpenSegment, SegmentAppend, segment
from pipeline.summarize import EpisodeText
from schemas.keys import scope_token

# Tokens of new episodes read per pass round: a long backlog is segmented in bounded writes.
READ_TOKENS: Final = 20_000
REPAIR_PAGE: Final = 500
# `late_since` for a look through the whole channel up to the position.
EVER: Final = datetime.min.replace(tzinfo=UTC)


class Extended(NamedTuple):
    """What one pass did: episodes appended, and whether it stopped at its bound with more
    left (a pair's first pass over a long history)."""

    appended: int
    more: bool


def extend_segments(
    graph: GraphStore,
    tenant: str,
    agent_key: str,
    channel_key: str,
    *,
    size: int = SEGMENT_SIZE,
    max_rounds: int | None = None,
    late_since: datetime | None = EVER,
) -> Extended:
    """Append the pair's episodes not yet in a segment, READ_TOKENS at a time, for at most
    `max_rounds` rounds (None: until none are left); then those said at or after `late_since`
    that arrived after the segments had passed them (None: look for none)."""
    appended = rounds = 0
    pair = (tenant, agent_key, channel_key)
    start: Position | None = None
    while True:
        if max_rounds is not None and rounds >= max_rounds:
            return Extended(appended, more=True)
        rounds += 1
        last, position = _last_segment(graph, agent_key, channel_key)
        if rounds == 1:
            start = position
        episodes = channel_episodes(
            graph, agent_key, channel_key, after=position, token_cap=READ_TOKENS
        )
        if not episodes:
            # A message said after the first round's position was read in time order above.
            if late_since is None or start is None or late_since > start.created_at:
                return Extended(appended, more=False)
            late = _late(graph, agent_key, channel_key, last, position, since=late_since)
            if late:
                plan = segment(agent_key, channel_key, last, late, size=size)
                if _write(graph, plan, last, pair=pair, keep=position):
                    appended += len(late)
            return Extended(appended, more=False)
        plan = segment(agent_key, channel_key, last, episodes, size=size)
        if not _write(graph, plan, last, pair=pair):
            # Another pass moved the segments meanwhile: it carries on.
            return Extended(appended, more=False)
        appended += len(episodes)


def _write(
    graph: GraphStore,
    plan: list[SegmentAppend],
    last: OpenSegment | None,
    *,
    pair: tuple[str, str, str],
    keep: Position | None = None,
) -> bool:
    """Append `plan` in one transaction; False when another pass changed a segment first (its
    rows wrote nothing). With `keep`, the segments' position stays there (late messages)."""
    if not plan:
        return True
    tenant, agent_key, channel_key = pair
    rows: list[dict[str, Any]] = [
        {
            "key": part.key,
            "seq": part.seq,
            "episode_keys": part.episode_keys,
            "expected_count": last.count if last is not None and part.seq == last.seq else 0,
            "last_at": keep.created_at if keep else part.last_at,
            "last_key": keep.key if keep else part.last_key,
        }
        for part in plan
    ]
    params = {
        "rows": rows,
        "tenant": tenant,
        "agent_key": agent_key,
        "channel_key": channel_key,
        "scope": " ".join((scope_token("agent", agent_key), scope_token("channel", channel_key))),
    }
    with graph.session() as session:
        written = session.execute_write(_append, params)
    return bool(written == len(rows))


def _late(
    graph: GraphStore,
    agent_key: str,
    channel_key: str,
    last: OpenSegment | None,
    position: Position | None,
    *,
    since: datetime,
) -> list[EpisodeText]:
    """The agent's messages of the channel said from `since` up to the segments' position that
    no segment lists (they arrived late), in time order. From EVER, counted first and read only
    when the counts differ: the whole channel's keys are a long read."""
    if last is None or position is None:
        return []
    params = {
        "agent_key": agent_key,
        "channel_key": channel_key,
        "until_time": position.created_at,
        "until_key": position.key,
        "since": None if since == EVER else since,
    }
    with graph.session(write=False) as session:
        if since == EVER:
            counts = session.execute_read(
                lambda tx: tx.run(segment_cypher.SEGMENT_COVERAGE, params).single(strict=True)
            )
            if int(counts["observed"]) <= int(counts["listed"]):
                return []
        listed = session.execute_read(
            lambda tx: {record["key"] for record in tx.run(segment_cypher.SEGMENT_KEYS, params)}
        )
    # Position's key "" sorts before every key: the read starts at `since` itself.
    after = None if since == EVER else Position(created_at=since, key="")
    before = channel_episodes(graph, agent_key, channel_key, after=after, until=position)
    return [episode for episode in before if episode.key not in listed]


def _append(tx: neo4j.ManagedTransaction, params: dict[str, Any]) -> int:
    record = tx.run(segment_cypher.APPEND_SEGMENTS, params).single(strict=True)
    return int(record["written"])


def _last_segment(
    graph: GraphStore, agent_key: str, channel_key: str
) -> tuple[OpenSegment | None, Position | None]:
    with graph.session(write=False) as session:
        record = session.execute_read(
            lambda tx: tx.run(
                segment_cypher.LAST_SEGMENT, agent_key=agent_key, channel_key=channel_key
            ).single()
        )
    if record is None:
        return None, None
    row = native(dict(record))
    last_at: datetime = row["last_at"]
    return OpenSegment(seq=row["seq"], count=row["count"], last_at=last_at), Position(
        created_at=last_at, key=row["last_key"]
    )


def repair_segments(graph: GraphStore, tenant: str | None, page: int = REPAIR_PAGE) -> int:
    """Rebuild (or delete) the tenant's (None: every tenant's) segments whose episodes were
    erased or are no longer observed by their agent, a page per transaction; how many."""
    repaired, after = 0, ""
    with graph.session() as session:
        while True:
            record = session.execute_write(_repair, tenant, after, page)
            if not record["seen"]:
                return repaired
            repaired += int(record["repaired"])
            after = record["last"]


def _repair(
    tx: neo4j.ManagedTransaction, tenant: str | None, after: str, page: int
) -> neo4j.Record:
    statement = segment_cypher.REPAIR_SEGMENTS
    return tx.run(statement, tenant=tenant, after=after, page=page).single(strict=True)
