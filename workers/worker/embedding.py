"""The embed task and its triggers: vectors for new episodes, facts and commitments, off the sync
path, on their own queue (MEMSYNC_EMBEDDER=none turns all of it off).

- A sync task that wrote something sends a "kick" (an embed task), at most one every
  KICK_SECONDS across all workers, and only while some worker consumes the embed queue.
- Every worker consuming the embed queue kicks itself every SWEEP_SECONDS (EmbedStep), so a kick
  lost with a broker or a worker is only a delay; it also says the queue has a consumer.
- The embed task drains the backlog in batches of MEMSYNC_EMBED_BATCH under one of
  MEMSYNC_EMBED_DRAINERS Redis lease slots, so at most that many tasks drain at once (a
  transformer embeds about 80 texts a second a process: one drain would cap the cluster there).
  Drains at once take apart: each reads a page of the backlog and embeds only the nodes it
  claimed in Redis (`claimer`). A node is embedded twice only when its claim expires mid-batch
  (a batch that took over LEASE_SECONDS, or a worker killed mid-batch), and the store is
  idempotent. Once a batch is stored its claims are cut to SETTLED_CLAIM_SECONDS, so a node
  queued again soon after is not held back for the rest of the lease.
- A run is bounded (RUN_SECONDS) and re-sends itself while a backlog remains; a run that found
  everything claimed by others leaves the re-check to them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from celery import Celery, Task, bootsteps, shared_task
from redis.exceptions import LockError
from redis.lock import Lock

from memsync import keys
from memsync.settings import EMBED_QUEUE, Settings
from pipeline.embedder import Embedder, make_embedder
from pipeline.errors import RetryableError
from pipeline.graph.contextvectors import embed_batch
from pipeline.graph.embeddings import EMBEDDED_LABELS, Claim, backlog, require_vector_indexes
from pipeline.graph.store import GraphStore
from workers.worker import forkgate, runtime

log = logging.getLogger("memsync.embed")

KICK_SECONDS = 2
# An owed kick outlives a run killed before it could send it by at most this; the sweep covers it.
OWED_SECONDS = 60
LEASE_SECONDS = 60
# What a claim has left once its node is stored: long enough that a drain which read the same
# page just before still finds it held, short enough that a node queued again soon (a reembed,
# an edit) waits seconds for the next drain, not the rest of LEASE_SECONDS.
SETTLED_CLAIM_SECONDS = 5
RUN_SECONDS = 30.0
SWEEP_SECONDS = 10.0
WORKERS_TTL = 3 * int(SWEEP_SECONDS)

_embedder: Embedder | None = None
_embedder_key: tuple[int, str, bool] | None = None
_embedder_lock = threading.Lock()


def process_embedder(settings: Settings) -> Embedder | None:
    """This process's embedder (its weights load on first use, after any fork)."""
    global _embedder, _embedder_key
    key = (os.getpid(), settings.embedder, settings.embed_quantized)
    with _embedder_lock:
        if _embedder_key != key:
            _embedder, _embedder_key = make_embedder(settings, use="batches"), key
        return _embedder


def kick(client: redis.Redis, settings: Settings, send: Callable[[], None]) -> bool:
    """Send an embed task unless embeddings are off, no worker consumes the embed queue, or one
    was sent in the last KICK_SECONDS; True if sent. A kick deduplicated is owed: the run under
    way (or the one just sent) sends another when it ends (`rearm`), so what was written after
    that run read its page waits for no sweep."""
    if settings.embedder == "none":
        return False
    pipe = client.pipeline(transaction=False)
    pipe.exists(keys.EMBED_WORKERS)
    pipe.set(keys.EMBED_KICK, b"1", nx=True, ex=KICK_SECONDS)
    consumed, sent = pipe.execute()
    if not consumed:
        if sent:  # no window opens while no one would run: the first worker's kick goes through
            client.delete(keys.EMBED_KICK)
        return False
    if not sent:
        owe(client)
        return False
    send()
    return True


def owe(client: redis.Redis) -> None:
    """A kick that was not sent: whichever run ends next sends one more (`rearm`)."""
    client.set(keys.EMBED_OWED, b"1", ex=OWED_SECONDS)


def rearm(client: redis.Redis) -> bool:
    """At the end of an embed run: let the next kick through at once, and say whether a kick was
    deduplicated meanwhile (the run must then be followed by another)."""
    pipe = client.pipeline(transaction=False)
    pipe.delete(keys.EMBED_KICK)
    pipe.getdel(keys.EMBED_OWED)
    _, owed = pipe.execute()
    return owed is not None


def kick_quietly(app: Celery) -> None:
    """A kick from a sync task, through its app: never fails the sync (a lost kick waits for
    the next sweep)."""
    try:
        kick(runtime.redis_client(), runtime.settings(), functools.partial(send_embed, app))
    except Exception as exc:  # redis and kombu raise many types; the sweep covers a lost kick
        log.warning("embed kick not sent: %s: %s", type(exc).__name__, exc)


def send_embed(app: Celery) -> None:
    app.send_task("memsync.embed", queue=EMBED_QUEUE)


# Claims up to ARGV[1] of KEYS (in order) that no other drain holds, each for ARGV[2] seconds;
# returns the positions claimed. One round trip for a whole page.
CLAIM_LUA = """
local taken = {}
local most = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  if #taken >= most then break end
  if redis.call('SET', key, ARGV[3], 'NX', 'EX', ARGV[2]) then
    taken[#taken + 1] = i - 1
  end
end
return taken
"""


# Cuts to ARGV[2] seconds each of KEYS still held by ARGV[1] (a claim another drain took over
# after this one's expired is left alone).
SETTLE_LUA = """
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('EXPIRE', key, ARGV[2])
  end
end
return 0
"""


class Claims:
    """Claims graph nodes in Redis for one drain, so that drains at once embed apart; a claim
    outlives a killed drain by at most LEASE_SECONDS, and a settled one by
    SETTLED_CLAIM_SECONDS."""

    def __init__(self, client: redis.Redis, token: str) -> None:
        self._client = client
        self._token = token
        self._held: list[str] = []

    def __call__(self, node_keys: Sequence[str], most: int) -> list[str]:
        """Up to `most` of `node_keys`, in order, that no other drain holds (one round trip)."""
        names = [keys.embed_claim(k) for k in node_keys]
        positions = self._client.eval(
            CLAIM_LUA, len(names), *names, most, LEASE_SECONDS, self._token
        )
        taken = [int(p) for p in positions]
        self._held.extend(names[p] for p in taken)
        return [node_keys[p] for p in taken]

    def settle(self) -> None:
        """The claims taken so far have been stored (or refused): keep them only briefly."""
        if self._held:
            held, self._held = self._held, []
            self._client.eval(SETTLE_LUA, len(held), *held, self._token, SETTLED_CLAIM_SECONDS)


def claimer(client: redis.Redis, token: str) -> Claims:
    """A drain's claims under `token` (see Claims)."""
    return Claims(client, token)


def drain(
    graph: GraphStore,
    embedder: Embedder,
    batch: int,
    *,
    run_seconds: float = RUN_SECONDS,
    renew: Callable[[], object] = lambda: None,
    claim: Claim | None = None,
    settle: Callable[[], object] = lambda: None,
    drainers: int = 1,
    in_context: bool = True,
) -> tuple[int, int, bool]:
    """Embed the backlog label by label, one transaction per batch, for at most run_seconds.

    Returns (read, stored, more): `more` when it stopped with work left. `renew` (the lease)
    and `settle` (the batch's claims) are called after every batch; if either raises, draining
    stops. With `claim`, only nodes this drain claimed are embedded (others drain the rest):
    each batch reads a page big enough for all `drainers` batches and one more, so the last
    drain to come still finds its own.
    `in_context`: episodes embedded with their neighbours (MEMSYNC_EMBED_CONTEXT).
    """
    deadline = time.monotonic() + run_seconds
    read = stored = 0
    for label in EMBEDDED_LABELS:
        while True:
            if time.monotonic() > deadline:
                return read, stored, True
            got, done = embed_batch(
                graph,
                embedder,
                label,
                batch,
                claim,
                page=batch * (drainers + 1),
                in_context=in_context,
            )
            read, stored = read + got, stored + done
            renew()
            settle()
            # Nothing left to take ends the label (what others hold is theirs), and so does a
            # batch where nothing could be stored (every node changed while it was embedded):
            # it is left for the next run rather than spun on.
            if got == 0 or done == 0 or (claim is None and got < batch):
                break
    return read, stored, False


def _lease(client: redis.Redis, slots: int) -> Lock | None:
    """A free lease slot of the `slots` that bound how many drains run at once, or None."""
    for slot in range(slots):
        lease: Lock = client.lock(
            keys.embed_lock(slot), timeout=LEASE_SECONDS, blocking=False, thread_local=False
        )
        if lease.acquire():
            return lease
    return None


@shared_task(name="memsync.embed", bind=True, ignore_result=True)
def embed(self: Task) -> dict[str, int]:  # type: ignore[type-arg]
    """Drain the embedding backlog for a while; re-send itself if some remains."""
    settings = runtime.settings()
    embedder = process_embedder(settings)
    if embedder is None:
        return {"read": 0, "stored": 0}
    client = runtime.redis_client()
    lease = _lease(client, settings.embed_drainers)
    if lease is None:
        owe(client)  # the holders re-check after they let go
        return {"read": 0, "stored": 0, "busy": 1}
    read = stored = 0
    more = False
    claims = claimer(client, self.request.id or "embed")
    try:
        read, stored, more = drain(
            runtime.graph(),
            embedder,
            settings.embed_batch,
            renew=lease.reacquire,
            claim=claims,
            settle=claims.settle,
            drainers=settings.embed_drainers,
            in_context=settings.embed_context,
        )
    except LockError as exc:
        log.warning("embed lease lost mid-run (%s); another run takes over", exc)
    except RetryableError as exc:
        # Nothing is lost: the backlog is in the graph and the next sweep kicks again.
        log.warning("embedding paused: %s", exc)
        return {"read": read, "stored": stored}
    finally:
        with contextlib.suppress(LockError):
            lease.release()
    # Checked after letting go, so a kick dropped while this run held the lease is not lost. A
    # run that took nothing (others hold it all) leaves this to them, or runs would spin; an owed
    # kick stands for a write, so following it cannot spin.
    owed = rearm(client)
    if more or owed or (read and any(backlog(runtime.graph()).values())):
        send_embed(self.app)
    if read:
        with contextlib.suppress(Exception):  # counters are for operators only
            runtime.ledger().count({"embed.read": read, "embed.stored": stored})
    return {"read": read, "stored": stored}


def consumes_embed_queue(worker: Any) -> bool:
    """Whether this worker was told to consume the embed queue (-Q, or every queue)."""
    consume_from = worker.app.amqp.queues.consume_from
    return EMBED_QUEUE in (consume_from or {})


class EmbedStep(bootsteps.StartStopStep):
    """On workers that consume the embed queue: refuse vector indexes of another dimension
    count at start, then say the queue has a consumer and kick it every SWEEP_SECONDS."""

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.send: Callable[[], None] = lambda: None

    def start(self, worker: Any) -> None:
        settings = runtime.settings()
        embedder = make_embedder(settings)
        if embedder is None or not consumes_embed_queue(worker):
            return
        try:
            require_vector_indexes(runtime.graph(), embedder.dimensions)
        finally:
            runtime.close()  # pool children open their own driver
        self.send = functools.partial(send_embed, worker.app)
        self.thread = threading.Thread(
            target=self._loop, args=(worker.hostname,), name="memsync-embed-sweep", daemon=True
        )
        self.thread.start()

    def stop(self, worker: Any) -> None:
        self.stopping.set()

    def _loop(self, hostname: str) -> None:
        while True:
            try:
                with forkgate.working():
                    client = runtime.redis_client()
                    client.set(keys.EMBED_WORKERS, hostname, ex=WORKERS_TTL)
                    kick(client, runtime.settings(), self.send)
            except Exception:  # the next tick tries again; this thread must never end early
                log.exception("embed sweep failed")
            if self.stopping.wait(SWEEP_SECONDS):
                return
