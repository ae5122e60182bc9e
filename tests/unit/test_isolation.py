"""Bisection of failing batches: only culprits fail, retryable errors are never split."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pipeline.errors import GraphUnavailable, PermanentError
from workers.worker.isolation import bisect


def writer(bad: set[int], calls: list[list[int]]) -> Callable[[list[int]], None]:
    def attempt(group: list[int]) -> None:
        calls.append(group)
        if bad & set(group):
            raise PermanentError(f"bad item in {group}")

    return attempt


@pytest.mark.parametrize("bad", [set(), {0}, {49}, {17}, {3, 4, 40}, set(range(50))])
def test_only_culprits_fail_and_every_other_item_is_written_once(bad: set[int]) -> None:
    calls: list[list[int]] = []
    outcome = bisect(list(range(50)), writer(bad, calls))
    assert sorted(item for item, _ in outcome.failed) == sorted(bad)
    written = sorted(item for group in outcome.written for item in group)
    assert written == sorted(set(range(50)) - bad)
    assert outcome.attempts == len(calls)


def test_one_culprit_costs_logarithmic_attempts() -> None:
    calls: list[list[int]] = []
    bisect(list(range(64)), writer({5}, calls))
    assert len(calls) <= 1 + 2 * 6


def test_retryable_errors_are_raised_whole() -> None:
    def attempt(group: list[int]) -> None:
        raise GraphUnavailable("Neo4j away")

    with pytest.raises(GraphUnavailable):
        bisect([1, 2, 3], attempt)


def test_empty_batch_does_nothing() -> None:
    assert bisect([], lambda group: None).attempts == 0
