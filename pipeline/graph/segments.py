"""Segments in the graph: extend a pair's segments with its new episodes, and repair those an
erasure touched. The plan is pure (pipeline/segment.py); this module only reads and writes.

Maintained off the sync path, by the fold check that already runs per (agent, channel) under
that pair's lock (workers/worker/folding.py), so no two passes extend one pair at once and a
busy channel's sync transactions never share a segment node. A segment lags its channel by a
fold check (seconds); until then its messages rank on their own words alone.

Position: a pair's segments cover its episodes up to the last segment's (last_at, last_key) in
(created_at, key) order, and a pass reads what lies after it. An episode that arrives late with
an earlier time (a replayed dead letter, a spooled turn) lies before it: once a pass has caught
up, it sets the keys of the agent's latest `LATE_LOOKBACK` messages up to the position against
those the recent segments list, and only when some are missing reads them and appends them to
the open segment, out of time order (a segment is a bag of words to the ranking) and without
moving the position.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, NamedTuple

import neo4j

from pipeline.graph.cypher import segment as segment_cypher
from pipeline.graph.store import GraphStore, instant, native
from pipeline.graph.summaries import Position, channel_episodes, episode_text
from pipeline.segment import SEGMENT_SIZE, OpenSegment, SegmentAppend, segment
from pipeline.summarize import EpisodeText
from schemas.keys import scope_token

# Tokens of new episodes read per pass round: a long backlog is segmented in bounded writes.
READ_TOKENS: Final = 20_000
# A late message is looked for among the agent's latest this-many messages of the channel at or
# before the segments' position: a bounded read whatever the channel's size (counting the whole
# channel at every fold check took 0.26 s of Neo4j at 100k messages). One that arrives later
# than that is not segmented, and is found by its own words and vector alone.
LATE_LOOKBACK: Final = 2_000
REPAIR_PAGE: Final = 500


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
    late_lookback: int = LATE_LOOKBACK,
) -> Extended:
    """Append the pair's episodes not yet in a segment, READ_TOKENS at a time, for at most
    `max_rounds` rounds (None: until none are left); late ones are looked for among the latest
    `late_lookback`."""
    appended = rounds = 0
    pair = (tenant, agent_key, channel_key)
    while True:
        if max_rounds is not None and rounds >= max_rounds:
            return Extended(appended, more=True)
        rounds += 1
        last, position = _last_segment(graph, agent_key, channel_key)
        episodes = channel_episodes(
            graph, agent_key, channel_key, after=position, token_cap=READ_TOKENS
        )
        if not episodes:
            late = _late(graph, agent_key, channel_key, last, position, lookback=late_lookback)
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
    lookback: int = LATE_LOOKBACK,
) -> list[EpisodeText]:
    """The agent's messages among its latest `lookback` of the channel at or before the
    segments' position that no segment lists (they arrived late), in time order. The window's
    keys are set against the recent segments' (both bounded reads); only a key those lack is
    checked against every segment of the pair, then read."""
    if last is None or position is None:
        return []
    params: dict[str, Any] = {
        "agent_key": agent_key,
        "channel_key": channel_key,
        "until_time": position.created_at,
        "until_key": position.key,
        "lookback": lookback,
    }
    with graph.session(write=False) as session:
        recent = session.execute_read(
            lambda tx: [
                (r["key"], int(r["created_at"]))
                for r in tx.run(segment_cypher.RECENT_EPISODE_KEYS, params)
            ]
        )
        if not recent:
            return []
        params["since"] = instant(min(at for _, at in recent))
        listed = session.execute_read(
            lambda tx: {r["key"] for r in tx.run(segment_cypher.RECENT_SEGMENT_KEYS, params)}
        )
        missing = [key for key, _ in recent if key not in listed]
        if not missing:
            return []
        params["keys"] = missing
        elsewhere = session.execute_read(
            lambda tx: {r["key"] for r in tx.run(segment_cypher.LISTED_KEYS, params)}
        )
        late = [key for key in missing if key not in elsewhere]
        if not late:
            return []
        return session.execute_read(
            lambda tx: [episode_text(r) for r in tx.run(segment_cypher.EPISODES_BY_KEY, keys=late)]
        )


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
