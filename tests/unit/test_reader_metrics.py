"""A reader's metrics: calls counted by outcome, their times in cumulative buckets, and the
vector cache's use, as a Prometheus scrape shows them (no services)."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import ValidationError

from memsync.metrics import ReaderCollector
from memsync.readstats import BUCKETS, ReadStats
from pipeline.graph.vectorcache import VectorCache
from schemas.recall import RecallQuery


def _scrape(stats: ReadStats, vectors: VectorCache | None) -> list[str]:
    registry = CollectorRegistry()
    registry.register(ReaderCollector(stats, vectors))
    return generate_latest(registry).decode().splitlines()


def test_a_call_that_raises_is_counted_as_invalid_or_an_error_and_still_raises() -> None:
    stats = ReadStats()
    with stats.timed("recall"):
        pass
    with pytest.raises(ValidationError, match="agent_id"), stats.timed("recall"):
        RecallQuery.model_validate({"query": "seat"})
    with pytest.raises(RuntimeError, match="graph"), stats.timed("recall"):
        raise RuntimeError("graph away")
    figures = stats.snapshot()["recall"]
    assert figures.outcomes == {"ok": 1, "invalid": 1, "error": 1}
    assert sum(figures.counts) == 3


def test_times_fall_in_their_buckets_and_the_scrape_is_cumulative() -> None:
    stats = ReadStats()
    for seconds in (0.004, 0.03, 0.03, 0.2, 60.0):
        stats.record("build_context", seconds, "ok")
    lines = _scrape(stats, VectorCache(8 << 20))
    assert 'memsync_reader_calls_total{call="build_context",outcome="ok"} 5.0' in lines
    assert 'memsync_reader_calls_total{call="build_context",outcome="invalid"} 0.0' in lines
    assert 'memsync_reader_calls_total{call="build_context",outcome="error"} 0.0' in lines
    assert 'memsync_reader_call_seconds_bucket{call="build_context",le="0.005"} 1.0' in lines
    assert 'memsync_reader_call_seconds_bucket{call="build_context",le="0.025"} 1.0' in lines
    assert 'memsync_reader_call_seconds_bucket{call="build_context",le="0.05"} 3.0' in lines
    assert 'memsync_reader_call_seconds_bucket{call="build_context",le="0.25"} 4.0' in lines
    assert (
        f'memsync_reader_call_seconds_bucket{{call="build_context",le="{BUCKETS[-1]}"}} 4.0'
        in lines
    )
    assert 'memsync_reader_call_seconds_bucket{call="build_context",le="+Inf"} 5.0' in lines
    assert 'memsync_reader_call_seconds_count{call="build_context"} 5.0' in lines
    (total,) = [x for x in lines if x.startswith('memsync_reader_call_seconds_sum{call="build_')]
    assert float(total.split()[-1]) == pytest.approx(60.264)
    assert "memsync_reader_vector_cache_limit_bytes 8.388608e+06" in lines
    assert "memsync_reader_vector_cache_bytes 0.0" in lines
    assert "memsync_reader_vector_cache_scopes 0.0" in lines


def test_calls_from_many_threads_are_all_counted() -> None:
    stats = ReadStats()

    def calls() -> None:
        for _ in range(500):
            with stats.timed("recall"):
                pass

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stats.snapshot()["recall"].outcomes["ok"] == 2000
    assert not any(line.startswith("memsync_reader_vector_cache") for line in _scrape(stats, None))
