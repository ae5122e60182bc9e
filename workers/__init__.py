"""Celery app, tasks, producer and CLI: the only code that knows the broker.

A platform needs one import:  `from workers import emit_turn`.
"""

from workers.producer import Producer, emit_turn

__all__ = ["Producer", "emit_turn"]
