"""The task base class: failures that retries cannot fix go to the dead-letter store, never away.

Celery's `autoretry_for` handles the retryable branch (exponential backoff with jitter). What
escapes it (a permanent error, retries exhausted, or an unexpected exception) is written to the
dead-letter store before the task fails. If that write fails, the message is rejected with
requeue, so it is not acked away.
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

from celery import Task
from celery.exceptions import Ignore, Reject, Retry

from memsync.inflight import SENT_AT_HEADER
from memsync.logs import listed, log_context
from memsync.tracing import CONTEXT_HEADERS
from pipeline.errors import MemsyncError, PermanentError, RetryableError
from workers.state.deadletter import DeadLetter, letters_for
from workers.worker import metrics, runtime

log = logging.getLogger("memsync.tasks")

DEAD_LETTERED = "_memsync_dead_lettered"


class MemsyncTask(Task):  # type: ignore[type-arg]
    """Base for memsync tasks: one list payload, a stage name, dead letters on final failure."""

    stage: ClassVar[str] = "task"
    default_queue: ClassVar[str] = ""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sent_at = metrics.header_time(getattr(self.request, SENT_AT_HEADER, None))
        if sent_at is not None:
            metrics.QUEUE_WAIT.labels(self.default_queue).observe(max(0.0, time.time() - sent_at))
        started = time.perf_counter()
        payload = args[0] if args else kwargs.get("payload")
        request = self.request
        carrier = {name: getattr(request, name, None) for name in CONTEXT_HEADERS}
        named = identifiers(payload)
        try:
            with (
                log_context(**named),
                runtime.tracing().span(
                    f"memsync.{self.stage}",
                    carrier=carrier,
                    kind="CONSUMER",
                    attributes=_span_attributes(named, request.id),
                ),
            ):
                return self._run_kept(*args, **kwargs)
        finally:
            metrics.TASK_SECONDS.labels(self.stage).observe(time.perf_counter() - started)

    def _run_kept(self, *args: Any, **kwargs: Any) -> Any:
        # The tracer has already pushed this request; call run directly so the context is kept.
        try:
            return self.run(*args, **kwargs)
        except Reject as exc:
            # celery-types does not declare Reject's attributes; Celery sets both.
            if getattr(exc, "requeue", False):
                raise
            # Celery raises Reject(requeue=False) when it cannot publish a retry (the broker is
            # away): that would drop the message. Requeue it instead; if even that cannot reach
            # the broker, the message stays unacked and comes back by the restore.
            reason = getattr(exc, "reason", exc)
            log.warning(
                "retry of %s[%s] not published, requeueing: %s", self.name, self.request.id, reason
            )
            raise Reject(reason, requeue=True) from exc
        except Retry:
            metrics.RETRIES.labels(self.stage).inc()
            raise
        except Ignore:
            raise
        except Exception as exc:
            payload = args[0] if args else kwargs.get("payload")
            self.dead_letter(payload, exc)
            setattr(exc, DEAD_LETTERED, True)
            raise

    def dead_letter(
        self, payload: Any, error: BaseException, *, split: bool = True
    ) -> list[DeadLetter]:
        """Store `payload` (item by item) as dead letters; requeue the message if that fails."""
        request = self.request
        delivery = request.delivery_info or {}
        letters = letters_for(
            task=self.name,
            queue=delivery.get("routing_key") or self.default_queue,
            stage=self.stage,
            payload=payload,
            error=error,
            permanent=isinstance(error, PermanentError),
            attempts=(request.retries or 0) + 1,
            worker=request.hostname or "",
            split=split,
        )
        try:
            runtime.deadletters().put(letters)
        except MemsyncError as exc:
            log.critical("dead-letter store unavailable, requeueing %s: %s", request.id, exc)
            raise Reject(str(exc), requeue=True) from exc
        if isinstance(error, PermanentError):
            reason = "permanent"
        elif isinstance(error, RetryableError):
            reason = "retries_exhausted"
        else:
            reason = "unexpected"
        metrics.DEAD_LETTERS.labels(self.stage, reason).inc(len(letters))
        kind = "permanent" if isinstance(error, PermanentError) else type(error).__name__
        log.error(
            "dead-lettered %d item(s) of %s[%s] (%s): %s",
            len(letters),
            self.name,
            request.id,
            kind,
            error,
        )
        self.on_dead_letters(letters)
        return letters

    def on_dead_letters(self, letters: list[DeadLetter]) -> None:
        """Hook: record dead letters in the ledger so progress reflects them."""


def identifiers(payload: Any) -> dict[str, str | list[str] | None]:
    """The tenants, event ids and agents a task's payload names, for its log lines (never the
    text): an ingest payload is a list of events, a sync payload a list of jobs."""
    items = payload if isinstance(payload, list) else [payload]
    found: dict[str, list[str]] = {"tenant": [], "event_id": [], "agent": []}
    for item in items:
        if not isinstance(item, dict):
            continue
        for name in ("tenant", "event_id"):
            value = item.get(name)
            if isinstance(value, str):
                found[name].append(value)
        agent = item.get("agent")
        key = agent.get("key") if isinstance(agent, dict) else None
        if isinstance(key, str):
            found["agent"].append(key)
    return {name: listed(values) for name, values in found.items()}


def _span_attributes(named: dict[str, str | list[str] | None], task_id: Any) -> dict[str, str]:
    attributes = {"celery.task_id": str(task_id)}
    for name, value in named.items():
        if value is not None:
            attributes[f"memsync.{name}"] = value if isinstance(value, str) else ",".join(value)
    return attributes
