"""The emit benches' timing of their own full garbage collections (bench/gcpauses.py)."""

from __future__ import annotations

import gc
import time

from bench.gcpauses import Collections, slowest_call


def test_a_full_collection_is_timed_and_a_young_one_is_not() -> None:
    with Collections() as collections:
        gc.collect(0)
        before = time.perf_counter_ns()
        gc.collect()
        after = time.perf_counter_ns()
    assert len(collections.spans) == 1
    start, end = collections.spans[0]
    assert before <= start <= end <= after
    assert collections.within(before, after) == end - start
    assert collections.within(after, after + 1_000_000) == 0
    gc.collect()  # after leaving: no longer watched
    assert len(collections.spans) == 1


def test_the_slowest_call_says_how_much_of_it_was_a_collection() -> None:
    with Collections() as collections:
        quick = time.perf_counter_ns()
        slow = time.perf_counter_ns()
        gc.collect()
        took = time.perf_counter_ns() - slow
    found = slowest_call([quick, slow], [1, took], collections)
    assert found["ms"] == took / 1e6
    assert 0 < found["full_gc_ms"] <= found["ms"]
    assert slowest_call([], [], collections) == {}
