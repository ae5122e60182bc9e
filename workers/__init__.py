"""Celery app, tasks, worker-side Redis state and CLI: everything that consumes the broker.

The platform side lives in memsync/ (`import memsync; memsync.emit_turn(event)`); the names
below are re-exported so `from workers import emit_turn` keeps working.
"""

from memsync.producer import Producer, emit_turn

__all__ = ["Producer", "emit_turn"]
