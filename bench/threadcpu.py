"""CPU time of processes, and of a process's threads grouped by what they do (Linux /proc).

The benches use it on Neo4j's JVM: a phase timed while the JIT compiler threads are still busy
measures the JVM's warm-up as much as the writes (on 2 cores, compiling competes with
everything), so each phase reports how Neo4j's CPU split between queries and compiling.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Final

# Thread names (as /proc shows them, cut to 15 characters) by role; the first match wins.
ROLES: Final = (
    ("compiler", ("C1 CompilerThre", "C2 CompilerThre")),
    ("gc", ("GC Thread", "G1 ")),
    ("queries", ("neo4j.Bolt",)),
)
_TICKS: Final = os.sysconf("SC_CLK_TCK")


def role(name: str) -> str:
    for found, prefixes in ROLES:
        if name.startswith(prefixes):
            return found
    return "other"


def by_thread(pid: int) -> dict[str, float]:
    """CPU seconds (user and system) of each live thread of `pid`, by thread id."""
    seconds: dict[str, float] = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/comm") as comm, open(f"{base}/{tid}/stat") as stat:
                name = comm.read().strip()
                # Fields after the parenthesised name; utime and stime are the 12th and 13th.
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended while we read
            continue
        seconds[f"{tid}:{name}"] = (int(fields[11]) + int(fields[12])) / _TICKS
    return seconds


def process_seconds(pid: int) -> float:
    """CPU seconds (user and system, every thread) a live process has used; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def by_role(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds spent between two `by_thread` snapshots, summed per role (and in total)."""
    spent: defaultdict[str, float] = defaultdict(float)
    for thread, seconds in after.items():
        spent[role(thread.split(":", 1)[1])] += seconds - before.get(thread, 0.0)
    # A thread that ended between the snapshots is missing from `after`: its time is lost,
    # which undercounts, never overcounts.
    roles = ("queries", "compiler", "gc", "other")
    result: dict[str, float] = {name: round(spent[name], 2) for name in roles}
    result["total"] = round(sum(spent.values()), 2)
    return result
