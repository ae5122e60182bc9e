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
from typing import Final

import redis

from memsync import keys
from pipeline.graph.store import instant
from pipeline.graph.writer import epoch_us

# A note nobody takes (the pair had no fold check since) goes after a day; the audit covers it.
NOTE_SECONDS: Final = 86_400
AUDIT_SECONDS: Final = 3_600

# KEYS[1] the pair's note; ARGV[1] epoch microseconds written, ARGV[2] seconds to keep it. The
# note keeps the earliest time noted since a check last took it.
_NOTE_LUA: Final = """
local since = redis.call('GET', KEYS[1])
if (not since) or tonumber(ARGV[1]) < tonumber(since) then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 1
"""

AgentChannel = tuple[str, str]  # (agent key, channel key); folding's Pair leads with the tenant


def note_written(pipe: redis.client.Pipeline, earliest: Mapping[AgentChannel, datetime]) -> int:
    """Queue on `pipe` a note of each pair's earliest message time just written; how many
    commands were queued (their replies come first)."""
    for (agent_key, channel_key), at in earliest.items():
        _note(pipe, agent_key, channel_key, at)
    return len(earliest)


def take(client: redis.Redis, agent_key: str, channel_key: str) -> tuple[datetime | None, bool]:
    """What a fold check asks first, in one round trip: the pair's note, taken (deleted), which
    is the earliest message time written since the last check took it (None if nothing was;
    whatever is written from now on is noted afresh), and whether its audit is due."""
    pipe = client.pipeline(transaction=False)
    pipe.getdel(keys.segment_late(agent_key, channel_key))
    pipe.exists(keys.segment_audit(agent_key, channel_key))
    since, marked = pipe.execute()
    return (None if since is None else instant(int(since))), not marked


def give_back(client: redis.Redis, agent_key: str, channel_key: str, since: datetime) -> None:
    """Put back a note a check took and did not finish looking through (merged with any
    noted meanwhile: the earlier time stays)."""
    _note(client, agent_key, channel_key, since)


def _note(
    client: redis.Redis | redis.client.Pipeline, agent_key: str, channel_key: str, at: datetime
) -> None:
    client.eval(_NOTE_LUA, 1, keys.segment_late(agent_key, channel_key), epoch_us(at), NOTE_SECONDS)


def audit_due(client: redis.Redis, agent_key: str, channel_key: str) -> bool:
    """Whether the pair's segments were not checked against the whole channel lately."""
    return not client.exists(keys.segment_audit(agent_key, channel_key))


def audited(client: redis.Redis, agent_key: str, channel_key: str) -> None:
    """Record that the pair was just checked against the whole channel."""
    client.set(keys.segment_audit(agent_key, channel_key), b"1", ex=AUDIT_SECONDS)
