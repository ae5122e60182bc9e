"""Running the API: the loopback rule, uvicorn's logging and server, `serve`, and the
`python -m memsync.http` command that writes the committed documents."""

from __future__ import annotations

import argparse
import ipaddress
import signal
from collections.abc import Sequence
from copy import deepcopy
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

from memsync.http.app import _token, create_app
from memsync.http.docs import _dump, event_schema, openapi_document
from memsync.settings import Settings
from pipeline.errors import ConfigurationError

if TYPE_CHECKING:
    from fastapi import APIRouter

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


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


def serve(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    extra_routers: Sequence[APIRouter] = (),
) -> int:
    """Run the API under uvicorn until stopped (SIGINT/SIGTERM); 0 on a clean stop.

    `extra_routers` go into the app as create_app's do (the inspector, from `memsync serve`).
    """
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
        create_app(settings, extra_routers=extra_routers),
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
