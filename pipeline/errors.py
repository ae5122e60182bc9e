"""The one error tree: retry decisions key on the branch, never on a message string."""

from __future__ import annotations


class MemsyncError(Exception):
    """Base of every error memsync raises on purpose."""


class RetryableError(MemsyncError):
    """A passing condition (a service away, a timeout): the same work may succeed later."""


class GraphUnavailable(RetryableError):
    """Neo4j could not be reached, or the session expired outside the driver's managed retries."""


class BrokerUnavailable(RetryableError):
    """The broker could not be reached or did not answer in time."""


class BufferFull(RetryableError):
    """The producer's local buffer is full; the caller should slow down or retry."""


class PermanentError(MemsyncError):
    """Retrying cannot help: the input or the configuration is wrong."""


class InvalidEvent(PermanentError):
    """A turn event broke the contract; `field` names where (dotted path, e.g. messages.2.role)."""

    def __init__(
        self, field: str, reason: str, event_id: str | None = None, tenant: str | None = None
    ) -> None:
        self.field = field
        self.reason = reason
        self.event_id = event_id
        self.tenant = tenant
        where = f"event {event_id!r}: " if event_id else ""
        super().__init__(f"{where}{field}: {reason}")


class PoisonPayload(PermanentError):
    """A queue message that is not a list of objects memsync can read at all."""


class ConfigurationError(PermanentError):
    """A setting is missing or inconsistent; the message says which one to change."""


class SpoolFull(RetryableError):
    """The producer's durable spool is at its size bound; events wait in memory instead."""


class DeadLetterUnavailable(RetryableError):
    """The dead-letter store could not be written; the message is requeued instead of acked."""
