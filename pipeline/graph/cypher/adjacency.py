"""The episodes next to one in its channel, by time: recall's neighbours and the embedder's
conversation pairs ask the same question."""

from __future__ import annotations

from pipeline.graph.model import EPISODE


def _hint(n: str) -> str:
    # The planner, left alone, may seek another index (created_at alone, or the key) and
    # filter the whole tenant's history by channel: measured, a million index hits per message.
    return f" USING INDEX SEEK {n}:{EPISODE}(channel_key, created_at)"


def adjacent(hit: str, n: str, *, before: bool, where: str = "", limit: str = "1") -> str:
    """A subquery body binding `n` to up to `limit` episodes just before (or after) `hit` in its
    channel, nearest first, that also meet `where` (a condition on `n`, or nothing).

    Strictly earlier (later) episodes come from the (channel_key, created_at) index in index
    order, so the seek stops after `limit` of them instead of reading the channel's whole
    history (the planner takes the index's order only when ORDER BY names both of its
    properties: by created_at alone it reads every earlier episode and sorts them). Episodes at
    the very same timestamp are a second, tiny seek ordered by key (an OR of the two defeats
    index order; the key is compared after the seek, or the planner
    may scan the whole index to order by it)."""
    cmp, order = ("<", " DESC") if before else (">", "")
    extra = f" AND {where}" if where else ""
    return f"""
  CALL ({hit}) {{
    MATCH ({n}:{EPISODE}){_hint(n)}
    WHERE {n}.channel_key = {hit}.channel_key AND {n}.created_at {cmp} {hit}.created_at{extra}
    WITH {n} ORDER BY {n}.channel_key{order}, {n}.created_at{order} LIMIT {limit}
    RETURN {n}
    UNION
    MATCH ({n}:{EPISODE}){_hint(n)}
    WHERE {n}.channel_key = {hit}.channel_key AND {n}.created_at = {hit}.created_at
    WITH {n} WHERE {n}.key {cmp} {hit}.key{extra}
    WITH {n} ORDER BY {n}.key{order} LIMIT {limit}
    RETURN {n}
  }}
  WITH {n} ORDER BY {n}.created_at{order}, {n}.key{order} LIMIT {limit}
  RETURN {n}"""
