"""The worker's OpenTelemetry SDK: spans of each pool process exported over OTLP.

Set up in every pool child after fork (the batch exporter's thread does not survive a fork)
and flushed when the child exits. The exporter reads OpenTelemetry's own variables
(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_SCHEDULE_DELAY, ...).
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

from memsync.settings import Settings

log = logging.getLogger("memsync.worker")

SERVICE_NAME = "memsync-worker"

_provider: Any = None


def install(settings: Settings) -> bool:
    """Export this process's spans when MEMSYNC_TRACING is on; False when off or unavailable."""
    global _provider
    if not settings.tracing:
        return False
    if importlib.util.find_spec("opentelemetry.sdk") is None or (
        importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None
    ):
        log.warning(
            "MEMSYNC_TRACING is on but OpenTelemetry's SDK and OTLP exporter are not installed "
            "(pip install 'memsync[tracing]'): no traces"
        )
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    return True


def shutdown() -> None:
    """Send what is still buffered (a child that exits would drop it)."""
    global _provider
    if _provider is not None:
        _provider.shutdown()
        _provider = None
