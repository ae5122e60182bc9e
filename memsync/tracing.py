"""Optional OpenTelemetry traces across the broker: a batch's publish, its ingest task and
stages, its sync task and the graph write, one trace.

Only OpenTelemetry's API is used here, as a library should: spans go to whatever tracer provider
the process set up (the platform's own; memsync's worker sets one up itself, see
workers/worker/telemetry.py). The W3C trace context travels in the task message's headers.
Off (MEMSYNC_TRACING unset) or without the `tracing` extra installed, every call is a no-op.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

# The W3C trace-context header names, as message headers.
CONTEXT_HEADERS: Final = ("traceparent", "tracestate")
TRACER_NAME: Final = "memsync"


def available() -> bool:
    """Whether OpenTelemetry's API is installed (`pip install 'memsync[tracing]'`)."""
    return importlib.util.find_spec("opentelemetry") is not None


class Tracing:
    """Spans and context propagation, or nothing at all when `enabled` is false."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and available()

    @contextmanager
    def span(
        self,
        name: str,
        *,
        carrier: Mapping[str, Any] | None = None,
        kind: str = "INTERNAL",
        attributes: Mapping[str, str | int] | None = None,
    ) -> Iterator[None]:
        """A span around the block: a child of the context in `carrier` (message headers)
        when given, else of the current span."""
        if not self.enabled:
            yield
            return
        from opentelemetry import propagate, trace

        parent = None
        if carrier is not None:
            found = {k: v for k in CONTEXT_HEADERS if isinstance(v := carrier.get(k), str)}
            parent = propagate.extract(found) if found else None
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            name,
            context=parent,
            kind=getattr(trace.SpanKind, kind),
            attributes=dict(attributes or {}),
        ):
            yield

    def headers(self) -> dict[str, str]:
        """The current span's context as message headers (empty when off or outside a span)."""
        if not self.enabled:
            return {}
        from opentelemetry import propagate

        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier
