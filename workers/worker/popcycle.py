"""The reliable pop's pure parts: the scan script, which command comes next, reply parsing.

A worker never pops a message destructively: it moves it atomically into its own staging list
(workers/worker/transport.py sends the commands), so a message is always in its queue, a
staging list or `unacked`, whenever a worker or the broker dies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kombu.utils.encoding import bytes_to_str

# KEYS[1..n]: queue lists in consume order; KEYS[n+1..2n]: the holder's staging list for each.
# ARGV: staging index, holders set, holder id, alive key, node name, alive TTL. Returns
# {queue key, item} for the first item moved, nil when every queue is empty. The holder is marked
# alive and listed in the same script, so the sweep can never judge it dead holding a fresh item.
SCAN_LUA = """
local n = #KEYS / 2
redis.call('SET', ARGV[4], ARGV[5], 'EX', ARGV[6])
redis.call('SADD', ARGV[2], ARGV[3])
for i = 1, n do
  local item = redis.call('LMOVE', KEYS[i], KEYS[n + i], 'RIGHT', 'LEFT')
  if item then
    redis.call('HSET', ARGV[1], KEYS[n + i], KEYS[i])
    return {KEYS[i], item}
  end
end
for i = 1, n do
  redis.call('HSET', ARGV[1], KEYS[n + i], KEYS[i])
end
return false
"""


@dataclass
class PopCycle:
    """Which command the reliable pop sends next: a scan of every queue key while messages keep
    coming; after an empty scan, a wait on the queues' doorbells (memsync/doorbell.py), then a
    scan again, whether a doorbell rang or the wait ran out. Pure state: the channel sends and
    reads the commands."""

    blocking: bool = False

    def popped(self, got_item: bool) -> None:
        """Advance after a reply: `got_item` says whether it moved a message."""
        self.blocking = False if self.blocking else not got_item


@dataclass(frozen=True)
class PendingMove:
    """The command outstanding on a channel's poll connection."""

    command: str  # "EVAL" (scan) or "WAIT" (a BRPOP on the doorbells, which moves nothing)
    holder: str

    def popped(self, reply: Any) -> tuple[str, bytes] | None:
        """(queue key, raw item) from the command's reply, or None if nothing was moved."""
        if not reply or self.command == "WAIT":
            return None
        key, item = reply
        return bytes_to_str(key), item


def scan_keys(
    queues: Sequence[str], priority_key: Callable[[str, int], str], steps: Sequence[int]
) -> list[str]:
    """The queue lists a scan tries, in kombu's BRPOP order (priority level, then queue)."""
    return [priority_key(queue, pri) for pri in steps for queue in queues]
