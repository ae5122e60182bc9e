"""Replay dead letters: each payload goes back to the queue it failed in, as a new task."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from celery import Celery

from memsync.inflight import sent_now
from memsync.message import payload_repr
from workers.state.deadletter import DeadLetter, DeadLetterStore

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass
class ReplayReport:
    sent: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def replay(
    store: DeadLetterStore,
    app: Celery,
    ids: Sequence[str] | None,
    *,
    dry_run: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Send the chosen entries (all when `ids` is None) back to their queues.

    The entry stays until the replayed task succeeds, which removes it; replaying an entry twice
    is harmless because every write is idempotent.
    """
    report = ReplayReport()
    if ids is None:
        letters: list[DeadLetter] = store.entries()
    else:
        letters = []
        for entry_id in ids:
            letter = store.get(entry_id)
            if letter is None:
                report.missing.append(entry_id)
            else:
                letters.append(letter)
    for done, letter in enumerate(letters, start=1):
        why_not = letter.unreplayable_reason
        if why_not is not None:
            report.skipped.append((letter.id, why_not))
        else:
            if not dry_run:
                app.send_task(
                    letter.task,
                    args=(letter.payload,),
                    argsrepr=payload_repr(letter.payload),
                    queue=letter.queue,
                    task_id=str(uuid.uuid4()),
                    headers={
                        **sent_now(),
                        "memsync_dlq_entry": letter.id,
                        "memsync_idempotency_key": letter.idempotency_key,
                    },
                )
            report.sent.append(letter.id)
        if on_progress is not None:
            on_progress(done)
    return report


def parse_duration(text: str) -> float:
    """Seconds in '90s', '15m', '12h', '7d' or '2w'."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if not match:
        raise ValueError(f"duration {text!r}: use a number and a unit, e.g. 30m, 12h, 7d")
    return float(match.group(1)) * _UNITS[match.group(2)]
