"""The worker's bounded TTL cache, and the runtime caches built on it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from memsync.settings import Settings
from schemas.records import KnownParticipant, TrustEntry
from workers.worker import runtime
from workers.worker.cache import TTLCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_value_is_readable_until_its_ttl_then_dropped_on_read() -> None:
    clock = Clock()
    cache: TTLCache[str, int] = TTLCache(10, 5.0, clock)
    cache.put("a", 1)
    clock.now += 4.9
    assert cache.get("a") == 1
    clock.now += 0.1
    assert cache.get("a") is None
    assert len(cache) == 0  # the expired entry was removed, not just hidden


def test_zero_ttl_caches_nothing() -> None:
    cache: TTLCache[str, int] = TTLCache(10, 0.0, Clock())
    cache.put("a", 1)
    assert cache.get("a") is None


def test_full_cache_evicts_the_least_recently_used() -> None:
    cache: TTLCache[str, int] = TTLCache(3, 60.0, Clock())
    for i, key in enumerate("abc"):
        cache.put(key, i)
    assert cache.get("a") == 0  # "a" is now the most recently used; "b" the least
    cache.put("d", 3)
    assert len(cache) == 3
    assert cache.get_many({"a", "b", "c", "d"}) == {"a": 0, "c": 2, "d": 3}


def test_many_distinct_keys_never_grow_past_the_bound() -> None:
    cache: TTLCache[int, int] = TTLCache(100, 60.0, Clock())
    for i in range(10_000):
        cache.put(i, i)
    assert len(cache) == 100
    assert cache.get_many(range(9_900, 10_000)) == {i: i for i in range(9_900, 10_000)}


def test_put_refreshes_the_age_of_an_entry() -> None:
    clock = Clock()
    cache: TTLCache[str, int] = TTLCache(10, 5.0, clock)
    cache.put("a", 1)
    clock.now += 4
    cache.put("a", 2)
    clock.now += 4
    assert cache.get("a") == 2


def test_configure_shrinks_to_the_new_bound_and_new_ttl() -> None:
    clock = Clock()
    cache: TTLCache[str, int] = TTLCache(10, 60.0, clock)
    for i, key in enumerate("abcde"):
        cache.put(key, i)
    cache.configure(2, 1.0)
    assert len(cache) == 2
    assert cache.get_many("abcde") == {"d": 3, "e": 4}
    clock.now += 1
    assert "e" not in cache


def test_invalid_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        TTLCache(0, 1.0)
    with pytest.raises(ValueError):
        TTLCache(1, -1.0)
    with pytest.raises(ValueError):
        TTLCache(1, 1.0).configure(0, 1.0)


def test_concurrent_use_keeps_the_bound() -> None:
    cache: TTLCache[int, int] = TTLCache(50, 60.0)
    errors: list[BaseException] = []

    def hammer(offset: int) -> None:
        try:
            for i in range(2000):
                cache.put(offset + i, i)
                cache.get_many({offset + i - 1, offset + i - 60})
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n * 100_000,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) == 50


@pytest.fixture()
def small_runtime(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The runtime configured with tiny caches, the graph look-ups replaced by counters."""
    calls: list[set[str]] = []

    def names(_graph: object, keys: set[str]) -> dict[str, KnownParticipant]:
        calls.append(set(keys))
        return {k: KnownParticipant(id=k, display_name=k) for k in keys}

    def trust(_graph: object, keys: set[str]) -> dict[str, TrustEntry]:
        calls.append(set(keys))
        return {k: TrustEntry(key=k, trusted=frozenset()) for k in keys}

    monkeypatch.setattr(runtime, "lookup_participants", names)
    monkeypatch.setattr(runtime, "lookup_trust", trust)
    monkeypatch.setattr(runtime, "graph", lambda: None)
    runtime.configure(Settings(names_cache_size=3, trust_cache_size=2))
    yield calls
    runtime.reset()


def test_runtime_name_cache_is_bounded_by_settings(small_runtime: list[set[str]]) -> None:
    runtime.known_names({f"p{i}" for i in range(10)})
    assert len(runtime._names) == 3
    small_runtime.clear()
    runtime.known_names({"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"})
    # At most three of the ten were still cached; the rest were looked up again.
    assert len(small_runtime[0]) >= 7


def test_runtime_trust_cache_is_bounded_and_reset_clears_it(
    small_runtime: list[set[str]],
) -> None:
    found = runtime.trust_entries({"a", "b", "c", "d"})
    assert set(found) == {"a", "b", "c", "d"}
    assert len(runtime._trust) == 2
    runtime.reset()
    assert len(runtime._trust) == 0 and len(runtime._names) == 0
