"""A turn encoded once, as JSON text, in the caller's thread of `emit()`.

pydantic's Rust serialiser writes the text there; the publisher thread, the spool and the
in-flight record pass it on as it is, so no JSON encoding in the background holds the
interpreter while a caller waits to emit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from schemas.event import TurnEvent


class EncodedTurn(NamedTuple):
    """One turn as compact JSON text, with the identity the publisher tracks it by."""

    event_id: str
    tenant: str
    text: str


def encode_turn(turn: TurnEvent) -> EncodedTurn:
    """A validated turn as the workers read it: the JSON of
    `turn.model_dump(mode="json", exclude_none=True)`."""
    return EncodedTurn(turn.event_id, turn.tenant, turn.model_dump_json(exclude_none=True))


def encode_payload(payload: Mapping[str, Any]) -> EncodedTurn:
    """A turn already decoded to a mapping (the reconciler's re-send), encoded as it is."""
    # ensure_ascii: a lone surrogate (json.loads lets "\ud800" through) still encodes to UTF-8.
    text = json.dumps(dict(payload), separators=(",", ":"), ensure_ascii=True)
    return EncodedTurn(str(payload["event_id"]), str(payload.get("tenant", "default")), text)


def encoded(turn: EncodedTurn | Mapping[str, Any]) -> EncodedTurn:
    """The turn as EncodedTurn: passed through if it is one, else encoded."""
    return turn if isinstance(turn, EncodedTurn) else encode_payload(turn)
