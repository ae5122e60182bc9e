"""Load for fault tests: several hundred real group-chat turns, and what the graph must hold."""

from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pipeline.graph.reader import tenant_counts, tenant_observed
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import plan_batch
from pipeline.ingest import ingest_turns
from pipeline.trust import ChannelTrustPolicy
from pipeline.validate import validate_event
from tests.datasets import friends_raw_events
from workers.state.ledger import Ledger, TurnStatus

AGENTS = [
    {"id": "a-scribe", "kind": "agent", "display_name": "Scribe", "handle": "scribe"},
    {"id": "a-coach", "kind": "agent", "display_name": "Coach", "handle": "coach"},
]


def load_turns(tenant: str, count: int, messages_per_turn: int = 8) -> list[dict[str, Any]]:
    """`count` FriendsQA scenes as turns in their own channels, each with two silent agents."""
    scenes = friends_raw_events()
    turns = []
    for i in range(count):
        turn = copy.deepcopy(scenes[i % len(scenes)])
        turn["tenant"] = tenant
        turn["event_id"] = f"ev-{i:04d}"
        turn["channel"] = {"id": f"ch-{i:04d}", "kind": "group", "title": turn["channel"]["id"]}
        turn["messages"] = turn["messages"][:messages_per_turn]
        speakers = {m["sender_id"] for m in turn["messages"]}
        turn["participants"] = [p for p in turn["participants"] if p["id"] in speakers] + AGENTS
        turns.append(turn)
    return turns


def expected_observed(turns: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(agent key, episode key) pairs the pipeline must write, computed by the pure stages."""
    events = [validate_event(t) for t in turns]
    jobs = ingest_turns(events, {}, ChannelTrustPolicy("strict")).jobs
    return {(row["agent_key"], row["episode_key"]) for row in plan_batch(jobs).observed}


@dataclass(frozen=True)
class Audit:
    """How the graph compares with what must be there."""

    expected: int
    lost: int
    duplicated: int
    unexpected: int
    episodes: int
    said: int

    @property
    def exact(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.unexpected == 0


def audit(graph: GraphStore, tenant: str, expected: set[tuple[str, str]]) -> Audit:
    edges = tenant_observed(graph, tenant)
    seen = Counter(edges)
    counts = tenant_counts(graph, tenant)
    return Audit(
        expected=len(expected),
        lost=len(expected - seen.keys()),
        duplicated=sum(n - 1 for n in seen.values()),
        unexpected=len(seen.keys() - expected),
        episodes=counts["episodes"],
        said=counts["said"],
    )


def wait_until(
    ledger: Ledger, turns: list[dict[str, Any]], timeout: float, *, complete: bool = True
) -> tuple[list[TurnStatus], float]:
    """Poll the ledger until every turn is complete (or finished); returns statuses and seconds."""
    keys = [(t["tenant"], t["event_id"]) for t in turns]
    start = time.monotonic()
    while True:
        statuses = ledger.statuses(keys)
        done = all(s.complete if complete else s.finished for s in statuses)
        if done or time.monotonic() - start > timeout:
            return statuses, time.monotonic() - start
        time.sleep(0.25)
