"""Short, bounded in-task retries for retryable errors the Neo4j driver does not retry itself.

Only reads and Redis bookkeeping go through here: `execute_write` already retries transient
Neo4j errors, and wrapping it again would multiply the waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from pipeline.errors import RetryableError

P = ParamSpec("P")
T = TypeVar("T")


def briefly(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call fn; on a RetryableError, call it up to 3 more times within about 5 seconds, then
    re-raise. The first call is made directly: building tenacity's loop costs about 0.1-0.25 ms,
    paid by every batch several times over for bookkeeping that almost never fails."""
    try:
        return fn(*args, **kwargs)
    except RetryableError:
        pass
    retrying = retry(
        retry=retry_if_exception_type(RetryableError),
        stop=stop_after_attempt(3) | stop_after_delay(5),
        wait=wait_exponential_jitter(multiplier=0.2, max=2.0, jitter=0.2),
        reraise=True,
    )
    return retrying(fn)(*args, **kwargs)
