"""The two tasks: ingest runs stages 1-4 and fans out; sync writes the agents' memory (which
ingest does itself where its worker takes sync tasks too)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from celery import Celery
from pydantic import ValidationError

from memsync.inflight import EMITTED_AT_HEADER, SENT_AT_HEADER, sent_now
from memsync.message import payload_repr
from memsync.settings import INGEST_QUEUE, SYNC_QUEUE
from pipeline.activity import Activity, activity_pairs
from pipeline.errors import PoisonPayload, RetryableError
from pipeline.graph.writer import write_audience, write_sync_jobs
from pipeline.ingest import IngestOutcome, ingest_turns
from pipeline.memorize import memorize
from pipeline.resolve import labels_needed, names_needed
from pipeline.validate import partition_events
from schemas.event import TurnEvent
from schemas.records import SyncJob, TurnJobs, group_jobs, job_items
from workers.state.deadletter import DeadLetter
from workers.worker import metrics, runtime
from workers.worker.app import app
from workers.worker.embedding import kick_quietly
from workers.worker.folding import earliest_written, request_folds_quietly
from workers.worker.isolation import bisect
from workers.worker.retrying import briefly
from workers.worker.taskbase import MemsyncTask

log = logging.getLogger("memsync.tasks")

# The retry count and the largest countdown come from settings through task annotations.
RETRY_ON = (RetryableError,)


class IngestTask(MemsyncTask):
    stage = "ingest"
    default_queue = INGEST_QUEUE

    def on_dead_letters(self, letters: list[DeadLetter]) -> None:
        for letter in letters:
            if letter.event_id is not None:
                state = "rejected" if letter.permanent else "dead_lettered"
                reason = f"{letter.error_type}: {letter.error}"
                briefly(
                    runtime.ledger().reject,
                    letter.tenant or "default",
                    letter.event_id,
                    reason,
                    state,
                )


class SyncTask(MemsyncTask):
    stage = "sync"
    default_queue = SYNC_QUEUE

    def dead_letter(
        self, payload: Any, error: BaseException, *, split: bool = True
    ) -> list[DeadLetter]:
        """As for any task, with a turn item filed one agent at a time (job_items): each letter
        is one job, marked dead in the ledger and replayed on its own, whatever failed (a
        refused item, a failed write, retries spent on a whole task)."""
        if split and isinstance(payload, list):
            payload = [item for raw in payload for item in job_items(raw)]
        return super().dead_letter(payload, error, split=split)

    def on_dead_letters(self, letters: list[DeadLetter]) -> None:
        for letter in letters:
            if letter.event_id is not None and letter.agent_id is not None:
                tenant = letter.tenant or "default"
                agent_key = _agent_key(letter.payload) or letter.agent_id
                briefly(runtime.ledger().mark_dead, tenant, letter.event_id, agent_key)


@app.task(
    name="memsync.ingest",
    bind=True,
    base=IngestTask,
    autoretry_for=RETRY_ON,
    retry_backoff=True,
    retry_jitter=True,
)
def ingest(self: IngestTask, events: Any) -> dict[str, int]:
    """Validate, filter, resolve and check trust, then write every agent's memory of the batch
    here or send it on as one sync task (`_write_in_place`)."""
    with _stage("validate"):
        good, bad = partition_events(events)
    for raw, invalid in bad:
        # Each invalid event is dead-lettered on its own; the rest of the batch goes on.
        self.dead_letter([raw], invalid)
    parsed = [event for _, event in good]
    with _stage("lookup"):
        known = briefly(runtime.known_names, names_needed(parsed))
        taken = briefly(runtime.label_owners, labels_needed(parsed, known))
        policy = briefly(runtime.trust_policy, parsed)
        recent = runtime.activity()
        activity = None
        if recent is not None:
            last_spoke = briefly(recent.last_spoke, activity_pairs(parsed))
            activity = Activity(window_seconds=recent.window_seconds, last_spoke=last_spoke)
    planned: list[IngestOutcome] = []

    def plan(group: list[tuple[Any, TurnEvent]]) -> None:
        # Pure stages; a turn that makes them fail is isolated like a failing sync.
        events = [event for _, event in group]
        planned.append(ingest_turns(events, known, policy, taken, activity))

    with _stage("plan"):
        isolated = bisect(good, plan)
    for (raw, _), error in isolated.failed:
        self.dead_letter([raw], error)
    outcome = IngestOutcome(
        jobs=[job for part in planned for job in part.jobs],
        accounts=[account for part in planned for account in part.accounts],
        spoke={pair: at for part in planned for pair, at in part.spoke.items()},
        unheard=[turn for part in planned for turn in part.unheard],
    )
    if outcome.unheard:
        # Before the ledger calls these turns done: who was there is on record by then.
        with _stage("audience"):
            write_audience(runtime.graph(), outcome.unheard)
    # Expectations are recorded before any sync is sent, so progress never looks finished early.
    with _stage("account"):
        briefly(runtime.ledger().accept, outcome.accounts)
        if recent is not None:
            briefly(recent.record, outcome.spoke)
    written_here: bool | None = None
    if outcome.jobs:
        emitted_at = getattr(self.request, SENT_AT_HEADER, None)
        emitted_at = emitted_at if isinstance(emitted_at, str) else None
        written_here = _write_in_place(self, outcome.jobs, emitted_at)
        if written_here is not True:
            _send_sync(outcome.jobs, emitted_at)
    _observe_ingest(outcome, bad)
    counts = outcome.counts()
    counts["events.invalid"] += len(bad)
    counts["events.isolated_failures"] += len(isolated.failed)
    if written_here is not None:
        counts["sync.in_ingest" if written_here else "sync.in_ingest_sent_on"] += 1
    briefly(runtime.ledger().count, counts)
    written = [raw for group in isolated.written for raw, _ in group]
    briefly(runtime.deadletters().resolve, "ingest", written)
    return dict(counts)


@app.task(
    name="memsync.sync",
    bind=True,
    base=SyncTask,
    autoretry_for=RETRY_ON,
    retry_backoff=True,
    retry_jitter=True,
)
def sync(self: SyncTask, jobs: Any) -> dict[str, int]:
    """Write a batch of turns for all their agents, one transaction per batch.

    A batch that fails permanently is bisected (workers/worker/isolation.py): every job that can be
    written is, and only the culprits go to the dead-letter store.
    """
    if not isinstance(jobs, list):
        raise PoisonPayload(f"sync expects a list of jobs, got {type(jobs).__name__}")
    # (raw item, job): the raw item is None for a job of a TurnJobs item, dumped only if needed.
    parsed: list[tuple[Any, SyncJob]] = []
    turn_items: list[Any] = []
    for raw in jobs:
        try:
            if isinstance(raw, dict) and "agents" in raw:
                parsed.extend((None, job) for job in TurnJobs.model_validate(raw).jobs())
                turn_items.append(raw)
            else:
                parsed.append((raw, SyncJob.model_validate(raw)))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field = ".".join(str(part) for part in first["loc"])
            self.dead_letter([raw], PoisonPayload(f"invalid sync job: {field}: {first['msg']}"))
    tally = _Tally()
    outcome = bisect(parsed, tally.write)
    for (raw, job), error in outcome.failed:
        self.dead_letter([raw if raw is not None else job.model_dump(mode="json")], error)
    written = [pair for group in outcome.written for pair in group]
    if outcome.failed:
        tally.counts["sync.isolated_failures"] += len(outcome.failed)
    # A turn item is resolved as a whole too: an older worker that refused it filed it so.
    # Its jobs that failed here were just filed one agent at a time.
    resolved = [_identity(raw, job) for raw, job in written] + turn_items
    _settle(
        self.app,
        [job for _, job in written],
        tally,
        getattr(self.request, EMITTED_AT_HEADER, None),
        resolved,
    )
    failed = len(outcome.failed)
    return {"jobs": len(written), "observed": tally.counts["sync.observed"], "failed": failed}


class _Tally:
    """Writes batches of sync jobs and keeps what the ledger and metrics are told after."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.refusals: list[tuple[str, str, str, str]] = []

    def write(self, group: list[tuple[Any, SyncJob]]) -> None:
        """Extract and write one batch (one transaction); raises if any of it fails."""
        batch_jobs = [job for _, job in group]
        with _stage("extract"):
            memories = memorize(batch_jobs, runtime.extractor(), runtime.lenses())
        with _stage("write"):
            batch = write_sync_jobs(runtime.graph(), batch_jobs, memories)
        tenants = {job.event_id: job.tenant for job in batch_jobs}
        self.refusals.extend(
            (tenants[event_id], event_id, f"{agent_key} {episode_key}", "message_id_reuse")
            for event_id, agent_key, episode_key in batch.conflicts
        )
        self.refusals.extend(
            (tenants[event_id], event_id, agent_key, "owner_mismatch")
            for event_id, agent_key in batch.owner_conflicts
        )
        self.counts["sync.observed"] += len(batch.observed)
        self.counts["sync.jobs_written"] += len(batch_jobs)
        for _, item in memories:
            self.counts[f"memory.{item.kind}"] += 1
            metrics.MEMORIES.labels(item.kind).inc()


def _settle(
    celery_app: Celery,
    written: list[SyncJob],
    tally: _Tally,
    emitted_at: object,
    resolved: list[Any],
) -> None:
    """After a write: refusals audited, turns marked written, counts kept, letters resolved,
    embedding and folding asked for."""
    ledger = runtime.ledger()
    # Audited before the turns are marked written, so whoever waits on them sees the refusals.
    briefly(ledger.refuse, tally.refusals)
    briefly(ledger.mark_synced, written)
    metrics.observe_written(written, metrics.header_time(emitted_at), runtime.tenant_labels())
    briefly(ledger.count, dict(tally.counts))
    briefly(runtime.deadletters().resolve, "sync", resolved)
    if written:
        # New episodes and memories wait for vectors (workers/worker/embedding.py).
        kick_quietly(celery_app)
        # Their channels' summaries may be due a fold and their segments new messages
        # (workers/worker/folding.py); never waited on.
        request_folds_quietly(celery_app, earliest_written(written))


def _write_in_place(task: IngestTask, jobs: list[SyncJob], emitted_at: str | None) -> bool | None:
    """Write an ingest batch's jobs in the ingest task itself, when this worker takes sync
    tasks too (MEMSYNC_SYNC_IN_INGEST): the hop through the broker (dump, publish, receive,
    decode, validate again) cost a fifth of the workers' CPU. False when not done: the jobs
    then go as a sync task, whose retries, isolation and dead letters are the one way a failed
    write is handled; whatever this attempt wrote is merged again there, changing nothing.
    None when not tried."""
    if not runtime.settings().sync_in_ingest:
        return None
    if SYNC_QUEUE not in task.app.amqp.queues.consume_from:
        return None
    tally = _Tally()
    try:
        tally.write([(None, job) for job in jobs])
        turns = {(job.tenant, job.event_id) for job in jobs}
        resolved = [_identity(None, job) for job in jobs] + [
            {"tenant": tenant, "event_id": event_id} for tenant, event_id in sorted(turns)
        ]
        _settle(task.app, jobs, tally, emitted_at, resolved)
    except Exception as exc:  # every failure takes the sync task's path
        log.warning(
            "writing %d jobs in ingest failed (%s); sending them as a sync task",
            len(jobs),
            type(exc).__name__,
        )
        metrics.IN_INGEST.labels("sent_on").inc()
        return False
    metrics.IN_INGEST.labels("written").inc()
    return True


def _send_sync(jobs: list[SyncJob], emitted_at: str | None) -> None:
    """Every agent's job of the batch in one sync task, so the turns' shared part (speakers,
    channel, messages) is written once, not once per agent; each job is still its own unit for
    the ledger, isolation and dead letters."""
    headers = {**sent_now(), **runtime.tracing().headers()}
    if emitted_at is not None:
        headers[EMITTED_AT_HEADER] = emitted_at
    with _stage("fan_out"):
        payload = [turn.model_dump(mode="json") for turn in group_jobs(jobs)]
        sync.apply_async(  # type: ignore[call-arg]  # Celery documents argsrepr; stubs lag
            args=(payload,),
            queue=SYNC_QUEUE,
            headers=headers,
            # Flower and the worker log show this, never the conversation itself.
            argsrepr=payload_repr(payload),
        )


def _identity(raw: Any, job: SyncJob) -> Any:
    """What the dead-letter store keys a job by: its raw item, or as much of it as names it."""
    if raw is not None:
        return raw
    return {"tenant": job.tenant, "event_id": job.event_id, "agent": {"id": job.agent.id}}


@contextmanager
def _stage(name: str) -> Iterator[None]:
    """A stage: its time in the metrics, and a span when tracing is on."""
    with metrics.timed(name), runtime.tracing().span(name):
        yield


def _observe_ingest(outcome: IngestOutcome, bad: Sequence[tuple[Any, Exception]]) -> None:
    """Per-tenant event outcomes, drops by reason and trust decisions (bounded labels)."""
    label = runtime.tenant_labels()
    for account in outcome.accounts:
        metrics.EVENTS.labels(label(account.tenant), "accepted").inc()
        for dropped in account.dropped:
            metrics.DROPPED.labels(dropped.reason).inc()
        for decision in account.decisions:
            metrics.TRUST.labels(decision.reason, str(decision.trusted).lower()).inc()
    for raw, _ in bad:
        tenant = raw.get("tenant") if isinstance(raw, dict) else None
        metrics.EVENTS.labels(
            label(tenant) if isinstance(tenant, str) else metrics.OTHER_TENANT, "invalid"
        ).inc()


def _agent_key(payload: Any) -> str | None:
    job = payload[0] if isinstance(payload, list) and payload else payload
    agent = job.get("agent") if isinstance(job, dict) else None
    key = agent.get("key") if isinstance(agent, dict) else None
    return key if isinstance(key, str) else None
