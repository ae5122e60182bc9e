"""How far back a pair's fold check looks for late messages (pipeline/graph/segments.py).

A message written after the segments of its channel passed its time (a replayed dead letter, a
spooled turn, an agent added to an old turn) must still join a segment. Finding it by counting
the whole channel at every fold check cost 0.4 s of Neo4j at 100,000 messages. So every write
notes, per (agent, channel), the earliest message time it wrote; the fold check takes that
note and looks back only to it. Messages written in order are after the segments' position and
cost no look at all.

A note can be lost (Redis restarted empty, a note that failed beside a write that did not): so
once every AUDIT_SECONDS per pair the check looks through the whole channel instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final, NamedTuple

import redis

from memsync import keys
from pipeline.graph.store import instant
from pipeline.graph.writer import epoch_us

# A note nobody takes (the pair had no fold check since) goes after a day; the audit covers it.
NOTE_SECONDS: Final = 86_400
AUDIT_SECONDS: Final = 3_600

# KEYS[1] the pair's note; ARGV[1] epoch microseconds written, ARGV[2] seconds to keep it.
_NOTE_LUA: Final = """
local since = redis.call('HGET', KEYS[1], 'since')
if (not since) or tonumber(ARGV[1]) < tonumber(since) then
  redis.call('HSET', KEYS[1], 'since', ARGV[1])
end
redis.call('HINCRBY', KEYS[1], 'writes', 1)
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

# Deleted only if no write noted anything since it was read (ARGV[1], its `writes`): a later
# note stays for the next check.
_CLEAR_LUA: Final = """
if tonumber(redis.call('HGET', KEYS[1], 'writes')) == tonumber(ARGV[1]) then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

Pair = tuple[str, str]  # (agent key, channel key)


class LateNote(NamedTuple):
    """A pair's note as read: the earliest message time written since the last check took it
    (None: nothing written), and how many writes noted it (to clear exactly what was read)."""

    since: datetime | None
    writes: int | None


def note_written(pipe: redis.client.Pipeline, earliest: Mapping[Pair, datetime]) -> int:
    """Queue on `pipe` a note of each pair's earliest message time just written; how many
    commands were queued (their replies come first)."""
    for (agent_key, channel_key), at in earliest.items():
        pipe.eval(
            _NOTE_LUA, 1, keys.segment_late(agent_key, channel_key), epoch_us(at), NOTE_SECONDS
        )
    return len(earliest)


def read_note(client: redis.Redis, agent_key: str, channel_key: str) -> LateNote:
    """The pair's note, left in place until `clear_note`."""
    since, writes = client.hmget(keys.segment_late(agent_key, channel_key), ["since", "writes"])
    return LateNote(
        None if since is None else instant(int(since)), None if writes is None else int(writes)
    )


def clear_note(client: redis.Redis, agent_key: str, channel_key: str, note: LateNote) -> bool:
    """Delete the note a check has looked through, unless a write noted more since; whether it
    was deleted."""
    if note.writes is None:
        return False
    key = keys.segment_late(agent_key, channel_key)
    return bool(client.eval(_CLEAR_LUA, 1, key, note.writes))


def audit_due(client: redis.Redis, agent_key: str, channel_key: str) -> bool:
    """Whether the pair's segments were not checked against the whole channel lately."""
    return not client.exists(keys.segment_audit(agent_key, channel_key))


def audited(client: redis.Redis, agent_key: str, channel_key: str) -> None:
    """Record that the pair was just checked against the whole channel."""
    client.set(keys.segment_audit(agent_key, channel_key), b"1", ex=AUDIT_SECONDS)
