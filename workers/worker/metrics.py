"""The worker's Prometheus metrics: what each process did, summed across the prefork pool.

Pool children record into prometheus-client's multiprocess files (`memsync worker` points
PROMETHEUS_MULTIPROC_DIR at a private directory before anything imports prometheus-client:
workers/worker/metricsfiles.py), and the main process's exporter (workers/worker/exporter.py)
adds them up on each scrape. Label values are bounded: reasons and stages are the pipeline's
own fixed vocabulary, and only the first `metrics_tenants` tenants a process sees get their
own label.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

from prometheus_client import Counter, Histogram

from schemas.records import SyncJob

OTHER_TENANT: Final = "other"

# Stages are fast (milliseconds) but a write under load or an LLM extraction takes seconds.
STAGE_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Emit to written spans queueing, retries and outages: up to the visibility timeout.
LAG_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)

EVENTS = Counter("memsync_events_total", "Turn events ingested, by outcome", ["tenant", "outcome"])
DROPPED = Counter(
    "memsync_messages_dropped_total", "Messages the filter stage dropped, by reason", ["reason"]
)
TRUST = Counter(
    "memsync_trust_decisions_total",
    "Trust decisions per (turn, agent), by reason and verdict",
    ["reason", "trusted"],
)
SYNCED = Counter("memsync_sync_jobs_total", "Agents' memories of turns written", ["tenant"])
IN_INGEST = Counter(
    "memsync_sync_in_ingest_total",
    "Ingest batches whose jobs were written in the ingest task, or sent on after that failed",
    ["outcome"],
)
MEMORIES = Counter("memsync_memories_total", "Distilled memories written, by kind", ["kind"])
STAGE_SECONDS = Histogram(
    "memsync_stage_seconds", "Time spent in each stage of a task", ["stage"], buckets=STAGE_BUCKETS
)
TASK_SECONDS = Histogram(
    "memsync_task_seconds", "Time one task run took", ["task"], buckets=STAGE_BUCKETS
)
QUEUE_WAIT = Histogram(
    "memsync_queue_wait_seconds",
    "From a task message's publication to its start",
    ["queue"],
    buckets=LAG_BUCKETS,
)
EMIT_TO_WRITTEN = Histogram(
    "memsync_emit_to_written_seconds",
    "From the producer publishing a batch of turns to their memories being written",
    ["tenant"],
    buckets=LAG_BUCKETS,
)
RETRIES = Counter("memsync_retries_total", "Task retries scheduled", ["task"])
DEAD_LETTERS = Counter(
    "memsync_dead_letters_total", "Items sent to the dead-letter store", ["task", "kind"]
)
EMBEDDED = Counter("memsync_embedded_total", "Nodes given a vector", ["label"])
FOLDS = Counter("memsync_summary_folds_total", "Rolling-summary folds written", ["kind"])


class TenantLabels:
    """The label for a tenant: itself for the first `limit` tenants seen, "other" after."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, tenant: str) -> str:
        with self._lock:
            if tenant in self._seen:
                return tenant
            if len(self._seen) < self.limit:
                self._seen.add(tenant)
                return tenant
        return OTHER_TENANT


@contextmanager
def timed(stage: str) -> Iterator[None]:
    """Observe the block's wall time as `stage` (also when it raises: failures take time too)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        STAGE_SECONDS.labels(stage).observe(time.perf_counter() - started)


def observe_written(
    jobs: Sequence[SyncJob], emitted_at: float | None, tenant_label: TenantLabels
) -> None:
    """Count written jobs per tenant and, when the batch's emit time is known, its lag."""
    now = time.time()
    tenants: dict[str, int] = {}
    for job in jobs:
        label = tenant_label(job.tenant)
        tenants[label] = tenants.get(label, 0) + 1
    for label, count in tenants.items():
        SYNCED.labels(label).inc(count)
        if emitted_at is not None:
            EMIT_TO_WRITTEN.labels(label).observe(max(0.0, now - emitted_at))


def header_time(value: object) -> float | None:
    """A header's epoch seconds (sent as text), or None when absent or garbled."""
    if not isinstance(value, str | float | int):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def multiprocess_enabled() -> bool:
    """Whether this process's metrics go to the shared files (the exporter warns if not)."""
    from prometheus_client import values

    name: str = values.ValueClass.__name__
    return name != "MutexValue"
