"""The published documents: the turn event's JSON Schema and the OpenAPI document (FastAPI's,
plus the turn event's schemas, since the turns body is read raw), and writing them to files."""

from __future__ import annotations

import json
from copy import deepcopy
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema

from memsync.http.wire import MAX_TURNS_PER_REQUEST
from memsync.settings import Settings
from schemas.event import TurnEvent

_JSON: Final = "application/json"


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


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document; independent of settings (a token only changes who may call)."""
    # Imported here: the app imports this module for its document and version.
    from memsync.http.app import create_app

    return create_app(Settings(api_token=None)).openapi()


def _dump(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
