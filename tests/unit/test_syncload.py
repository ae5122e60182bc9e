"""The sync-path bench workload (bench/syncload.py) on the tests/data slices: its shape, its
determinism, the tool-call cadence and the agents per channel."""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict

import pytest

from bench.syncload import jsonable, percentile, retenant, workload
from bench.syncpath import ceiling_batches, cpu_budget, table, tree_peaks
from pipeline.graph.writer import plan_batch
from pipeline.ingest import ingest_turns
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from tests.datasets import TESTS_DATA_DIR


def test_shape_and_unique_ids() -> None:
    events = workload(TESTS_DATA_DIR, turns=200, seed=3, tenant="t1")
    assert len(events) == 200
    parsed = [validate_event(e) for e in events]
    assert len({e.event_id for e in parsed}) == 200
    message_ids = [m.id for e in parsed for m in e.messages]
    assert len(message_ids) == len(set(message_ids))
    assert {e.tenant for e in parsed} == {"t1"}
    channels = {e.channel.id for e in parsed}
    assert len(channels) == 10
    assert all(e.channel.kind == "group" for e in parsed)
    times = [m.created_at for e in parsed for m in e.messages]
    assert times == sorted(times) and len(set(times)) == len(times)
    humans_by_channel: dict[str, set[str]] = defaultdict(set)
    for e in parsed:
        kinds = Counter(p.kind for p in e.participants)
        assert kinds == {"human": 2, "agent": 3}
        humans_by_channel[e.channel.id].update(p.id for p in e.participants if p.kind == "human")
        assert e.messages[0].role == "human" and e.messages[0].content
        assert e.messages[-1].role == "ai" and e.messages[-1].content
    # Every channel has its own two people.
    everyone = [h for people in humans_by_channel.values() for h in people]
    assert all(len(people) == 2 for people in humans_by_channel.values())
    assert len(everyone) == len(set(everyone)) == 20


def test_same_seed_same_turns_other_seed_other_text() -> None:
    first = workload(TESTS_DATA_DIR, turns=60, seed=11)
    assert first == workload(TESTS_DATA_DIR, turns=60, seed=11)
    other = workload(TESTS_DATA_DIR, turns=60, seed=12)
    assert [e["messages"] for e in first] != [e["messages"] for e in other]


def test_every_fourth_turn_carries_a_tool_call_the_filter_drops() -> None:
    events = workload(TESTS_DATA_DIR, turns=40, seed=5)
    for index, event in enumerate(events):
        roles = [m["role"] for m in event["messages"]]
        if index % 4 == 3:
            assert roles == ["human", "ai", "tool", "ai"]
            call, result = event["messages"][1], event["messages"][2]
            assert call["tool_calls"] and not call["content"]
            assert result["tool_call_id"] == call["tool_calls"][0]["id"]
        else:
            assert roles == ["human", "ai"]
    outcome = ingest_turns(
        [validate_event(e) for e in events], {}, DirectoryTrustPolicy("open", {})
    )
    reasons = Counter(d.reason for a in outcome.accounts for d in a.dropped)
    assert reasons == {"tool_call_only": 10, "tool_message": 10}
    assert all(a.kept == 2 for a in outcome.accounts)
    assert len(outcome.jobs) == 40 * 3


@pytest.mark.parametrize("agents", [1, 3, 10])
def test_agents_per_channel_come_from_a_shared_pool(agents: int) -> None:
    events = workload(TESTS_DATA_DIR, turns=50, agents=agents, seed=7)
    seated: dict[str, set[str]] = defaultdict(set)
    for event in events:
        ids = [p["id"] for p in event["participants"] if p["kind"] == "agent"]
        assert len(ids) == len(set(ids)) == agents
        seated[event["channel"]["id"]].update(ids)
    assert all(len(ids) == agents for ids in seated.values())
    channels_of: Counter[str] = Counter(a for ids in seated.values() for a in ids)
    assert len(channels_of) == agents + 2  # the default pool
    assert max(channels_of.values()) > 1  # agents are shared between channels


def test_retenant_copies() -> None:
    events = workload(TESTS_DATA_DIR, turns=8, seed=1, tenant="a")
    moved = retenant(events, "b")
    assert {e["tenant"] for e in moved} == {"b"} and {e["tenant"] for e in events} == {"a"}
    assert [e["messages"] for e in moved] == [e["messages"] for e in events]


def test_ceiling_rows_are_the_writers_plan_in_batches() -> None:
    events = [validate_event(e) for e in workload(TESTS_DATA_DIR, turns=40, seed=2)]
    batch = plan_batch(ingest_turns(events, {}, DirectoryTrustPolicy("open", {})).jobs)
    assert len(batch.episodes) == 80 and len(batch.observed) == 240
    with_small_batches = ceiling_batches(batch, rows_per_batch=50)
    sizes = Counter[str]()
    for kind, _, rows in with_small_batches:
        assert 0 < len(rows) <= 50
        sizes[kind] += len(rows)
    assert sizes == {
        "participants": len(batch.participants),
        "agents": len(batch.agents),
        "channels": 10,
        "members": 50,  # 2 humans and 3 agents in each of the 10 channels
        "episodes": 80,
        "observed": 240,
    }
    assert [k for k, _, _ in with_small_batches].count("observed") == 5


def test_report_helpers() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert math.isnan(percentile([], 99))
    assert jsonable({"a": [math.nan, 1.5], "b": {"c": math.inf}}) == {
        "a": [None, 1.5],
        "b": {"c": None},
    }
    mine = tree_peaks(os.getpid())
    assert mine[0]["pid"] == os.getpid() and mine[0]["peak_rss_mb"] > 0
    results = [
        {"phase": "ceiling", "kind": "ceiling", "turns_per_s": 1000.0, "peak_rss_mb": 50.0},
        {"phase": "inline", "kind": "inline", "turns_per_s": 100.0, "peak_rss_mb": 50.0,
         "call_ms": {"p50": 7.0, "p99": 20.0}},
    ]  # fmt: skip
    text = table(results)
    assert "10.0%" in text and "1.00x" in text and "10.00x" in text


def test_cpu_budget_leaves_out_start_up_and_sets_the_rest_against_half_the_ceiling() -> None:
    results = [
        {"kind": "ceiling", "turns": 1000, "turns_per_s": 2000.0, "bench_cpu_s": 0.5},
        {"phase": "pipeline P=2", "kind": "pipeline", "complete": 1000,
         "workers_cpu_s": 3.5, "workers_startup_cpu_s": 2.0, "redis_cpu_s": 0.1,
         "bench_cpu_s": 0.2, "neo4j_cpu_s": {"total": 0.7}},
    ]  # fmt: skip
    (text,) = cpu_budget(results, cores=2)
    # 1.5 s of work over 1,000 turns; half the ceiling is 1,000 turns/s, 2 ms of 2 cores a turn.
    assert "workers 1.50 (start-up 2.0 s left out)" in text and "total 2.50" in text
    assert "(1000 turns/s) 2 cores give 2.00 ms a turn" in text
    assert "workers would have 1.00 ms" in text and "Python took 0.50 ms a turn" in text
    assert cpu_budget(results[1:], cores=2)[0].count("\n") == 0  # no ceiling: no budget
