"""Instants sent to the reader as microseconds since the epoch (an integer, exact): the driver
builds every temporal value it receives in pure Python, which cost about 40 % of a recall's
own CPU at 100k episodes (docs/benchmarks.md); pipeline/graph/store.py `instant` turns them
back into datetimes."""

from __future__ import annotations


def micros(expr: str) -> str:
    """`expr` (a DATETIME, or null) as integer microseconds since the epoch (null stays null).
    `expr` is evaluated twice, so it is a property or a coalesce of properties."""
    # epochSeconds rounds towards zero (wrong before 1970), epochMillis down: the sub-millisecond
    # part then always adds.
    return f"(({expr}).epochMillis * 1000 + ({expr}).microsecond % 1000)"
