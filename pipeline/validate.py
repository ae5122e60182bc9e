"""Stage 0: turn raw JSON into TurnEvents, or into errors that name the offending field.

`validate_event` is total: whatever it is given, it returns a TurnEvent or raises InvalidEvent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, time
from typing import Any

from pydantic import BaseModel, ValidationError

from pipeline.errors import InvalidEvent, PoisonPayload
from schemas.event import SUBPATH, TurnEvent

MAX_EVENT_BYTES = 2_000_000
# How deep the search for an unserialisable spot goes; json.dumps gives out near 1,000 levels.
_LOCATE_DEPTH = 500
_PATH_PARTS = 8
# The reason's start when an error escaped every specific check (the fuzz test counts these).
UNCLASSIFIED = "unreadable event"
# Errors that hostile input can raise from deep inside parsing or model validation.
_HOSTILE_ERRORS = (
    ArithmeticError,
    AttributeError,
    LookupError,
    RecursionError,
    TypeError,
    ValueError,
)


def validate_event(raw: Mapping[str, Any] | str | bytes | TurnEvent | object) -> TurnEvent:
    """Parse one event; raise InvalidEvent naming the first bad field, and nothing else."""
    if isinstance(raw, TurnEvent):
        return raw
    try:
        return _validate(raw)
    except InvalidEvent:
        raise
    except _HOSTILE_ERRORS as exc:
        # A last line: every known failure is named by field below; this keeps callers total.
        raise InvalidEvent("<event>", f"{UNCLASSIFIED} ({type(exc).__name__})") from None


def _validate(raw: object) -> TurnEvent:
    unwritable: InvalidEvent | None = None
    if isinstance(raw, str | bytes):
        raw = _parse(raw)
    elif isinstance(raw, Mapping):
        raw = raw if isinstance(raw, dict) else dict(raw)
        unwritable = _check_size(raw)
    if not isinstance(raw, dict):
        raise InvalidEvent("<event>", f"expected a JSON object, got {type(raw).__name__}")
    event_id, tenant = _identity(raw)
    try:
        event = TurnEvent.model_validate(raw)
    except ValidationError as exc:
        # The model names contract fields (arguments, created_at) better than the JSON walk.
        field, reason = _first_error(exc)
        raise InvalidEvent(field, reason, event_id, tenant) from None
    if unwritable is not None:
        raise unwritable
    return event


def _parse(raw: str | bytes) -> Any:
    """JSON text to Python, refusing oversize (in UTF-8 bytes), malformed or too deep text."""
    size = len(raw) if isinstance(raw, bytes) else _utf8_size(raw)
    if size > MAX_EVENT_BYTES:
        raise InvalidEvent("<event>", f"event is {size} bytes; the limit is {MAX_EVENT_BYTES}")
    try:
        return json.loads(raw)
    except RecursionError:
        raise InvalidEvent("<event>", "not valid JSON (nested too deeply)") from None
    except ValueError as exc:
        raise InvalidEvent("<event>", f"not valid JSON ({exc})") from None


def _utf8_size(text: str) -> int:
    # Every character is 1 to 4 bytes: skip the encoding when either bound settles it.
    if len(text) > MAX_EVENT_BYTES or 4 * len(text) <= MAX_EVENT_BYTES:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _check_size(raw: dict[str, Any]) -> InvalidEvent | None:
    """Refuse an event over MAX_EVENT_BYTES as compact UTF-8 JSON; return (not raise) the
    error for one that is not JSON at all, so the model may name the field first."""
    try:
        text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"), default=_jsonable)
    except (RecursionError, TypeError, ValueError):
        field, reason = _unserialisable(raw)
        return InvalidEvent(field, reason, *_identity(raw))
    size = _utf8_size(text)
    if size > MAX_EVENT_BYTES:
        raise InvalidEvent(
            "<event>",
            f"event is {size} bytes as JSON; the limit is {MAX_EVENT_BYTES}",
            *_identity(raw),
        )
    return None


def _jsonable(value: Any) -> Any:
    """What a Python caller may put in an event besides JSON: times, mappings, models."""
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


def _unserialisable(raw: dict[str, Any]) -> tuple[str, str]:
    """The first spot json.dumps could not write, as (dotted path, reason)."""
    stack: list[tuple[list[str], Any]] = [([], raw)]
    while stack:
        path, item = stack.pop()
        # Deep paths are cut to where they start: the field names a spot, not a whole chain.
        field = ".".join(path[:_PATH_PARTS]) or "<event>"
        if len(path) > _LOCATE_DEPTH:
            return field, f"nested deeper than {_LOCATE_DEPTH} levels (or circular)"
        if item is None or isinstance(item, str | bool | float | date | time | BaseModel):
            continue
        if isinstance(item, int):
            try:
                str(item)
            except ValueError:
                return field, "integer too large"
            continue
        if isinstance(item, list | tuple):
            stack.extend(([*path, str(i)], child) for i, child in enumerate(item))
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if key is not None and not isinstance(key, str | int | float | bool):
                    return field, f"keys must be text, got {type(key).__name__}"
                stack.append(([*path, _readable(str(key))], child))
        else:
            return field, f"a {type(item).__name__} is not a JSON value"
    return "<event>", "not serialisable as JSON"


def _readable(key: str) -> str:
    """A caller's key as a path part that any terminal or log can print."""
    return key[:40].encode("utf-8", "backslashreplace").decode("utf-8")


def _identity(raw: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The event id and tenant to put on an error, when they are plausible text."""
    event_id = raw.get("event_id")
    tenant = raw.get("tenant", "default")
    return _plain(event_id, 256), _plain(tenant, 64)


def _plain(value: Any, limit: int) -> str | None:
    if not isinstance(value, str) or len(value) > limit:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


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
    loc = [str(part) for part in error["loc"]]
    # A validator may name a spot below its own field (e.g. content part 2: content.2).
    below = (error.get("ctx") or {}).get(SUBPATH)
    if isinstance(below, str):
        loc.append(below)
    field = ".".join(loc) or "<event>"
    message = str(error["msg"])
    # Model-level checks already put the field path at the front of their message.
    prefix = "Value error, "
    if message.startswith(prefix):
        message = message[len(prefix) :]
    if ": " in message and field == "<event>":
        field, message = message.split(": ", 1)
    return field, message
