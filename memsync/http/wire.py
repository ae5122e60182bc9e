"""What goes over the wire: the limits, the request/response models, ApiError, and the reading
and refusal of a turns body, shared by the app and its OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from memsync.reading import DEFAULT_BUDGET_TOKENS
from pipeline.errors import InvalidEvent
from pipeline.validate import MAX_EVENT_BYTES, validate_event
from schemas.context import Context, Message
from schemas.event import Identifier, Tenant, TurnEvent
from schemas.recall import MAX_EXCLUDED, MAX_QUERY_CHARS

# A list of turns is refused past these bounds, before anything is parsed or emitted.
MAX_TURNS_PER_REQUEST: Final = 500
MAX_BODY_BYTES: Final = 4 * MAX_EVENT_BYTES
# A context is put in front of a model's prompt; past this it would fit no model's window.
MAX_BUDGET_TOKENS: Final = 200_000
# How many refused turns one 422 lists (the rest are counted in its detail line).
_MAX_PROBLEMS: Final = 50


class FieldProblem(BaseModel):
    """One thing wrong with a request: where (a dotted field path) and why."""

    field: str
    reason: str
    # Which turn of a list (0-based), and its event id when it could be read.
    index: int | None = None
    event_id: str | None = None


class Problem(BaseModel):
    """Every error answer: a code, one line for people, and for 422 the fields at fault."""

    error: str = Field(
        description="invalid_event, invalid_request, unauthorized, not_found, too_large, "
        "unavailable, overloaded or internal"
    )
    detail: str
    problems: list[FieldProblem] = Field(default_factory=list)
    # On a 503 for a list of turns: the ones taken before the buffer filled (resending all of
    # them is safe, turns are idempotent by event id).
    accepted: list[str] = Field(default_factory=list)


class Accepted(BaseModel):
    """The turns taken, in the order sent: buffered for the broker, as `emit_turn` does."""

    accepted: list[str]


class ContextRequest(BaseModel):
    """What `build_context` needs: whose memory, which channel, an optional question, a budget."""

    model_config = ConfigDict(extra="forbid")

    tenant: Tenant = "default"
    agent_id: Identifier
    channel_id: Identifier
    query: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    budget_tokens: int = Field(default=DEFAULT_BUDGET_TOKENS, ge=0, le=MAX_BUDGET_TOKENS)
    # The platform message ids of the recent window the messages go in front of: never repeated.
    recent_ids: list[Identifier] = Field(default_factory=list, max_length=MAX_EXCLUDED)


class ContextAnswer(BaseModel):
    """The context and its rendering: system messages to put before the recent conversation."""

    context: Context
    messages: list[Message]


class Health(BaseModel):
    """Whether the services the API needs answer now; no addresses, no credentials."""

    status: str = Field(description="ok, or degraded when a service does not answer")
    redis: bool
    neo4j: bool
    # Turns waiting in this server's local spool for the broker.
    spooled: int


class ApiError(Exception):
    """An answer other than success, raised anywhere in a handler and rendered as a Problem."""

    def __init__(
        self,
        status: int,
        error: str,
        detail: str,
        *,
        problems: Sequence[FieldProblem] = (),
        accepted: Sequence[str] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.problem = Problem(
            error=error, detail=detail, problems=list(problems), accepted=list(accepted)
        )
        self.headers = headers


async def _read_body(request: Request) -> bytes:
    """The request body, refused with 413 as soon as it passes MAX_BODY_BYTES."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large() -> ApiError:
    return ApiError(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes; send fewer turns")


def parse_turns(body: bytes) -> list[TurnEvent]:
    """One turn or a JSON list of them, each through the producer's validator.

    Raises ApiError 422 listing every bad turn (by index, field and reason), so a client fixes
    them all at once and nothing of a partly bad list is emitted.
    """
    if not body.lstrip().startswith(b"["):
        try:
            return [validate_event(body)]
        except InvalidEvent as exc:
            raise _refused([(None, exc)], 1) from None
    try:
        items = json.loads(body)
    except (ValueError, RecursionError):
        raise _refused([(None, InvalidEvent("<body>", "not valid JSON"))], 1) from None
    if not items:
        reason = "an empty list; send one turn event or a list of them"
        raise _refused([(None, InvalidEvent("<body>", reason))], 1)
    if len(items) > MAX_TURNS_PER_REQUEST:
        raise ApiError(
            413,
            "too_large",
            f"{len(items)} turns in one request; the limit is {MAX_TURNS_PER_REQUEST}",
        )
    turns: list[TurnEvent] = []
    bad: list[tuple[int | None, InvalidEvent]] = []
    for index, item in enumerate(items):
        try:
            turns.append(validate_event(item))
        except InvalidEvent as exc:
            bad.append((index, exc))
    if bad:
        raise _refused(bad, len(items))
    return turns


def _refused(bad: list[tuple[int | None, InvalidEvent]], total: int) -> ApiError:
    problems = [
        FieldProblem(field=exc.field, reason=exc.reason, index=index, event_id=exc.event_id)
        for index, exc in bad[:_MAX_PROBLEMS]
    ]
    index, first = bad[0]
    where = f"turn {index}: " if index is not None else ""
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    detail = f"{len(bad)} of {total} turn(s) refused, nothing emitted; {where}{first}{more}"
    return ApiError(422, "invalid_event", detail, problems=problems)


def _field_problem(error: Any) -> FieldProblem:
    """A pydantic/FastAPI error as a field path without the `body` prefix."""
    loc = [str(part) for part in error.get("loc", ())]
    if loc and loc[0] == "body":
        loc = loc[1:]
    return FieldProblem(field=".".join(loc) or "<body>", reason=str(error.get("msg", "invalid")))
