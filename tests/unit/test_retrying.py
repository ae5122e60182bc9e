"""In-task retries for bookkeeping: a retryable error is retried a bounded number of times, a
permanent one never, and a call that succeeds goes through once."""

from __future__ import annotations

import pytest

from pipeline.errors import BrokerUnavailable, InvalidEvent
from workers.worker.retrying import briefly


class Flaky:
    """Fails with `error` the first `failures` calls, then returns how many calls it took."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self, value: str) -> tuple[str, int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return value, self.calls


def test_a_call_that_succeeds_is_made_once() -> None:
    flaky = Flaky(0, BrokerUnavailable("down"))
    assert briefly(flaky, "x") == ("x", 1)


def test_a_retryable_error_is_retried_until_the_call_succeeds() -> None:
    flaky = Flaky(2, BrokerUnavailable("down"))
    assert briefly(flaky, value="y") == ("y", 3)


def test_a_retryable_error_that_persists_is_raised_after_the_last_attempt() -> None:
    flaky = Flaky(100, BrokerUnavailable("down"))
    with pytest.raises(BrokerUnavailable):
        briefly(flaky, "z")
    assert flaky.calls == 4  # the direct call, then three under tenacity


def test_a_permanent_error_is_raised_at_once() -> None:
    flaky = Flaky(100, InvalidEvent("tenant", "missing"))
    with pytest.raises(InvalidEvent):
        briefly(flaky, "z")
    assert flaky.calls == 1
