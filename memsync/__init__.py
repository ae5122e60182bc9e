"""memsync's public API: what a platform imports, and nothing of the worker side.

import memsync
memsync.emit_turn(event)                       # the process-wide producer, from MEMSYNC_*
producer = memsync.Producer(memsync.Settings())  # or one of your own
memsync.recall(agent_id="a-1", query="seat")   # reading back (memsync/reading.py); asyncio:
memsync.build_context("a-1", "ch-1")           # memsync.arecall, memsync.abuild_context
"""

from memsync.producer import Producer, default_producer, emit_turn
from memsync.reading import (
    Memory,
    abuild_context,
    arecall,
    build_context,
    default_memory,
    recall,
)
from memsync.settings import Settings
from schemas.context import Context
from schemas.recall import RecallItem, RecallQuery

__all__ = [
    "Context",
    "Memory",
    "Producer",
    "RecallItem",
    "RecallQuery",
    "Settings",
    "abuild_context",
    "arecall",
    "build_context",
    "default_memory",
    "default_producer",
    "emit_turn",
    "recall",
]
