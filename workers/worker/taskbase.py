"""The task base class: failures that retries cannot fix go to the dead-letter store, never away.

Celery's `autoretry_for` handles the retryable branch (exponential backoff with jitter). What
escapes it (a permanent error, retries exhausted, or an unexpected exception) is written to the
dead-letter store before the task fails. If that write fails, the message is rejected with
requeue, so it is not acked away.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from celery import Task
from celery.exceptions import Ignore, Reject, Retry

from pipeline.errors import MemsyncError, PermanentError
from workers.state.deadletter import DeadLetter, letters_for
from workers.worker import runtime

log = logging.getLogger("memsync.tasks")

DEAD_LETTERED = "_memsync_dead_lettered"


class MemsyncTask(Task):  # type: ignore[type-arg]
    """Base for memsync tasks: one list payload, a stage name, dead letters on final failure."""

    stage: ClassVar[str] = "task"
    default_queue: ClassVar[str] = ""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
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
        except (Retry, Ignore):
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
