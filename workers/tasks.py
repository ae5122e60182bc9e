"""The two tasks: ingest runs stages 1-4 and fans out; sync writes one agent's memory."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task
from pydantic import ValidationError

from pipeline.errors import PoisonPayload, RetryableError
from pipeline.fanout import group_by_agent
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.resolve import names_needed
from pipeline.validate import validate_events
from schemas.records import SyncJob
from workers import runtime
from workers.app import app
from workers.settings import SYNC_QUEUE

log = logging.getLogger("memsync.tasks")

RETRY_OPTIONS: dict[str, Any] = {
    "autoretry_for": (RetryableError,),
    "retry_backoff": 2,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 8,
}


@app.task(name="memsync.ingest", bind=True, **RETRY_OPTIONS)
def ingest(self: Task[Any, Any], events: Any) -> dict[str, int]:
    """Validate, filter, resolve, check trust and send one sync task per agent."""
    ledger = runtime.ledger()
    good, rejected = validate_events(events)
    for error in rejected:
        log.warning("rejected event: %s", error)
        ledger.reject(error.tenant or "default", error.event_id or "<no id>", str(error))
    known = runtime.known_names(names_needed(good))
    outcome = ingest_turns(good, known, runtime.trust_policy())
    # Expectations are recorded before any sync is sent, so progress never looks finished early.
    ledger.accept(outcome.accounts)
    for jobs in group_by_agent(outcome.jobs).values():
        sync.apply_async(args=[[job.model_dump(mode="json") for job in jobs]], queue=SYNC_QUEUE)
    counts = outcome.counts()
    counts["events.rejected"] += len(rejected)
    ledger.count(counts)
    return dict(counts)


@app.task(name="memsync.sync", bind=True, **RETRY_OPTIONS)
def sync(self: Task[Any, Any], jobs: Any) -> dict[str, int]:
    """Write one agent's share of a batch of turns in a single transaction."""
    if not isinstance(jobs, list):
        raise PoisonPayload(f"sync expects a list of jobs, got {type(jobs).__name__}")
    try:
        parsed = [SyncJob.model_validate(job) for job in jobs]
    except ValidationError as exc:
        raise PoisonPayload(f"invalid sync job: {exc.errors(include_url=False)[0]}") from None
    batch = write_sync_jobs(runtime.graph(), parsed)
    runtime.ledger().mark_synced(parsed)
    runtime.ledger().count({"sync.observed": len(batch.observed), "sync.jobs_written": len(parsed)})
    return {"jobs": len(parsed), "observed": len(batch.observed)}
