"""English due-date phrases ("by Friday", "EOD", "the 15th") as UTC times after a message."""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import UTC, datetime, timedelta

import dateparser

from schemas.event import as_utc

# Due dates outside this window are misreadings ("by December 9999"): the commitment stays,
# undated, and no later date arithmetic or graph write can overflow on it.
DUE_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
DUE_LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def resolve_due(phrase: str, stated_at: datetime) -> datetime | None:
    """A date phrase ("by Friday", "EOD", "the 15th") as a UTC time after the message time,
    or None when it names no date inside [DUE_EARLIEST, DUE_LATEST)."""
    try:
        return due_in_window(_parse_due(phrase, stated_at))
    except (OverflowError, ValueError):
        # Date arithmetic near the calendar's ends (dateparser's included) overflows.
        return None


def due_in_window(due: datetime | None) -> datetime | None:
    """The due time in UTC if it lies in [DUE_EARLIEST, DUE_LATEST), else None."""
    if due is None:
        return None
    try:
        utc = as_utc(due)
    except OverflowError:
        return None
    return utc if DUE_EARLIEST <= utc < DUE_LATEST else None


def _parse_due(phrase: str, stated_at: datetime) -> datetime | None:
    base = as_utc(stated_at)
    phrase = phrase.lower().strip()
    if phrase in ("eod", "cob", "end of day", "end of the day", "today", "later today"):
        return base.replace(hour=max(base.hour, 17), minute=0, second=0, microsecond=0)
    if phrase in ("eow", "end of week", "end of the week"):
        days = (4 - base.weekday()) % 7
        return (base + timedelta(days=days)).replace(hour=17, minute=0, second=0, microsecond=0)
    if phrase in ("end of month", "end of the month"):
        last = monthrange(base.year, base.month)[1]
        return base.replace(day=last, hour=17, minute=0, second=0, microsecond=0)
    day_of_month = re.fullmatch(r"the (\d{1,2})(?:st|nd|rd|th)", phrase)
    if day_of_month:
        day = int(day_of_month.group(1))
        year, month = (base.year, base.month) if day >= base.day else _next_month(base)
        if day > monthrange(year, month)[1]:
            return None
        return base.replace(year=year, month=month, day=day, hour=17, minute=0, second=0)
    settings = {
        "PREFER_DATES_FROM": "future",
        "RELATIVE_BASE": base.replace(tzinfo=None),
        "TIMEZONE": "UTC",
        "TO_TIMEZONE": "UTC",
        "RETURN_AS_TIMEZONE_AWARE": True,
    }
    parsed = dateparser.parse(phrase, languages=["en"], settings=settings)
    return as_utc(parsed) if isinstance(parsed, datetime) else None


def _next_month(base: datetime) -> tuple[int, int]:
    return (base.year + 1, 1) if base.month == 12 else (base.year, base.month + 1)
