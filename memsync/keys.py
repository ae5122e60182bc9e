"""Every Redis key memsync keeps beside the queues, built in one place so none can collide.

It lives on the platform side because the producer writes the in-flight keys too; it is pure
(no I/O, nothing of the worker side), so workers/ import it from here.

A key is "memsync" followed by components joined by ':'. A component that carries outside
input (a tenant, an event id) goes through `escape` first, which percent-encodes everything but
letters, digits and "-_.~@": it can never contain ':' or '/', so a key always splits back into
the components it was built from, and no tenant or event id can spell another key's name (or
another type's: an event id ending in ":synced" stays inside its own component).

Adding a key: write a constant (fixed name) or a small function (per-item name) in the section
of its owner below, compose it with `_key`, escape every outside value, and add a line to the
table. Fields inside a hash or members of a set are values, not keys, and need no escaping
unless they are composed from several ids themselves (see `turn_ref`).

| key                            | type       | holds                                          |
|--------------------------------|------------|------------------------------------------------|
| memsync:turn:{turn_ref}        | hash       | a turn's state, expected, untrusted, reason    |
| memsync:turn:{turn_ref}:synced | set        | agent keys whose memory of the turn is written |
| memsync:turn:{turn_ref}:dead   | set        | agent keys whose sync went to dead letters     |
| memsync:stats                  | hash       | counter name -> integer                        |
| memsync:audit                  | stream     | dropped messages, untrusted agents, rejections |
| memsync:inflight               | hash       | turn_ref -> the turn's JSON until it settles   |
| memsync:inflight:since         | sorted set | turn_ref -> when it was last sent              |
| memsync:dlq:entries            | hash       | dead-letter id -> the entry's JSON             |
| memsync:dlq:index              | sorted set | dead-letter id -> its last failure time        |
| memsync:reconcile:lock         | string     | the worker sweeping now (expires by itself)    |
| memsync:retention:lock         | string     | the worker running the retention sweep now     |
| memsync:workers                | set        | holder ids that may hold messages              |
| memsync:worker-sweep:lock      | string     | the worker sweeping holders now (expires)      |
| memsync:worker:{h}:alive       | string     | the holder's node name; expires unless renewed |
| memsync:worker:{h}:held        | set        | delivery tags the holder holds unacked         |
| memsync:worker:{h}:staging     | hash       | staging list key -> the queue key it pops from |
| memsync:worker:{h}:staging:{q} | list       | items moved from queue q, not yet in unacked   |
| memsync:embed:kick             | string     | an embed task was sent lately (expires)        |
| memsync:embed:lock:{n}         | string     | the embed task holding lease slot n (expires)  |
| memsync:embed:claim:{k}        | string     | a drain embeds graph node k now (expires)      |
| memsync:embed:workers          | string     | an embed worker runs; expires unless renewed   |
| memsync:fold:lock:{a}:{c}      | string     | the fold of agent a's summary of channel c     |
| memsync:fold:check:{a}:{c}     | string     | a fold check was sent lately (expires)         |
| memsync:segment:late:{a}:{c}   | string     | earliest message time written since the check  |
| memsync:segment:audit:{a}:{c}  | string     | the pair's segments were audited lately        |
| memsync:activity:{c}           | sorted set | agent key -> its latest message time in c      |

`turn_ref` is `escape(tenant) + "/" + escape(event_id)`; plain ids read as "acme/evt-7f3a".
`{h}` is `escape(holder id)` (workers/worker/heartbeat.py), `{q}` is `escape(queue list key)`.
`{n}` is a slot number below MEMSYNC_EMBED_DRAINERS, `{k}` is `escape(node graph key)`.
`{a}` and `{c}` are `escape(agent graph key)` and `escape(channel graph key)` (tenant-qualified).
"""

from __future__ import annotations

from urllib.parse import quote

PREFIX = "memsync"


def escape(value: str) -> str:
    """Percent-encode one outside value so it is a single, separator-free key component."""
    # quote() always keeps letters, digits and "_.-~"; "%" itself is encoded, so this is 1:1.
    return quote(value, safe="@")


def _key(*components: str) -> str:
    """A key from components that are constants or already escaped."""
    return ":".join((PREFIX, *components))


# Turns: progress of each emitted event (workers/state/ledger.py) and its in-flight copy.


def turn_ref(tenant: str, event_id: str) -> str:
    """One turn's id inside keys, the in-flight hash and sorted set: unique per (tenant, id)."""
    return f"{escape(tenant)}/{escape(event_id)}"


def turn(tenant: str, event_id: str) -> str:
    """Hash: state, expected agent syncs, agents left out as untrusted, reason."""
    return _key("turn", turn_ref(tenant, event_id))


def turn_synced(tenant: str, event_id: str) -> str:
    """Set: agent keys whose memory of this turn is in the graph."""
    return _key("turn", turn_ref(tenant, event_id), "synced")


def turn_dead(tenant: str, event_id: str) -> str:
    """Set: agent keys whose sync of this turn is in the dead-letter store."""
    return _key("turn", turn_ref(tenant, event_id), "dead")


# Counters and the audit trail (workers/state/ledger.py; every module may count into STATS).

STATS = _key("stats")
AUDIT = _key("audit")

# Turns sent but not yet settled (memsync/inflight.py), members are `turn_ref`s.

INFLIGHT_PAYLOADS = _key("inflight")
INFLIGHT_SINCE = _key("inflight", "since")

# The dead-letter store (workers/state/deadletter.py), members are dead-letter ids.

DLQ_ENTRIES = _key("dlq", "entries")
DLQ_INDEX = _key("dlq", "index")

# The reconciler's lock: one sweep at a time across workers (workers/worker/reconcile.py).

RECONCILE_LOCK = _key("reconcile", "lock")

# The retention sweep's lock: one sweep at a time across workers (workers/worker/sweeping.py).

RETENTION_LOCK = _key("retention", "lock")

# Worker liveness and the reliable pop (workers/worker/heartbeat.py, workers/worker/transport.py):
# one holder per worker process start; its keys share the escaped holder id as their third
# component.

HOLDERS = _key("workers")
HOLDER_SWEEP_LOCK = _key("worker-sweep", "lock")


def worker_alive(holder: str) -> str:
    """String: present (with a TTL) while the holder's worker runs."""
    return _key("worker", escape(holder), "alive")


def worker_held(holder: str) -> str:
    """Set: the delivery tags this holder has been handed and not yet acked or rejected."""
    return _key("worker", escape(holder), "held")


def worker_staging_index(holder: str) -> str:
    """Hash: each staging list of this holder -> the queue list its items were moved from."""
    return _key("worker", escape(holder), "staging")


def worker_staging(holder: str, queue_key: str) -> str:
    """List: items this holder moved out of `queue_key` and has not yet recorded as unacked."""
    return _key("worker", escape(holder), "staging", escape(queue_key))


# The embedding backlog (workers/worker/embedding.py): kicks are deduplicated (one deduplicated
# while a run is under way is owed, and sent when that run ends), at most
# MEMSYNC_EMBED_DRAINERS tasks drain at once (one lease slot each), each embedding only the nodes
# it claimed, and kicks are only sent while some worker consumes the embed queue.

EMBED_KICK = _key("embed", "kick")
EMBED_OWED = _key("embed", "owed")
EMBED_WORKERS = _key("embed", "workers")


def embed_lock(slot: int) -> str:
    """String: the token of the drain holding this lease slot; expires by itself."""
    return _key("embed", "lock", str(int(slot)))


def embed_claim(node_key: str) -> str:
    """String: a drain is embedding this graph node now; expires by itself."""
    return _key("embed", "claim", escape(node_key))


FIXED_KEYS = (
    STATS,
    AUDIT,
    INFLIGHT_PAYLOADS,
    INFLIGHT_SINCE,
    DLQ_ENTRIES,
    DLQ_INDEX,
    RECONCILE_LOCK,
    RETENTION_LOCK,
    HOLDERS,
    HOLDER_SWEEP_LOCK,
    EMBED_KICK,
    EMBED_OWED,
    EMBED_WORKERS,
)


# Rolling summaries (workers/worker/folding.py): one fold per (agent, channel) at a time, and fold
# checks sent at most every few seconds per pair. Graph keys are tenant-qualified already.


def fold_lock(agent_key: str, channel_key: str) -> str:
    """String: the token of the fold running for this (agent, channel); expires by itself."""
    return _key("fold", "lock", escape(agent_key), escape(channel_key))


def fold_check(agent_key: str, channel_key: str) -> str:
    """String: a fold check for this (agent, channel) was sent lately; expires by itself."""
    return _key("fold", "check", escape(agent_key), escape(channel_key))


# Segments' late messages (workers/state/latemessages.py): how far back a fold check looks for
# messages written after their time was segmented, and when it last looked through everything.


def segment_late(agent_key: str, channel_key: str) -> str:
    """String: epoch microseconds of the earliest message written since the pair's last fold
    check took the note; expires by itself."""
    return _key("segment", "late", escape(agent_key), escape(channel_key))


def segment_audit(agent_key: str, channel_key: str) -> str:
    """String: the pair's segments were checked against the whole channel lately (expires)."""
    return _key("segment", "audit", escape(agent_key), escape(channel_key))


# Agents' latest message per channel, for the idle window (workers/state/activity.py).


def channel_activity(channel_key: str) -> str:
    """Sorted set: agent graph key -> epoch seconds of its latest message in the channel."""
    return _key("activity", escape(channel_key))


# Doorbells (memsync/doorbell.py): each task message is pushed with a token on its queue's
# doorbell, so an idle worker blocked on the doorbells of all its queues wakes for any of them.


def queue_doorbell(queue: str) -> str:
    """List: tokens saying `queue` was just given a message; capped, popped by idle workers."""
    return _key("wake", escape(queue))
