"""Command-line ids checked as an event's would be, so nothing odd is ever written or asked."""

from __future__ import annotations

import argparse

from pydantic import TypeAdapter, ValidationError

from schemas.event import Identifier, Tenant

_TENANT: TypeAdapter[str] = TypeAdapter(Tenant)
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)


def checked_ids(args: argparse.Namespace, *fields: str) -> str | None:
    """Validate `tenant` and these id arguments in place; the first problem, naming the
    argument, or None."""
    for field in ("tenant", *fields):
        value = getattr(args, field, None)
        if value is None:
            continue
        adapter = _TENANT if field == "tenant" else _IDENTIFIER
        try:
            setattr(args, field, adapter.validate_python(value))
        except ValidationError as exc:
            return f"{field}: {exc.errors()[0]['msg']} (got {value!r})"
    return None
