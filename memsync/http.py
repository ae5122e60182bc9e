"""The HTTP API (`memsync serve`): emit_turn, recall and build_context for platforms not in Python.

JSON only, on loopback unless told otherwise; with MEMSYNC_API_TOKEN set, every /v1 call but
health needs `Authorization: Bearer <token>`. A bad turn is refused with the same field-naming
errors the Python producer raises; a graph or broker outage is a 503 with a one-line reason.

    python -m memsync.http --dump-openapi docs/openapi.json \
        --dump-event-schema docs/event.schema.json
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import secrets
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from copy import deepcopy
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, Final

import redis
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from memsync.producer import Producer
from memsync.reading import DEFAULT_BUDGET_TOKENS, Memory
from memsync.settings import Settings
from pipeline.errors import (
    BrokerUnavailable,
    BufferFull,
    ConfigurationError,
    GraphUnavailable,
    InvalidEvent,
    SpoolFull,
)
from pipeline.graph.store import GraphStore
from pipeline.validate import MAX_EVENT_BYTES, validate_event
from schemas.context import Context, Message
from schemas.event import Identifier, Tenant, TurnEvent
from schemas.recall import MAX_QUERY_CHARS, RecallItem, RecallQuery

log = logging.getLogger("memsync.http")

# A list of turns is refused past these bounds, before anything is parsed or emitted.
MAX_TURNS_PER_REQUEST: Final = 500
MAX_BODY_BYTES: Final = 4 * MAX_EVENT_BYTES
# A context is put in front of a model's prompt; past this it would fit no model's window.
MAX_BUDGET_TOKENS: Final = 200_000
# How many refused turns one 422 lists (the rest are counted in its detail line).
_MAX_PROBLEMS: Final = 50
_HEALTH_TIMEOUT: Final = 2.0
_REALM: Final = 'Bearer realm="memsync"'
_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_JSON: Final = "application/json"


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


_GUARDED: Final[dict[int | str, dict[str, Any]]] = {
    401: {"model": Problem, "description": "Missing or wrong bearer token"},
    503: {"model": Problem, "description": "Neo4j or Redis unavailable, or overloaded; retry"},
}


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


@dataclass
class Resources:
    """What one app holds for its lifetime: the producer, the memory reader (its Neo4j driver
    and embedder), and a Redis client for health checks."""

    producer: Producer
    memory: Memory
    broker: redis.Redis

    @classmethod
    def open(cls, settings: Settings) -> Resources:
        broker = redis.Redis.from_url(
            settings.broker_url,
            socket_timeout=_HEALTH_TIMEOUT,
            socket_connect_timeout=_HEALTH_TIMEOUT,
        )
        return cls(Producer(settings), Memory.from_settings(settings), broker)

    def close(self) -> None:
        # The producer first: its buffered turns go to the broker or the spool before exit.
        self.producer.close()
        self.memory.close()
        self.broker.close()


# Declared once so the OpenAPI document names the scheme; auto_error off so a missing or
# wrong token gets our 401 (with WWW-Authenticate), and no token is needed when none is set.
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="MEMSYNC_API_TOKEN; required on every /v1 call but health when set",
)


def _token(settings: Settings) -> bytes | None:
    value = settings.api_token.get_secret_value() if settings.api_token else ""
    return value.encode() if value else None


def create_app(settings: Settings) -> FastAPI:
    """The API over `settings`; services are reached only once the app's lifespan starts."""
    expected = _token(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        resources = await run_in_threadpool(Resources.open, settings)
        app.state.resources = resources
        try:
            yield
        finally:
            await run_in_threadpool(resources.close)

    def authorised(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        if expected is None:
            return
        given = credentials.credentials.encode() if credentials is not None else b""
        # Constant time, so the answer's timing says nothing about how much of a guess matched.
        if not secrets.compare_digest(given, expected):
            challenge = _REALM if credentials is None else f'{_REALM}, error="invalid_token"'
            raise ApiError(
                401,
                "unauthorized",
                "a valid bearer token is required (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": challenge},
            )

    app = FastAPI(
        title="memsync",
        version=_version(),
        summary="Conversation turns in, per-agent memory out.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    _add_error_handlers(app)
    guarded = [Depends(authorised)]

    @app.post(
        "/v1/turns",
        status_code=202,
        response_model=Accepted,
        dependencies=guarded,
        tags=["turns"],
        summary="Emit one turn event or a list of them (emit_turn)",
        responses={
            **_GUARDED,
            413: {"model": Problem, "description": "Body or list too large"},
            422: {"model": Problem, "description": "A turn broke the contract; fields named"},
        },
        openapi_extra={"requestBody": _turns_body()},
    )
    async def post_turns(request: Request) -> Accepted:
        """Validate every turn first (nothing is emitted if one is bad), then buffer them all."""
        body = await _read_body(request)
        turns = await run_in_threadpool(parse_turns, body)
        producer = _resources(request).producer
        accepted: list[str] = []
        try:
            for turn in turns:
                accepted.append(producer.emit(turn))
        except (BufferFull, SpoolFull) as exc:
            raise ApiError(
                503,
                "overloaded",
                f"{exc}; retry later",
                accepted=accepted,
                headers={"Retry-After": "1"},
            ) from None
        return Accepted(accepted=accepted)

    @app.post(
        "/v1/recall",
        response_model=list[RecallItem],
        dependencies=guarded,
        tags=["memory"],
        summary="What an agent remembers that answers a query, best first (recall)",
        responses={**_GUARDED, 422: {"model": Problem, "description": "A bad query; fields named"}},
    )
    def post_recall(query: RecallQuery, request: Request) -> list[RecallItem]:
        return _resources(request).memory.recall(query)

    @app.post(
        "/v1/context",
        response_model=ContextAnswer,
        dependencies=guarded,
        tags=["memory"],
        summary="What an agent is told before it answers in a channel (build_context)",
        responses={
            **_GUARDED,
            422: {"model": Problem, "description": "A bad request; fields named"},
        },
    )
    def post_context(asked: ContextRequest, request: Request) -> ContextAnswer:
        context = _resources(request).memory.build_context(
            asked.agent_id,
            asked.channel_id,
            tenant=asked.tenant,
            query=asked.query,
            budget_tokens=asked.budget_tokens,
        )
        return ContextAnswer(context=context, messages=context.render())

    @app.get(
        "/v1/health",
        response_model=Health,
        tags=["service"],
        summary="Whether Redis and Neo4j answer (no token needed)",
        responses={503: {"model": Health, "description": "A service does not answer"}},
    )
    def get_health(request: Request) -> JSONResponse:
        resources = _resources(request)
        redis_up = _redis_answers(resources.broker)
        neo4j_up = _neo4j_answers(resources.memory.graph)
        up = redis_up and neo4j_up
        health = Health(
            status="ok" if up else "degraded",
            redis=redis_up,
            neo4j=neo4j_up,
            spooled=resources.producer.spool_status().events,
        )
        return JSONResponse(health.model_dump(mode="json"), status_code=200 if up else 503)

    @app.get(
        "/v1/schema/event",
        dependencies=guarded,
        tags=["service"],
        summary="The JSON Schema of a turn event (version 1)",
        response_model=dict[str, Any],
        responses={401: _GUARDED[401]},
    )
    def get_event_schema() -> dict[str, Any]:
        return event_schema()

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _resources(request: Request) -> Resources:
    resources: Resources = request.app.state.resources
    return resources


def _redis_answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def _neo4j_answers(graph: GraphStore) -> bool:
    try:
        graph.driver.verify_connectivity()
    except Exception:  # the driver raises many types for "not reachable"; all mean no
        return False
    return True


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


def _add_error_handlers(app: FastAPI) -> None:
    """Every failure as a Problem in JSON: never a traceback, never a setting's value."""

    def answer(
        status: int, problem: Problem, headers: Mapping[str, str] | None = None
    ) -> JSONResponse:
        return JSONResponse(problem.model_dump(mode="json"), status_code=status, headers=headers)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return answer(exc.status, exc.problem, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [_field_problem(error) for error in exc.errors()]
        first = problems[0] if problems else FieldProblem(field="<body>", reason="invalid")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        detail = f"{first.field}: {first.reason}{more}"
        return answer(422, Problem(error="invalid_request", detail=detail, problems=problems))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else "invalid_request"
        return answer(exc.status_code, Problem(error=code, detail=str(exc.detail)), exc.headers)

    @app.exception_handler(GraphUnavailable)
    async def graph_down(request: Request, exc: GraphUnavailable) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        detail = "the memory graph (Neo4j) is unavailable; retry later"
        return answer(503, Problem(error="unavailable", detail=detail), {"Retry-After": "5"})

    @app.exception_handler(BrokerUnavailable)
    async def broker_down(request: Request, exc: BrokerUnavailable) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        detail = "the broker (Redis) is unavailable; retry later"
        return answer(503, Problem(error="unavailable", detail=detail), {"Retry-After": "5"})

    @app.exception_handler(ConfigurationError)
    async def misconfigured(request: Request, exc: ConfigurationError) -> JSONResponse:
        log.error("%s %s: %s", request.method, request.url.path, exc)
        detail = "the server is misconfigured; see its log"
        return answer(500, Problem(error="internal", detail=detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette re-raises it after this answer, so the traceback reaches the server's log
        # (and only the log).
        detail = "an unexpected error; see the server's log"
        return answer(500, Problem(error="internal", detail=detail))


def _field_problem(error: Any) -> FieldProblem:
    """A pydantic/FastAPI error as a field path without the `body` prefix."""
    loc = [str(part) for part in error.get("loc", ())]
    if loc and loc[0] == "body":
        loc = loc[1:]
    return FieldProblem(field=".".join(loc) or "<body>", reason=str(error.get("msg", "invalid")))


def event_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a turn event, as TurnEvent validates it."""
    schema = TurnEvent.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _turns_body() -> dict[str, Any]:
    ref = {"$ref": "#/components/schemas/TurnEvent"}
    one_or_many = {
        "oneOf": [
            ref,
            {"type": "array", "items": ref, "minItems": 1, "maxItems": MAX_TURNS_PER_REQUEST},
        ]
    }
    return {"required": True, "content": {_JSON: {"schema": one_or_many}}}


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, plus the turn event's schemas (the turns body is read raw)."""
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            routes=app.routes,
        )
        _, defs = models_json_schema(
            [(TurnEvent, "validation")], ref_template="#/components/schemas/{model}"
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in defs.get("$defs", {}).items():
            if schemas.setdefault(name, schema) != schema:
                # Two models of one name would make one of the documented bodies a lie.
                raise RuntimeError(f"OpenAPI schema name {name!r} is used twice")
        document["components"]["schemas"] = dict(sorted(schemas.items()))
        app.openapi_schema = document
    return deepcopy(app.openapi_schema)


def _version() -> str:
    try:
        return metadata.version("memsync")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or name (0.0.0.0 and :: are every address, not)."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings) -> None:
    """Refuse to listen beyond loopback without a bearer token (anyone could read memory)."""
    if not is_loopback(settings.serve_host) and _token(settings) is None:
        raise ConfigurationError(
            f"refusing to serve on {settings.serve_host} without a token: set MEMSYNC_API_TOKEN, "
            "or bind to loopback (--host 127.0.0.1)"
        )


def log_config() -> dict[str, Any]:
    """Uvicorn's logging, plus memsync's own loggers; access lines carry no headers."""
    from uvicorn.config import LOGGING_CONFIG

    config = deepcopy(LOGGING_CONFIG)
    for name in ("memsync", "pipeline"):
        config["loggers"][name] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """Uvicorn's server, but SIGTERM (a supervisor's stop) ends in exit 0 after the graceful
        shutdown, as for `memsync worker`, instead of the process dying by the signal again."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            if sig == signal.SIGTERM:
                self._captured_signals = [s for s in self._captured_signals if s != sig]

    return Server


def serve(settings: Settings, *, host: str | None = None, port: int | None = None) -> int:
    """Run the API under uvicorn until stopped (SIGINT/SIGTERM); 0 on a clean stop."""
    import uvicorn

    update: dict[str, Any] = {}
    if host is not None:
        update["serve_host"] = host
    if port is not None:
        if not 1 <= port <= 65535:
            raise ConfigurationError(f"--port must be 1-65535 (got {port})")
        update["serve_port"] = port
    settings = settings.model_copy(update=update)
    check_exposure(settings)
    config = uvicorn.Config(
        create_app(settings),
        host=settings.serve_host,
        port=settings.serve_port,
        lifespan="on",
        access_log=True,
        log_config=log_config(),
        server_header=False,
    )
    server = _server_class()(config)
    server.run()
    if not server.started:
        raise ConfigurationError(
            f"the HTTP API did not start on {settings.serve_host}:{settings.serve_port} "
            "(see the log above)"
        )
    return 0


def _dump(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Write the OpenAPI document and the event schema (the committed copies under docs/)."""
    parser = argparse.ArgumentParser(prog="python -m memsync.http", description=main.__doc__)
    parser.add_argument("--dump-openapi", type=Path, metavar="FILE")
    parser.add_argument("--dump-event-schema", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    if args.dump_openapi is None and args.dump_event_schema is None:
        parser.error("nothing to do: give --dump-openapi and/or --dump-event-schema")
    if args.dump_openapi is not None:
        _dump(args.dump_openapi, openapi_document())
    if args.dump_event_schema is not None:
        _dump(args.dump_event_schema, event_schema())
    return 0


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document; independent of settings (a token only changes who may call)."""
    return create_app(Settings(api_token=None)).openapi()


if __name__ == "__main__":
    raise SystemExit(main())
