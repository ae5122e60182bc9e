"""Everything that consumes the broker, by role.

worker/ (the Celery app, tasks and their bootsteps), state/ (Redis state kept beside the
queues), cli/ (the operator CLI), local/ (local development services). The platform side lives
in memsync/ (`import memsync; memsync.emit_turn(event)`); the names below are re-exported so
`from workers import emit_turn` keeps working.
"""

from memsync.producer import Producer, emit_turn

__all__ = ["Producer", "emit_turn"]
