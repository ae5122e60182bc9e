"""Which Redis errors pass (a blip) and how they surface: as the retryable BrokerUnavailable."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import redis

from pipeline.errors import BrokerUnavailable

P = ParamSpec("P")
T = TypeVar("T")

# BusyLoadingError (Redis replaying its AOF at start) already derives from ConnectionError in
# redis-py; it is listed so the intent survives a change of that hierarchy.
TRANSIENT = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


def redis_errors(fn: Callable[P, T]) -> Callable[P, T]:
    """Redis connection trouble raised by `fn` surfaces as BrokerUnavailable (retryable)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except TRANSIENT as exc:
            raise BrokerUnavailable(f"Redis unavailable: {type(exc).__name__}: {exc}") from exc

    return wrapper
