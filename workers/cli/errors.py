"""How the `memsync` CLI turns any failure into one line on stderr and a documented exit code.

Exit codes (also in `memsync --help`):
  0  success
  1  the operation failed or was not complete (not found, dead-lettered, untrusted agents left
     out, not finished in time, an unexpected error)
  2  bad usage, input or settings (a missing file, an invalid id, a bad MEMSYNC_* value,
     credentials refused)
  3  a service is unreachable (Redis or Neo4j down, busy loading, or timing out)
  130 interrupted (Ctrl-C)
"""

from __future__ import annotations

import re
import subprocess
from urllib.parse import urlsplit, urlunsplit

import kombu.exceptions
import neo4j.exceptions
import redis
from pydantic import ValidationError

from memsync.settings import Settings
from pipeline.errors import (
    BrokerUnavailable,
    DeadLetterUnavailable,
    GraphUnavailable,
    MemsyncError,
    PermanentError,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

EXIT_CODES = """exit codes:
  0    success
  1    the operation failed or is incomplete (not found, dead-lettered, agents left out as
       untrusted, not finished in time, an unexpected error)
  2    bad usage, input or settings (missing file, invalid id, bad MEMSYNC_* value, credentials)
  3    a service is unreachable (Redis or Neo4j down, loading, or timing out)
  130  interrupted"""

# Values of these settings are never echoed back: they may hold credentials.
_SECRET_HINTS = ("password", "api_key", "url", "uri")
_MAX_REASON = 160


def redact_url(url: str) -> str:
    """The URL without its password, fit to print."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        netloc = f"{user}:***@{host}{port}" if user else f":***@{host}{port}"
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "(unparsable URL)"


def settings_problem(exc: ValidationError) -> str:
    """One line naming every MEMSYNC_* variable whose value Settings refused."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "?"
        name = f"MEMSYNC_{field.upper()}"
        value = error.get("input")
        shown = "" if any(h in field for h in _SECRET_HINTS) else f"={value!r}"
        problems.append(f"{name}{shown}: {error['msg']}")
    return "bad setting " + "; ".join(problems)


def _reason(exc: BaseException) -> str:
    """The root cause in a few words: the OS error if there is one, else the innermost message."""
    seen: set[int] = set()
    current: BaseException | None = exc
    innermost = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        innermost = current
        current = current.__cause__ or current.__context__
    text = re.sub(r"\s+", " ", str(innermost)).strip() or type(innermost).__name__
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."


def _redis_down(settings: Settings | None, exc: BaseException) -> str:
    where = f" at {redact_url(settings.broker_url)}" if settings else ""
    return (
        f"Redis{where} is unreachable ({_reason(exc)}); start it (`memsync services up`) "
        "or point MEMSYNC_BROKER_URL at it"
    )


def _neo4j_down(settings: Settings | None, exc: BaseException) -> str:
    where = f" at {redact_url(settings.neo4j_uri)}" if settings else ""
    return (
        f"Neo4j{where} is unreachable ({_reason(exc)}); start it (`memsync services up`) "
        "or point MEMSYNC_NEO4J_URI at it"
    )


def describe(exc: BaseException, settings: Settings | None) -> tuple[int, str]:
    """The exit code and the one line (without the `memsync: ` prefix) for a failure."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(exc, ValidationError):
        return EXIT_USAGE, settings_problem(exc)
    if isinstance(exc, redis.AuthenticationError):
        return EXIT_USAGE, (
            f"Redis refused the credentials in MEMSYNC_BROKER_URL ({_reason(exc)}); fix them"
        )
    if isinstance(
        exc,
        BrokerUnavailable
        | DeadLetterUnavailable
        | redis.ConnectionError
        | redis.TimeoutError
        | kombu.exceptions.OperationalError,
    ):
        return EXIT_UNREACHABLE, _redis_down(settings, exc)
    if isinstance(exc, redis.ResponseError) and "NOAUTH" in str(exc):
        return EXIT_USAGE, "Redis wants a password: put it in MEMSYNC_BROKER_URL"
    if isinstance(exc, neo4j.exceptions.AuthError):
        user = settings.neo4j_user if settings else "neo4j"
        return EXIT_USAGE, (
            f"Neo4j refused user {user!r}; check MEMSYNC_NEO4J_USER and MEMSYNC_NEO4J_PASSWORD"
        )
    if isinstance(
        exc,
        GraphUnavailable | neo4j.exceptions.ServiceUnavailable | neo4j.exceptions.SessionExpired,
    ):
        return EXIT_UNREACHABLE, _neo4j_down(settings, exc)
    if isinstance(exc, neo4j.exceptions.ConfigurationError):
        return EXIT_USAGE, f"bad Neo4j setting ({_reason(exc)}); check MEMSYNC_NEO4J_URI"
    if isinstance(exc, neo4j.exceptions.ClientError) and "Database" in (exc.code or ""):
        return EXIT_USAGE, f"{_reason(exc)}; check MEMSYNC_NEO4J_DATABASE"
    if isinstance(exc, PermanentError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, MemsyncError):
        return EXIT_FAILED, str(exc)
    if isinstance(exc, FileNotFoundError | IsADirectoryError | PermissionError):
        return EXIT_USAGE, f"{exc.filename}: {exc.strerror}"
    if isinstance(exc, subprocess.CalledProcessError):
        command = exc.cmd[0] if isinstance(exc.cmd, list | tuple) else exc.cmd
        return EXIT_FAILED, f"{command} exited with {exc.returncode}"
    return EXIT_FAILED, (
        f"unexpected {type(exc).__name__}: {_reason(exc)} (rerun with --debug for the traceback)"
    )
