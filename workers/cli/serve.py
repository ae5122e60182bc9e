"""What `memsync serve` adds to the API app from workers/: the memory inspector's pages, wired
to the dead-letter store and to the Celery app that replay sends with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Request

from memsync.http.app import Resources
from memsync.settings import Settings
from pipeline.graph.store import GraphStore
from workers.inspector.auth import Sessions
from workers.inspector.routes import inspector_router
from workers.worker import runtime

if TYPE_CHECKING:
    from celery import Celery


def _celery() -> Celery:
    # Imported on the first replay: the pages load without the worker's task modules.
    from workers.worker.app import app

    return app


def _graph(request: Request) -> GraphStore:
    resources: Resources = request.app.state.resources
    return resources.memory.graph


def inspector_routers(settings: Settings) -> list[APIRouter]:
    """The inspector's router, behind MEMSYNC_API_TOKEN like the API."""
    token = settings.api_token.get_secret_value() if settings.api_token else None
    return [
        inspector_router(
            Sessions(token or None),
            runtime.deadletters(),
            runtime.redis_client(),
            _celery,
            _graph,
        )
    ]
