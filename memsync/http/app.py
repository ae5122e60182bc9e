"""The FastAPI app: its resources (producer, memory reader, Redis), the bearer token check,
the routes, the health probes, and every error rendered as a Problem."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Final

import redis
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from memsync.http.docs import _openapi, _turns_body, _version, event_schema
from memsync.http.wire import (
    Accepted,
    ApiError,
    ContextAnswer,
    ContextRequest,
    FieldProblem,
    Health,
    Problem,
    _field_problem,
    _read_body,
    parse_turns,
)
from memsync.metrics import register_producer, register_reader
from memsync.producer import Producer
from memsync.reading import Memory
from memsync.settings import Settings
from pipeline.errors import (
    BrokerUnavailable,
    BufferFull,
    ConfigurationError,
    GraphUnavailable,
    SpoolFull,
)
from pipeline.graph.store import GraphStore
from schemas.recall import RecallItem, RecallQuery

log = logging.getLogger("memsync.http")

_HEALTH_TIMEOUT: Final = 2.0
_REALM: Final = 'Bearer realm="memsync"'
_GUARDED: Final[dict[int | str, dict[str, Any]]] = {
    401: {"model": Problem, "description": "Missing or wrong bearer token"},
    503: {"model": Problem, "description": "Neo4j or Redis unavailable, or overloaded; retry"},
}


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
        memory = Memory.from_settings(settings)
        try:
            if memory.embedder is not None:
                # The model loads now, not inside the first request that searches by meaning.
                memory.embedder.embed(["ready"])
        except BaseException:
            memory.close()
            broker.close()
            raise
        return cls(Producer(settings), memory, broker)

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


def create_app(settings: Settings, *, extra_routers: Sequence[APIRouter] = ()) -> FastAPI:
    """The API over `settings`; services are reached only once the app's lifespan starts.

    `extra_routers` are included as given (the inspector's pages, which `memsync serve` adds
    from workers/: this package never imports them); they guard their own routes.
    """
    expected = _token(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        resources = await run_in_threadpool(Resources.open, settings)
        app.state.resources = resources
        app.state.metrics = CollectorRegistry()
        register_producer(resources.producer, app.state.metrics)
        register_reader(resources.memory, app.state.metrics)
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
            recent_ids=asked.recent_ids,
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
        "/metrics",
        dependencies=guarded,
        tags=["service"],
        summary="Prometheus metrics: this server's producer (turns emitted, spooled, refused) and "
        "its reads (calls, their times, the vector cache)",
        response_class=PlainTextResponse,
        responses={401: _GUARDED[401]},
    )
    def get_metrics(request: Request) -> PlainTextResponse:
        registry = request.app.state.metrics
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

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

    for router in extra_routers:
        app.include_router(router)
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
