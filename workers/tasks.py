"""The two tasks: ingest runs stages 1-4 and fans out; sync writes one agent's memory."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from pipeline.errors import PoisonPayload, RetryableError
from pipeline.fanout import group_by_agent
from pipeline.graph.writer import write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.memorize import memorize
from pipeline.resolve import names_needed
from pipeline.validate import partition_events
from schemas.records import SyncJob
from workers import runtime
from workers.app import app
from workers.deadletter import DeadLetter
from workers.retrying import briefly
from workers.settings import INGEST_QUEUE, SYNC_QUEUE
from workers.taskbase import MemsyncTask

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
    """Validate, filter, resolve, check trust and send one sync task per agent."""
    good, bad = partition_events(events)
    for raw, error in bad:
        # Each invalid event is dead-lettered on its own; the rest of the batch goes on.
        self.dead_letter([raw], error)
    parsed = [event for _, event in good]
    known = briefly(runtime.known_names, names_needed(parsed))
    policy = briefly(runtime.trust_policy, parsed)
    outcome = ingest_turns(parsed, known, policy)
    # Expectations are recorded before any sync is sent, so progress never looks finished early.
    briefly(runtime.ledger().accept, outcome.accounts)
    for jobs in group_by_agent(outcome.jobs).values():
        sync.apply_async(args=([job.model_dump(mode="json") for job in jobs],), queue=SYNC_QUEUE)
    counts = outcome.counts()
    counts["events.invalid"] += len(bad)
    briefly(runtime.ledger().count, counts)
    briefly(runtime.deadletters().resolve, "ingest", [raw for raw, _ in good])
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
    """Write one agent's share of a batch of turns in a single transaction."""
    if not isinstance(jobs, list):
        raise PoisonPayload(f"sync expects a list of jobs, got {type(jobs).__name__}")
    try:
        parsed = [SyncJob.model_validate(job) for job in jobs]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"])
        raise PoisonPayload(f"invalid sync job: {field}: {first['msg']}") from None
    memories = memorize(parsed, runtime.extractor(), runtime.lenses())
    batch = write_sync_jobs(runtime.graph(), parsed, memories)
    ledger = runtime.ledger()
    briefly(ledger.mark_synced, parsed)
    counts = {"sync.observed": len(batch.observed), "sync.jobs_written": len(parsed)}
    for _, item in memories:
        counts[f"memory.{item.kind}"] = counts.get(f"memory.{item.kind}", 0) + 1
    briefly(ledger.count, counts)
    briefly(runtime.deadletters().resolve, "sync", jobs)
    return {"jobs": len(parsed), "observed": len(batch.observed)}


def _agent_key(payload: Any) -> str | None:
    job = payload[0] if isinstance(payload, list) and payload else payload
    agent = job.get("agent") if isinstance(job, dict) else None
    key = agent.get("key") if isinstance(agent, dict) else None
    return key if isinstance(key, str) else None
