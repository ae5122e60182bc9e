"""JSON log lines on request (MEMSYNC_LOG_FORMAT=json), with the turn's identifiers attached.

A record carries its own message (memsync's log lines name events, agents and counts, never
what was said) plus whatever context the code running it bound: tenant, event id, agent, and
in a worker the Celery task's id and name. Context lives in a context variable, so threads and
asyncio tasks each keep their own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Final

# The identifiers a record may carry, in the order they are written.
CONTEXT_FIELDS: Final = ("tenant", "event_id", "agent", "task_id", "task_name")
# A batch names at most this many of each identifier; the rest are counted.
MAX_LISTED: Final = 10

_context: ContextVar[Mapping[str, Any] | None] = ContextVar("memsync_log_context", default=None)


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Attach identifiers to every record logged inside the block (None values are left out)."""
    current = dict(_context.get() or {})
    current.update({k: v for k, v in fields.items() if v is not None})
    token = _context.set(current)
    try:
        yield
    finally:
        _context.reset(token)


def listed(values: list[str]) -> str | list[str] | None:
    """One identifier as itself, several as a bounded list (with "+N more"), none as None."""
    distinct = list(dict.fromkeys(values))
    if not distinct:
        return None
    if len(distinct) == 1:
        return distinct[0]
    shown = distinct[:MAX_LISTED]
    if len(distinct) > MAX_LISTED:
        shown.append(f"+{len(distinct) - MAX_LISTED} more")
    return shown


class ContextFilter(logging.Filter):
    """Copies the bound identifiers onto each record (as attributes the formatter reads)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_context.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, identifiers, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None and value != "???":  # Celery's placeholder outside a task
                line[name] = value
        if record.exc_info:
            line["exc_type"] = getattr(record.exc_info[0], "__name__", None)
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def use_json(handler: logging.Handler) -> None:
    """Make `handler` write JSON lines carrying the bound identifiers."""
    handler.setFormatter(JsonFormatter())
    if not any(isinstance(f, ContextFilter) for f in handler.filters):
        handler.addFilter(ContextFilter())
