"""The Redis transport with one guard: a queue item kombu cannot read is set aside, not fatal.

Stock kombu raises out of the consumer loop on an item that is not a JSON message envelope, and
the worker stops ("Unrecoverable error"). Here such an item goes, as text, to the dead-letter
store with the reason, and the worker goes on with the next message.
"""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import redis
from kombu.transport import redis as kombu_redis

from pipeline.errors import DeadLetterUnavailable
from workers.deadletter import UNREADABLE_TASK, DeadLetterStore, letters_for

log = logging.getLogger("memsync.transport")


def unreadable_reason(body: bytes | str) -> str | None:
    """Why a raw queue item is not a message envelope kombu can deliver, or None if it is one."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not JSON ({exc})"
    if not isinstance(payload, dict):
        return f"not a message envelope (a JSON {type(payload).__name__})"
    properties = payload.get("properties")
    if not isinstance(properties, dict) or "delivery_tag" not in properties:
        return "not a message envelope (no properties.delivery_tag)"
    return None


class GuardedRedis(redis.Redis):
    """A Redis client that screens items popped by the consumer's BRPOP."""

    def parse_response(self, connection: Any, command_name: str | bytes, **options: Any) -> Any:
        reply = super().parse_response(connection, command_name, **options)  # type: ignore[no-untyped-call]
        if command_name == "BRPOP" and reply:
            queue, body = reply
            reason = unreadable_reason(body)
            if reason is not None:
                self._quarantine(queue, body, reason)
                return None  # kombu reads "nothing popped" and polls again
        return reply

    def _quarantine(self, queue: bytes | str, body: bytes | str, reason: str) -> None:
        raw = body if isinstance(body, bytes) else body.encode()
        letters = letters_for(
            task=UNREADABLE_TASK,
            queue=queue.decode() if isinstance(queue, bytes) else queue,
            stage="decode",
            payload=raw.decode("utf-8", errors="backslashreplace"),
            error=ValueError(f"unreadable queue item: {reason}"),
            permanent=True,
            attempts=1,
            worker=socket.gethostname(),
            split=False,
        )
        try:
            DeadLetterStore(self).put(letters)
        except DeadLetterUnavailable:
            log.critical("unreadable queue item of %d bytes lost: %s", len(raw), reason)
        else:
            log.error("unreadable queue item dead-lettered as %s: %s", letters[0].id, reason)


class Channel(kombu_redis.Channel):
    def _get_client(self) -> Any:
        client = super()._get_client()  # type: ignore[misc]
        # A global key prefix needs kombu's own client class; keep it untouched then.
        return GuardedRedis if client is redis.Redis else client


class Transport(kombu_redis.Transport):
    Channel = Channel
