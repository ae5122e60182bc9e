"""The reader's vector cache on its own (no services): nearest neighbours by channel or label
(exact but for int8's rounding), catching up through the `embedded_at` watermark (out-of-order
commits inside the margin too), a change of model, the byte budget and its eviction order, both
groups caught up in one read, and whole reads and margin re-reads in the background."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from pipeline.graph import vectorcache
from pipeline.graph.cypher import vectors as cypher
from pipeline.graph.vectorcache import Group, VectorCache

DIMS = 8


class Table:
    """What Neo4j would return: every row on a full read, rows stamped since `from_ms` else."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.reads: list[dict[str, Any]] = []
        self.counts: list[dict[str, Any]] = []
        self.now = 0  # Neo4j's clock (ms), as the count reports it

    def put(self, key: str, vector: list[float], channel: str, at: int) -> None:
        self.records[key] = {"key": key, "embedding": vector, "channel_key": channel, "at": at}

    def rows(self, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        since = params.get("from_ms")
        found = [r for r in self.records.values() if since is None or r["at"] >= since]
        if statement in cypher.COUNTS.values():
            self.counts.append(params)
            return [{"stamped": len(found), "now": self.now}]
        self.reads.append(params)
        return found


def _vector(seed: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).normal(size=DIMS)]


def _ask(
    cache: VectorCache, table: Table, vector: list[float], wanted: dict[str | None, int]
) -> dict[str | None, list[tuple[str, float]]] | None:
    return _ask_as(cache, table, "t|a", vector, wanted)


def _ask_as(
    cache: VectorCache,
    table: Table,
    agent: str,
    vector: list[float],
    wanted: dict[str | None, int],
) -> dict[str | None, list[tuple[str, float]]] | None:
    if not cache.refresh(table.rows, "episode", tenant="t", agent_key=agent, dimensions=DIMS):
        return None
    return cache.nearest("episode", tenant="t", agent_key=agent, vector=vector, wanted=wanted)


def _brute(table: Table, query: list[float], channel: str | None) -> list[tuple[str, float]]:
    q = np.asarray(query) / np.linalg.norm(query)
    scored = [
        (
            r["key"],
            (1 + float(np.dot(q, np.asarray(r["embedding"]) / np.linalg.norm(r["embedding"])))) / 2,
        )
        for r in table.records.values()
        if channel is None or r["channel_key"] == channel
    ]
    return sorted(scored, key=lambda kv: -kv[1])


# A row held: DIMS int8 components, its scale, channel tag and stamp.
ROW_BYTES = DIMS + 4 + 4 + 8
# How far int8 rows and query may move a score ((1 + cosine) / 2) in DIMS dimensions.
TOLERANCE = 2e-3


def _agrees(found: list[tuple[str, float]], ranking: list[tuple[str, float]]) -> None:
    """`found` is the exact `ranking`'s best, in order, but for near ties: each rank's key
    scores exactly at least what that rank's exact key does, less two roundings, and its score
    is its exact score give or take one."""
    exact = dict(ranking)
    for (key, score), (_, best) in zip(found, ranking, strict=False):
        assert exact[key] >= best - 2 * TOLERANCE
        assert score == pytest.approx(exact[key], abs=TOLERANCE)


def test_nearest_is_exact_and_held_to_the_channel() -> None:
    table = Table()
    for i in range(200):
        table.put(f"k{i}", _vector(i), f"ch{i % 3}", at=1000 + i)
    cache = VectorCache(1 << 20)
    query = _vector(999)
    found = _ask(cache, table, query, {None: 10, "ch1": 5, "nowhere": 5})
    assert found is not None
    for tag, k in ((None, 10), ("ch1", 5)):
        assert len(found[tag]) == k
        _agrees(found[tag], _brute(table, query, tag))
    assert found["nowhere"] == []
    assert all(key in {f"k{i}" for i in range(1, 200, 3)} for key, _ in found["ch1"])


def test_a_large_scope_is_searched_in_two_halves_with_the_same_answer() -> None:
    table = Table()
    for i in range(201):
        table.put(f"k{i}", _vector(i), f"ch{i % 3}", at=1000 + i)
    query = _vector(999)
    whole = _ask(VectorCache(1 << 20), table, query, {None: 201})
    split = VectorCache(1 << 20, split_elements=201 * DIMS - 1)
    halves = _ask(split, table, query, {None: 201})
    assert halves is not None and whole is not None
    _agrees(halves[None], _brute(table, query, None))
    assert halves[None] == whole[None]
    assert any(t.name.startswith("memsync-product") for t in threading.enumerate())


def test_catches_up_on_what_was_embedded_since(monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table()
    table.put("old", _vector(1), "ch", at=10_000)
    cache = VectorCache(1 << 20)
    query = _vector(2)
    assert _keys(_ask(cache, table, query, {None: 5})) == ["old"]
    # A new message and a re-embedded one.
    table.put("new", query, "ch", at=20_000)
    table.put("old", [-x for x in query], "ch", at=20_001)
    found = _ask(cache, table, query, {None: 5})
    assert found is not None
    assert _keys(found) == ["new", "old"]
    assert found[None][0][1] == pytest.approx(1.0, abs=TOLERANCE)
    assert found[None][-1][1] == pytest.approx(0.0, abs=TOLERANCE)
    assert table.reads[0].get("from_ms") is None  # the first read is whole
    assert table.reads[1]["from_ms"] == 10_001  # then only what is newer
    # A transaction that stamped before the newest vector seen but committed after it: found
    # on the next margin re-read, RECHECK_SECONDS on.
    table.put("late", _vector(3), "ch", at=20_001 - vectorcache.MARGIN_MS // 2)
    assert "late" not in _keys(_ask(cache, table, query, {None: 5}))
    clock = time.monotonic() + vectorcache.RECHECK_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: clock)
    assert "late" in _keys(_ask(cache, table, query, {None: 5}))
    assert table.reads[-1]["from_ms"] == 20_001 - vectorcache.MARGIN_MS


def _keys(found: dict[str | None, list[tuple[str, float]]] | None) -> list[str]:
    assert found is not None
    return [key for key, _ in found[None]]


def test_reloads_whole_after_a_while_and_drops_what_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=1)
    table.put("b", _vector(2), "ch", at=2)
    cache = VectorCache(1 << 20)
    assert len(_keys(_ask(cache, table, _vector(3), {None: 5}))) == 2
    del table.records["b"]
    assert len(_keys(_ask(cache, table, _vector(3), {None: 5}))) == 2
    clock = time.monotonic() + vectorcache.RELOAD_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: clock)
    assert _keys(_ask(cache, table, _vector(3), {None: 5})) == ["a"]


def test_a_scope_slow_to_read_is_reloaded_less_often(monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=1)
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    whole_reads: list[float] = []

    def slow(statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        if statement == cypher.READS["episode"][0]:
            whole_reads.append(clock[0])
            clock[0] += 20.0  # a big scope: its whole read takes 20 s
        return table.rows(statement, params)

    cache = VectorCache(1 << 20)
    assert cache.refresh(slow, "episode", tenant="t", agent_key="t|a", dimensions=DIMS)
    assert len(whole_reads) == 1
    clock[0] += vectorcache.RELOAD_SECONDS + 1  # due for a small scope, not for this one
    assert cache.refresh(slow, "episode", tenant="t", agent_key="t|a", dimensions=DIMS)
    assert len(whole_reads) == 1
    clock[0] += vectorcache.RELOAD_COST_FACTOR * 20.0
    assert cache.refresh(slow, "episode", tenant="t", agent_key="t|a", dimensions=DIMS)
    assert len(whole_reads) == 2


def test_a_change_of_model_is_not_mixed_into_one_matrix() -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=1)
    cache = VectorCache(1 << 20)
    assert _ask(cache, table, _vector(3), {None: 5}) is not None
    table.put("b", [1.0] * (DIMS * 2), "ch", at=5)
    assert _ask(cache, table, _vector(3), {None: 5}) is None
    assert cache.nbytes == 0


def test_budget_refuses_a_scope_too_big_and_evicts_the_least_recent() -> None:
    table = Table()
    for i in range(2000):
        table.put(f"k{i}", _vector(i), "ch", at=i)
    small = VectorCache(1000)
    assert _ask(small, table, _vector(1), {None: 5}) is None
    reads = len(table.reads)
    assert _ask(small, table, _vector(1), {None: 5}) is None
    assert len(table.reads) == reads  # not read again until RELOAD_SECONDS pass

    roomy = VectorCache(int(2000 * ROW_BYTES * 1.5))  # one scope fits, two do not
    for agent in ("t|a", "t|b"):
        assert _ask_as(roomy, table, agent, _vector(1), {None: 3})
    assert roomy.nbytes <= roomy.max_bytes
    assert list(roomy._scopes) == [("episode", "t", "t|b")]


def test_a_whole_read_is_taken_in_pages_and_stops_once_over_the_budget() -> None:
    table = Table()
    for i in range(5 * vectorcache.PAGE_ROWS):
        table.put(f"k{i}", _vector(i % 50), "ch", at=i)
    taken: list[int] = []
    closed: list[bool] = []

    def streamed(statement: str, params: dict[str, Any]) -> Any:
        try:
            for record in table.rows(statement, params):
                taken.append(1)
                yield record
        finally:
            closed.append(True)

    page_bytes = vectorcache.PAGE_ROWS * ROW_BYTES
    cache = VectorCache(int(page_bytes * 1.5))
    assert not cache.refresh(streamed, "episode", tenant="t", agent_key="t|a", dimensions=DIMS)
    # The second page passed the budget: nothing past it was read, and the read was closed.
    assert len(taken) <= 2 * vectorcache.PAGE_ROWS + 1
    assert closed == [True]
    assert cache.nbytes == 0

    roomy = VectorCache(page_bytes * 6)
    assert roomy.refresh(streamed, "episode", tenant="t", agent_key="t|a", dimensions=DIMS)
    # A whole read keeps no room for growth: its size is known once it is in.
    assert roomy.nbytes == 5 * page_bytes


def test_off_reads_nothing() -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=1)
    assert _ask(VectorCache(0), table, _vector(1), {None: 5}) is None
    assert table.reads == []


def test_both_groups_catch_up_in_one_read_each_from_its_own_watermark() -> None:
    episodes, memories = Table(), Table()
    episodes.put("e1", _vector(1), "ch", at=100)
    memories.put("f1", _vector(2), "Fact", at=500)
    reads: list[tuple[str, dict[str, Any]]] = []

    def rows(statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        reads.append((statement, params))
        if statement == cypher.NEW_VECTORS_BOTH:
            found = [
                {**r, "part": part}
                for part, table in (("episode", episodes), ("memory", memories))
                for r in table.rows(statement, {"from_ms": params[f"from_ms_{part}"]})
            ]
            return found
        table = episodes if statement in cypher.READS["episode"] else memories
        return table.rows(statement, params)

    cache = VectorCache(1 << 20)
    both: tuple[Group, ...] = ("episode", "memory")
    fresh = cache.refresh_groups(rows, both, tenant="t", agent_key="t|a", dimensions=DIMS)
    assert fresh == {"episode", "memory"}
    assert len(reads) == 2  # the first reads are whole, one per group
    episodes.put("e2", _vector(3), "ch", at=200)
    memories.put("c1", _vector(4), "Commitment", at=600)
    fresh = cache.refresh_groups(rows, both, tenant="t", agent_key="t|a", dimensions=DIMS)
    assert fresh == {"episode", "memory"}
    assert len(reads) == 3
    statement, params = reads[-1]
    assert statement == cypher.NEW_VECTORS_BOTH
    assert (params["from_ms_episode"], params["from_ms_memory"]) == (101, 501)
    cases: list[tuple[Group, str, int, str]] = [
        ("memory", "Commitment", 4, "c1"),
        ("episode", "ch", 3, "e2"),
    ]
    for group, tag, seed, expected in cases:
        found = cache.nearest(
            group, tenant="t", agent_key="t|a", vector=_vector(seed), wanted={tag: 1}
        )
        assert found is not None
        assert [key for key, _ in found[tag]] == [expected]
        assert found[tag][0][1] == pytest.approx(1.0, abs=TOLERANCE)


def _nearest(cache: VectorCache, vector: list[float], k: int) -> list[str]:
    return _keys(
        cache.nearest("episode", tenant="t", agent_key="t|a", vector=vector, wanted={None: k})
    )


def _fresh(cache: VectorCache, table: Table, load: bool = True) -> set[Group]:
    return cache.refresh_groups(
        table.rows,
        ("episode",),
        tenant="t",
        agent_key="t|a",
        dimensions=DIMS,
        load=table.rows if load else None,
    )


def test_whole_reads_run_in_the_background_and_never_hold_a_recall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=1)
    cache = VectorCache(1 << 20)
    # The first recall is not served by the cache (Neo4j answers it) while its scope loads.
    assert _fresh(cache, table) == set()
    assert cache.wait_for_loads(10)
    assert _fresh(cache, table) == {"episode"}
    table.put("b", _vector(2), "ch", at=2)
    # Due for the periodic reload: served as it is (caught up on what is new) while it reloads.
    del table.records["a"]
    clock = time.monotonic() + vectorcache.RELOAD_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: clock)
    assert _fresh(cache, table) == {"episode"}
    assert cache.wait_for_loads(10)
    assert _nearest(cache, _vector(1), 5) == ["b"]  # "a" left on reload


class _Clock:
    """time.monotonic() held still, moved past the margin check's interval on demand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = time.monotonic()
        monkeypatch.setattr(time, "monotonic", lambda: self.now)

    def recheck(self, cache: VectorCache, table: Table) -> set[Group]:
        """Use the scope once the margin check is due, and wait for that check."""
        self.now += vectorcache.RECHECK_SECONDS + 1
        fresh = _fresh(cache, table)
        assert cache.wait_for_loads(10)
        return fresh


def test_the_margin_is_counted_first_and_read_only_when_neo4j_has_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=10_000)
    cache = VectorCache(1 << 20)
    assert _fresh(cache, table, load=False) == {"episode"}
    reads = len(table.reads)
    clock = _Clock(monkeypatch)
    assert clock.recheck(cache, table) == {"episode"}
    assert len(table.counts) == 1  # counted, and as many as cached: no rows read
    assert table.reads[reads:] == [{"tenant": "t", "agent_key": "t|a", "from_ms": 10_001}]
    # Committed late with an earlier stamp: the count differs, so the margin is read.
    table.put("late", _vector(2), "ch", at=10_000 - vectorcache.MARGIN_MS // 2)
    assert clock.recheck(cache, table) == {"episode"}
    assert len(table.counts) == 2
    assert table.reads[-1]["from_ms"] == 10_000 - vectorcache.MARGIN_MS
    assert _nearest(cache, _vector(2), 1) == ["late"]


def test_an_idle_scope_counts_from_its_last_check_not_its_last_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=10_000)
    cache = VectorCache(1 << 20)
    assert _fresh(cache, table, load=False) == {"episode"}
    table.now = 60_000  # a minute after the last vector was stamped
    clock = _Clock(monkeypatch)
    assert clock.recheck(cache, table) == {"episode"}
    assert table.counts[-1]["from_ms"] == 10_000 - vectorcache.MARGIN_MS
    assert clock.recheck(cache, table) == {"episode"}
    # Everything stamped before the last check's margin was settled by it.
    assert table.counts[-1]["from_ms"] == 60_000 - vectorcache.MARGIN_MS
    # Newer vectors still come in (read past the watermark on use).
    table.put("late", _vector(2), "ch", at=60_000 - vectorcache.MARGIN_MS // 2)
    assert clock.recheck(cache, table) == {"episode"}
    assert _nearest(cache, _vector(2), 1) == ["late"]


def test_whole_reads_take_turns() -> None:
    table = Table()
    table.put("a", _vector(1), "ch", at=1)
    gate = threading.Event()
    entered = threading.Condition()
    running: list[int] = [0, 0]  # now, most at once

    def slow(statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with entered:
            running[0] += 1
            running[1] = max(running)
            entered.notify_all()
        gate.wait(10)
        with entered:
            running[0] -= 1
        return table.rows(statement, params)

    cache = VectorCache(1 << 20)
    agents = [f"t|{n}" for n in range(2 * vectorcache.WHOLE_READS_AT_ONCE)]
    for agent in agents:
        cache.refresh_groups(
            table.rows, ("episode",), tenant="t", agent_key=agent, dimensions=DIMS, load=slow
        )
    with entered:
        assert entered.wait_for(lambda: running[0] == vectorcache.WHOLE_READS_AT_ONCE, 10)
        # The others wait for a turn: none starts while these are held.
        assert not entered.wait_for(lambda: running[0] > vectorcache.WHOLE_READS_AT_ONCE, 0.3)
    gate.set()
    assert cache.wait_for_loads(10)
    assert running[1] == vectorcache.WHOLE_READS_AT_ONCE
    for agent in agents:
        assert cache.refresh(table.rows, "episode", tenant="t", agent_key=agent, dimensions=DIMS)
