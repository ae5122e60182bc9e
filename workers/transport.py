"""The Redis transport with two guards, each against an error that stops a stock worker.

1. A queue item that is not a JSON message envelope makes kombu raise out of the consumer loop
   ("Unrecoverable error"). Here it goes, as text, to the dead-letter store with the reason.
2. A second broker connection loss can make kombu fail while restoring unacked messages on a
   half-closed channel. Here that restore is skipped; the messages stay in Redis and return
   after the visibility timeout.
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
                self._dead_letter(queue, body, reason)
                return None  # kombu reads "nothing popped" and polls again
        return reply

    def _dead_letter(self, queue: bytes | str, body: bytes | str, reason: str) -> None:
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


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client: Any = None) -> Any:
        try:
            return super().restore_unacked(client)
        except AttributeError:
            # After a connection loss the consumer may close a channel whose connection info is
            # already gone, and kombu then fails here, which stops the worker. The messages are
            # still in Redis's unacked set and come back after the visibility timeout.
            delivered = self._delivered
            log.warning(
                "could not restore %d unacked message(s) at disconnect; they return after the "
                "visibility timeout",
                len(delivered or ()),
            )
            if delivered is not None:
                delivered.clear()
            return None


class Channel(kombu_redis.Channel):
    QoS = QoS

    def _get_client(self) -> Any:
        client = super()._get_client()  # type: ignore[misc]
        # A global key prefix needs kombu's own client class; keep it untouched then.
        return GuardedRedis if client is redis.Redis else client


class Transport(kombu_redis.Transport):
    Channel = Channel
