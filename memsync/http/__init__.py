"""The HTTP API (`memsync serve`): emit_turn, recall and build_context for platforms not in Python.

JSON only, on loopback unless told otherwise; with MEMSYNC_API_TOKEN set, every /v1 call but
health needs `Authorization: Bearer <token>`. A bad turn is refused with the same field-naming
errors the Python producer raises; a graph or broker outage is a 503 with a one-line reason.

    python -m memsync.http --dump-openapi docs/openapi.json \
        --dump-event-schema docs/event.schema.json
"""

from __future__ import annotations

from memsync.http.app import Resources, create_app
from memsync.http.docs import event_schema, openapi_document
from memsync.http.server import check_exposure, is_loopback, log_config, main, serve
from memsync.http.wire import (
    MAX_BODY_BYTES,
    MAX_BUDGET_TOKENS,
    MAX_TURNS_PER_REQUEST,
    Accepted,
    ApiError,
    ContextAnswer,
    ContextRequest,
    FieldProblem,
    Health,
    Problem,
    parse_turns,
)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_BUDGET_TOKENS",
    "MAX_TURNS_PER_REQUEST",
    "Accepted",
    "ApiError",
    "ContextAnswer",
    "ContextRequest",
    "FieldProblem",
    "Health",
    "Problem",
    "Resources",
    "check_exposure",
    "create_app",
    "event_schema",
    "is_loopback",
    "log_config",
    "main",
    "openapi_document",
    "parse_turns",
    "serve",
]
