"""Stage 0: turn raw JSON into TurnEvents, or into errors that name the offending field."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from pipeline.errors import InvalidEvent, PoisonPayload
from schemas.event import TurnEvent

MAX_EVENT_BYTES = 2_000_000


def validate_event(raw: Mapping[str, Any] | str | bytes | TurnEvent) -> TurnEvent:
    """Parse one event; raise InvalidEvent naming the first bad field."""
    if isinstance(raw, TurnEvent):
        return raw
    if isinstance(raw, str | bytes):
        if len(raw) > MAX_EVENT_BYTES:
            raise InvalidEvent(
                "<event>", f"event is {len(raw)} bytes; the limit is {MAX_EVENT_BYTES}"
            )
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise InvalidEvent("<event>", f"not valid JSON ({exc})") from None
    if not isinstance(raw, Mapping):
        raise InvalidEvent("<event>", f"expected a JSON object, got {type(raw).__name__}")
    event_id = raw.get("event_id")
    tenant = raw.get("tenant", "default")
    try:
        return TurnEvent.model_validate(raw)
    except ValidationError as exc:
        field, reason = _first_error(exc)
        raise InvalidEvent(
            field,
            reason,
            event_id if isinstance(event_id, str) else None,
            tenant if isinstance(tenant, str) else None,
        ) from None


def validate_events(
    raws: Sequence[Any],
) -> tuple[list[TurnEvent], list[InvalidEvent]]:
    """Parse a batch: good events go on, each bad one becomes an InvalidEvent, none vanish."""
    good, bad = partition_events(raws)
    return [event for _, event in good], [error for _, error in bad]


def partition_events(
    raws: Sequence[Any],
) -> tuple[list[tuple[Any, TurnEvent]], list[tuple[Any, InvalidEvent]]]:
    """Like validate_events, keeping each raw item beside its outcome (for dead letters)."""
    if not isinstance(raws, list | tuple):
        raise PoisonPayload(f"expected a list of events, got {type(raws).__name__}")
    good: list[tuple[Any, TurnEvent]] = []
    bad: list[tuple[Any, InvalidEvent]] = []
    for raw in raws:
        try:
            good.append((raw, validate_event(raw)))
        except InvalidEvent as exc:
            bad.append((raw, exc))
    return good, bad


def _first_error(exc: ValidationError) -> tuple[str, str]:
    error = exc.errors(include_url=False)[0]
    field = ".".join(str(part) for part in error["loc"]) or "<event>"
    message = str(error["msg"])
    # Model-level checks already put the field path at the front of their message.
    prefix = "Value error, "
    if message.startswith(prefix):
        message = message[len(prefix) :]
    if ": " in message and field == "<event>":
        field, message = message.split(": ", 1)
    return field, message
