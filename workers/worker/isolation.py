"""Failure isolation for batch tasks: one bad item never takes the rest of its batch down.

A batch that fails for a reason retrying cannot fix is split in halves and each half tried again,
down to single items, so everything that can be written is written and only the culprits are
dead-lettered. Retryable failures are not split: the whole task is retried as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from celery.exceptions import Ignore, Reject, Retry

from pipeline.errors import RetryableError

T = TypeVar("T")

# Control flow of Celery itself and passing conditions: never a reason to blame one item.
_PASS_THROUGH = (RetryableError, Retry, Reject, Ignore)


@dataclass
class Isolated(Generic[T]):
    """What happened to a batch: the groups written, and each culprit with its error."""

    written: list[list[T]] = field(default_factory=list)
    failed: list[tuple[T, Exception]] = field(default_factory=list)
    attempts: int = 0


def bisect(items: Sequence[T], attempt: Callable[[list[T]], None]) -> Isolated[T]:
    """Call `attempt` on the whole batch; on a permanent failure, on halves, down to single items.

    `attempt` must be idempotent (it may have half-succeeded before it raised): our writes are
    MERGEs in one transaction per call, so a failed call wrote nothing and a repeated one is
    harmless. A batch with one culprit costs about 2 * log2(n) extra attempts.
    """
    outcome: Isolated[T] = Isolated()
    pending: list[list[T]] = [list(items)] if items else []
    while pending:
        group = pending.pop(0)
        outcome.attempts += 1
        try:
            attempt(group)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            if len(group) == 1:
                outcome.failed.append((group[0], exc))
            else:
                middle = len(group) // 2
                pending[:0] = [group[:middle], group[middle:]]
            continue
        outcome.written.append(group)
    return outcome
