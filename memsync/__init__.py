"""memsync's public API: what a platform imports, and nothing of the worker side.

import memsync
memsync.emit_turn(event)                       # the process-wide producer, from MEMSYNC_*
producer = memsync.Producer(memsync.Settings())  # or one of your own
"""

from memsync.producer import Producer, default_producer, emit_turn
from memsync.settings import Settings

__all__ = ["Producer", "Settings", "default_producer", "emit_turn"]
