"""The fold task and its trigger: rolling summaries per (agent, channel), off the sync path, on
their own queue (FOLD_QUEUE).

- A sync task that wrote turns sends one fold check per (agent, channel) it touched, at most one
  every CHECK_SECONDS per pair across all workers, delayed by that long so it sees every turn
  written meanwhile. Nothing on the sync path waits for it, and a lost check is only a delay:
  the next turn in the channel sends another.
- A fold check takes the pair's Redis lock (SET NX PX with a random token, released only by
  its holder) and folds while the unsummarised episodes exceed MEMSYNC_SUMMARY_FOLD_TOKENS:
  the oldest half (at most the budget) folds into the summary, and every
  MEMSYNC_SUMMARY_REANCHOR_EVERY folds the summary is rebuilt from the raw episodes instead.
- The same check first extends the pair's segments with its new episodes
  (pipeline/graph/segments.py): the lock that keeps two folds apart keeps two segment passes
  apart too, and no sync transaction ever waits on a segment.
- The summarizer runs outside any transaction; the write then succeeds only if the version it
  folded from is still current (pipeline/graph/summaries.py), so a fold that outlived its lock
  and lost a race writes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import redis
from celery import Celery, Task, shared_task
from pydantic import BaseModel
from redis.exceptions import LockError

from memsync import keys
from memsync.settings import FOLD_QUEUE, Settings
from pipeline.errors import ConfigurationError, MemsyncError, RetryableError
from pipeline.graph.segments import EVER, Extended, extend_segments
from pipeline.graph.store import GraphStore
from pipeline.graph.summaries import (
    NewSummary,
    Position,
    channel_episodes,
    current_summary_by_key,
    write_summary,
)
from pipeline.summarize import ExtractiveSummarizer, Summarizer, fold_chunk, read_cap
from schemas.records import SyncJob
from workers.state import latemessages
from workers.state.latemessages import note_written
from workers.worker import runtime
from workers.worker.llm import LLMExtractor, RateLimit
from workers.worker.llm_summary import LLMSummarizer

log = logging.getLogger("memsync.fold")

CHECK_SECONDS = 5
LEASE_SECONDS = 120
# One run folds at most this many times (and for about this long), then re-sends itself.
FOLDS_PER_RUN = 16
RUN_SECONDS = 60.0
# Segment rounds (of pipeline.graph.segments.READ_TOKENS each) per fold run: a pair's first pass
# over a long history goes on in the next run.
SEGMENT_ROUNDS_PER_RUN = 8

# (tenant, agent key, channel key)
Pair = tuple[str, str, str]


class FoldOutcome(BaseModel):
    """What one fold run did: versions written, whether it lost a race or found the pair busy,
    and whether work is left (it stopped at its bound)."""

    versions: list[int] = []
    rebuilt: list[int] = []
    segmented: int = 0
    lost_race: bool = False
    busy: bool = False
    more: bool = False


def make_summarizer(settings: Settings, rate_limit: RateLimit | None = None) -> Summarizer:
    """The configured summarizer (MEMSYNC_SUMMARIZER): `extractive` works offline; `llm` uses
    the MEMSYNC_LLM_* endpoint."""
    if settings.summarizer == "extractive":
        return ExtractiveSummarizer(settings.summary_max_tokens)
    if not settings.llm_base_url or not settings.llm_model:
        raise ConfigurationError(
            "MEMSYNC_SUMMARIZER=llm needs MEMSYNC_LLM_BASE_URL and MEMSYNC_LLM_MODEL"
        )
    return LLMSummarizer(
        settings.llm_base_url,
        settings.llm_model,
        settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        max_tokens=settings.summary_max_tokens,
        chunk_tokens=settings.summary_fold_tokens,
        timeout=settings.llm_timeout,
        rate_limit=rate_limit or RateLimit(settings.llm_requests_per_second),
    )


_summarizer: Summarizer | None = None
_summarizer_key: tuple[int, Settings] | None = None
_summarizer_lock = threading.Lock()


def process_summarizer(settings: Settings) -> Summarizer:
    """This process's summarizer; with the `llm` extractor too, both share one rate limit."""
    global _summarizer, _summarizer_key
    key = (os.getpid(), settings)
    with _summarizer_lock:
        if _summarizer is None or _summarizer_key != key:
            shared: RateLimit | None = None
            if settings.summarizer == "llm" and settings.extractor == "llm":
                extractor = runtime.extractor()
                if isinstance(extractor, LLMExtractor):
                    shared = extractor.rate_limit
            _summarizer, _summarizer_key = make_summarizer(settings, shared), key
        return _summarizer


def fold_channel(
    graph: GraphStore,
    summarizer: Summarizer,
    *,
    tenant: str,
    agent_key: str,
    channel_key: str,
    fold_tokens: int,
    reanchor_every: int,
    reanchor_tokens: int | None = None,
    summarizer_name: str = "extractive",
    max_folds: int = FOLDS_PER_RUN,
    run_seconds: float = RUN_SECONDS,
    renew: Callable[[], object] = lambda: None,
) -> FoldOutcome:
    """Fold while the pair's unsummarised episodes exceed `fold_tokens` (no lock: see
    `fold_locked`); a re-anchor rebuilds from the last `reanchor_tokens` tokens of raw episodes
    (None: all of them). `renew` is called after each version written; if it raises, folding
    stops."""
    outcome = FoldOutcome()
    deadline = time.monotonic() + run_seconds
    while True:
        if len(outcome.versions) >= max_folds or time.monotonic() > deadline:
            outcome.more = True
            return outcome
        current = current_summary_by_key(graph, tenant, agent_key, channel_key)
        after = current.position if current else None
        pending = channel_episodes(
            graph, agent_key, channel_key, after=after, token_cap=read_cap(fold_tokens)
        )
        chunk = fold_chunk(pending, fold_tokens)
        if not chunk:
            return outcome
        position = Position(created_at=chunk[-1].created_at, key=chunk[-1].key)
        since = current.folds_since_anchor if current else 0
        # The first summary is made from all raw episodes so far: it is an anchor too.
        rebuild = current is None or since + 1 >= reanchor_every
        if current is None:
            text = summarizer.rebuild(chunk)
        elif rebuild:
            raw = channel_episodes(
                graph, agent_key, channel_key, until=position, last_tokens=reanchor_tokens
            )
            text = summarizer.rebuild(raw)
        else:
            text = summarizer.fold(current.text, chunk)
        version = write_summary(
            graph,
            NewSummary(
                tenant=tenant,
                agent_key=agent_key,
                channel_key=channel_key,
                expected_version=current.version if current else 0,
                text=text,
                covers_until=position,
                folds_since_anchor=0 if rebuild else since + 1,
                anchored=rebuild,
                summarizer=summarizer_name,
            ),
        )
        if version is None:
            outcome.lost_race = True
            return outcome
        outcome.versions.append(version)
        if rebuild:
            outcome.rebuilt.append(version)
        renew()


def fold_locked(
    client: redis.Redis,
    graph: GraphStore,
    settings: Settings,
    *,
    tenant: str,
    agent_key: str,
    channel_key: str,
    summarizer: Summarizer | None = None,
) -> FoldOutcome:
    """`fold_channel` under the pair's Redis lock; `busy` (and nothing done) if another fold of
    the pair holds it. The lock is renewed after every version and released only by its owner."""
    lock = client.lock(
        keys.fold_lock(agent_key, channel_key),
        timeout=LEASE_SECONDS,
        blocking=False,
        thread_local=False,
    )
    if not lock.acquire():
        return FoldOutcome(busy=True)
    try:
        segmented = _segment(client, graph, tenant, agent_key, channel_key)
        outcome = fold_channel(
            graph,
            summarizer or process_summarizer(settings),
            tenant=tenant,
            agent_key=agent_key,
            channel_key=channel_key,
            fold_tokens=settings.summary_fold_tokens,
            reanchor_every=settings.summary_reanchor_every,
            reanchor_tokens=settings.summary_reanchor_tokens,
            summarizer_name=settings.summarizer,
            renew=lock.reacquire,
        )
        return outcome.model_copy(
            update={"segmented": segmented.appended, "more": outcome.more or segmented.more}
        )
    finally:
        # Already expired (and maybe taken by another fold): theirs is not ours to delete.
        with contextlib.suppress(LockError):
            lock.release()


def _segment(
    client: redis.Redis, graph: GraphStore, tenant: str, agent_key: str, channel_key: str
) -> Extended:
    """Extend the pair's segments, looking for late messages back to the earliest time written
    since the last check (or through the whole channel, once every AUDIT_SECONDS)."""
    since, audit = latemessages.take(client, agent_key, channel_key)
    try:
        segmented = extend_segments(
            graph,
            tenant,
            agent_key,
            channel_key,
            max_rounds=SEGMENT_ROUNDS_PER_RUN,
            late_since=EVER if audit else since,
        )
    except BaseException:
        if since is not None:
            latemessages.give_back(client, agent_key, channel_key, since)
        raise
    if segmented.more:
        # It stopped before the late look: the next run looks instead.
        if since is not None:
            latemessages.give_back(client, agent_key, channel_key, since)
    elif audit:
        latemessages.audited(client, agent_key, channel_key)
    return segmented


def send_fold(
    app: Celery, tenant: str, agent_key: str, channel_key: str, countdown: float = 0
) -> None:
    app.send_task(
        "memsync.fold", args=(tenant, agent_key, channel_key), queue=FOLD_QUEUE, countdown=countdown
    )


def earliest_written(jobs: Iterable[SyncJob]) -> dict[Pair, datetime]:
    """Each (tenant, agent, channel) the jobs wrote to, with the earliest message time written."""
    earliest: dict[Pair, datetime] = {}
    for job in jobs:
        pair = (job.tenant, job.agent.key, job.channel.key)
        for message in job.messages:
            if pair not in earliest or message.created_at < earliest[pair]:
                earliest[pair] = message.created_at
    return earliest


def request_folds(
    client: redis.Redis,
    written: Mapping[Pair, datetime],
    send: Callable[[str, str, str], None],
) -> int:
    """Note each pair's earliest message time just written (how far back its next check looks
    for late messages), and send a fold check for each pair that had none in the last
    CHECK_SECONDS, delayed by that long; how many were sent. One Redis round trip for all."""
    unique = sorted(written)
    if not unique:
        return 0
    pipe = client.pipeline(transaction=False)
    noted = note_written(
        pipe, {(agent, channel): at for (_, agent, channel), at in written.items()}
    )
    for _, agent_key, channel_key in unique:
        pipe.set(keys.fold_check(agent_key, channel_key), b"1", nx=True, ex=CHECK_SECONDS)
    sent = 0
    for pair, fresh in zip(unique, pipe.execute()[noted:], strict=True):
        if fresh:
            send(*pair)
            sent += 1
    return sent


def request_folds_quietly(app: Celery, written: Mapping[Pair, datetime]) -> None:
    """Fold checks from a sync task, through its app, each delayed by CHECK_SECONDS: never fail
    the sync (the next turn sends another; a lost note waits for the audit)."""

    def send_delayed(tenant: str, agent_key: str, channel_key: str) -> None:
        send_fold(app, tenant, agent_key, channel_key, countdown=CHECK_SECONDS)

    try:
        request_folds(runtime.redis_client(), written, send_delayed)
    except Exception as exc:  # redis and kombu raise many types; a lost check is only a delay
        log.warning("fold check not sent: %s: %s", type(exc).__name__, exc)


@shared_task(name="memsync.fold", bind=True, ignore_result=True)
def fold(self: Task, tenant: Any, agent_key: Any, channel_key: Any) -> dict[str, Any]:  # type: ignore[type-arg]
    """Fold one (agent, channel)'s backlog into its summary if it is past the budget."""
    if not all(isinstance(v, str) and v for v in (tenant, agent_key, channel_key)):
        log.error("fold check ignored: expects three non-empty strings")
        return {"folds": 0}
    settings = runtime.settings()
    try:
        outcome = fold_locked(
            runtime.redis_client(),
            runtime.graph(),
            settings,
            tenant=tenant,
            agent_key=agent_key,
            channel_key=channel_key,
        )
    except (RetryableError, redis.RedisError) as exc:
        # Nothing is lost: the episodes are in the graph and the next turn sends a new check.
        log.warning("fold of %s in %s paused: %s", agent_key, channel_key, exc)
        return {"folds": 0}
    except LockError as exc:
        log.warning("fold lock of %s in %s lost mid-run: %s", agent_key, channel_key, exc)
        return {"folds": 0}
    except MemsyncError as exc:
        log.error("fold of %s in %s failed: %s", agent_key, channel_key, exc)
        return {"folds": 0}
    if outcome.more:
        send_fold(self.app, tenant, agent_key, channel_key)
    if outcome.versions:
        with contextlib.suppress(Exception):  # counters are for operators only
            runtime.ledger().count(
                {"summary.folds": len(outcome.versions), "summary.rebuilds": len(outcome.rebuilt)}
            )
    return {
        "folds": len(outcome.versions),
        "rebuilds": len(outcome.rebuilt),
        "segmented": outcome.segmented,
        "lost_race": int(outcome.lost_race),
        "busy": int(outcome.busy),
    }
