"""End to end on real services: emit -> Redis -> celery worker -> Neo4j, and the exact graph."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from memsync.producer import Producer
from memsync.settings import INGEST_QUEUE, Settings
from pipeline.errors import InvalidEvent
from pipeline.graph.directory import grant_trust
from pipeline.graph.reader import recall, tenant_counts, tenant_episodes
from pipeline.graph.store import GraphStore
from tests.integration.report import send_task
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.deadletter import DeadLetterStore
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

DEVON = {"id": "u-devon", "kind": "human", "display_name": "Devon", "handle": "devon"}
SARAH = {"id": "u-sarah", "kind": "human", "display_name": "Sarah", "handle": "sarah"}
PRIYA = {"id": "u-priya", "kind": "human", "display_name": "Priya", "handle": "priya"}
TRAVEL = {
    "id": "a-travel",
    "kind": "agent",
    "display_name": "Travel Agent",
    "handle": "travel",
    "owner_id": "u-devon",
}
FINANCE = {"id": "a-finance", "kind": "agent", "display_name": "Finance", "handle": "finance"}
ANON = {"id": "u-anon", "kind": "human", "anonymous": True}


def msg(mid: str, role: str, sender: str, content: str | None, minute: int, **extra: Any) -> Any:
    return {
        "id": mid,
        "role": role,
        "sender_id": sender,
        "content": content,
        "created_at": f"2026-11-29T10:{minute:02d}:00Z",
        **extra,
    }


def event(tenant: str, eid: str, channel: Any, participants: Any, messages: Any) -> Any:
    # Deep copies, so a test that breaks one event cannot break the shared constants.
    return copy.deepcopy(
        {
            "schema_version": 1,
            "event_id": eid,
            "tenant": tenant,
            "channel": channel,
            "participants": participants,
            "messages": messages,
        }
    )


GROUP = {"id": "ch-group", "kind": "group", "title": "Trip planning"}
TOOL_CALL = [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]


def group_turn(tenant: str) -> Any:
    return event(
        tenant,
        "ev-a",
        GROUP,
        [DEVON, SARAH, PRIYA, TRAVEL, FINANCE],
        [
            msg("g1", "system", "a-travel", "You are a travel agent.", 0),
            msg("g2", "user", "u-devon", "I prefer window seats", 1),
            msg("g3", "assistant", "a-travel", None, 2, tool_calls=TOOL_CALL),
            msg("g4", "tool", "a-travel", '{"flights": []}', 3, tool_call_id="c1"),
            msg("g5", "assistant", "a-travel", "Noted, Devon: window seat.", 4),
            msg("g6", "user", "u-sarah", "Aisle for me, please.", 5),
            msg("g7", "user", "u-priya", "Budget is 2000 EUR.", 6),
            msg("g8", "user", "u-sarah", "   ", 7),
        ],
    )


def overlapping_turn(tenant: str) -> Any:
    """The platform resends the last messages; Sarah arrives by id alone."""
    return event(
        tenant,
        "ev-b",
        GROUP,
        [DEVON, {"id": "u-sarah", "kind": "human"}, PRIYA, TRAVEL, FINANCE],
        [
            msg("g6", "user", "u-sarah", "Aisle for me, please.", 5),
            msg("g7", "user", "u-priya", "Budget is 2000 EUR.", 6),
            msg("g9", "user", "u-sarah", "And a vegetarian meal.", 8),
        ],
    )


def public_turn(tenant: str) -> Any:
    return event(
        tenant,
        "ev-c",
        {"id": "ch-lobby", "kind": "public"},
        [ANON, DEVON, TRAVEL],
        [
            msg("p1", "user", "u-anon", "Devon's card is 4111", 9),
            msg("p2", "ai", "a-travel", "No.", 9),
        ],
    )


def dm_turn(tenant: str) -> Any:
    return event(
        tenant,
        "ev-d",
        {"id": "dm-devon", "kind": "dm"},
        [DEVON, TRAVEL],
        [
            msg("d1", "user", "u-devon", "My passport expires in March", 10),
            msg("d2", "assistant", "a-travel", "I will keep that in mind.", 11),
        ],
    )


def grant_group_trust(graph: GraphStore, tenant: str) -> None:
    """Strict mode: Devon (the Travel Agent's owner) vouches for his group; Finance, which has
    no owner, trusts each human itself."""
    for person in ("u-sarah", "u-priya"):
        grant_trust(graph, tenant, "u-devon", person, "team")
    for person in ("u-devon", "u-sarah", "u-priya"):
        grant_trust(graph, tenant, "a-finance", person, "connected")


def emit_and_wait(producer: Producer, ledger: Ledger, events: list[Any]) -> None:
    for e in events:
        producer.emit(e)
    assert producer.flush(timeout=30)
    statuses = ledger.wait([(e["tenant"], e["event_id"]) for e in events], timeout=90)
    assert all(s.finished for s in statuses), statuses
    assert all(s.state == "accepted" for s in statuses), statuses


def emit_all(settings: Settings, ledger: Ledger, events: list[Any]) -> None:
    """emit_and_wait through a producer of its own, closed afterwards."""
    producer = Producer(settings)
    try:
        emit_and_wait(producer, ledger, events)
    finally:
        producer.close(timeout=10)


EXPECTED_EPISODES = {
    # id: (speaker id, speaker label, channel id, observers)
    "g2": ("u-devon", "Devon (@devon)", "ch-group", ["a-finance", "a-travel"]),
    "g5": ("a-travel", "Travel Agent (@travel)", "ch-group", ["a-finance", "a-travel"]),
    "g6": ("u-sarah", "Sarah (@sarah)", "ch-group", ["a-finance", "a-travel"]),
    "g7": ("u-priya", "Priya (@priya)", "ch-group", ["a-finance", "a-travel"]),
    "g9": ("u-sarah", "Sarah (@sarah)", "ch-group", ["a-finance", "a-travel"]),
    "d1": ("u-devon", "Devon (@devon)", "dm-devon", ["a-travel"]),
    "d2": ("a-travel", "Travel Agent (@travel)", "dm-devon", ["a-travel"]),
}


def snapshot(graph: GraphStore, tenant: str) -> dict[str, tuple[str, str, str, list[str]]]:
    result = {}
    for e in tenant_episodes(graph, tenant):
        assert len(e.speakers) == 1 and len(e.channels) == 1, e
        result[e.id] = (e.speakers[0], e.speaker_label, e.channels[0], e.observers)
    return result


def test_group_conversation_builds_the_exact_graph(
    worker: services.Service, graph: GraphStore, producer: Producer, ledger: Ledger, tenant: str
) -> None:
    grant_group_trust(graph, tenant)
    emit_and_wait(producer, ledger, [group_turn(tenant), public_turn(tenant), dm_turn(tenant)])
    # Sent after the first turn is in the graph, so Sarah's name must come from the graph.
    emit_and_wait(producer, ledger, [overlapping_turn(tenant)])

    assert snapshot(graph, tenant) == EXPECTED_EPISODES
    counts = tenant_counts(graph, tenant)
    assert counts == {
        "participants": 5,  # the anonymous human only ever spoke in an untrusted channel
        "agents": 2,
        "channels": 2,
        "episodes": 7,
        "said": 7,
        "in_channel": 7,
        "observed": 12,  # 5 group episodes x 2 agents + 2 DM episodes x 1 agent
    }
    public = ledger.statuses([(tenant, "ev-c")])[0]
    assert (public.state, public.expected, public.synced) == ("accepted", 0, 0)

    # Replaying everything (and the overlapping window again) changes no count.
    emit_and_wait(
        producer,
        ledger,
        [group_turn(tenant), overlapping_turn(tenant), public_turn(tenant), dm_turn(tenant)],
    )
    assert tenant_counts(graph, tenant) == counts
    assert snapshot(graph, tenant) == EXPECTED_EPISODES


def test_emit_rejects_bad_events_naming_the_field(producer: Producer, tenant: str) -> None:
    bad = group_turn(tenant)
    bad["messages"][1]["sender_id"] = "u-nobody"
    with pytest.raises(InvalidEvent) as info:
        producer.emit(bad)
    assert info.value.field == "messages.1.sender_id"
    assert "u-nobody" in str(info.value)

    bad = group_turn(tenant)
    bad["messages"][0]["role"] = "wizard"
    with pytest.raises(InvalidEvent) as info:
        producer.emit(bad)
    assert info.value.field == "messages.0.role"


def test_poison_on_the_queue_does_not_stop_the_worker(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    producer: Producer,
    ledger: Ledger,
    tenant: str,
) -> None:
    bad = group_turn(tenant)
    bad["event_id"] = "ev-bad"
    bad["messages"][1]["sender_id"] = "u-nobody"
    send_task(settings.broker_url, "memsync.ingest", [bad])
    send_task(settings.broker_url, "memsync.ingest", {"not": "a list"})
    # Bytes that are not even a Celery message.
    redis.Redis.from_url(settings.broker_url).lpush(INGEST_QUEUE, b"\x00not json{")

    client = redis.Redis.from_url(settings.broker_url)
    client.lpush(INGEST_QUEUE, b'["a list, not an envelope"]')

    emit_and_wait(producer, ledger, [dm_turn(tenant)])
    letters = DeadLetterStore(client).entries()
    unreadable = {x.payload: x.error for x in letters if x.stage == "decode"}
    assert "not JSON" in unreadable["\x00not json{"]
    assert "not a message envelope" in unreadable['["a list, not an envelope"]']
    not_a_list = [x for x in letters if x.payload == {"not": "a list"}]
    assert len(not_a_list) == 1 and "expected a list of events" in not_a_list[0].error
    invalid = [x for x in letters if x.event_id == "ev-bad" and x.tenant == tenant]
    assert len(invalid) == 1 and invalid[0].permanent
    assert "messages.1.sender_id" in invalid[0].error
    assert invalid[0].payload == [bad]  # exactly as sent
    status = ledger.statuses([(tenant, "ev-bad")])[0]
    assert status.state == "rejected"
    assert status.reason is not None and "messages.1.sender_id" in status.reason
    assert worker.process.poll() is None, worker.log_tail(50)
    assert tenant_counts(graph, tenant)["episodes"] == 2


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = worker_env(settings)
    return subprocess.run(
        [sys.executable, "-m", "workers.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_cli_emit_wait_then_recall(
    worker: services.Service, settings: Settings, graph: GraphStore, tenant: str, tmp_path: Path
) -> None:
    grant_group_trust(graph, tenant)
    path = tmp_path / "turns.jsonl"
    turns = [group_turn(tenant), public_turn(tenant), dm_turn(tenant)]
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))

    done = run_cli(settings, "emit", str(path), "--wait", "--timeout", "90")
    # Everything was written, but the public turn left its agents out: `--wait` says so.
    assert done.returncode == 1, done.stderr
    assert "1 event(s) left 1 agent(s) out as untrusted" in done.stderr
    assert "emitted 3 event(s)" in done.stdout
    # 4 kept group messages for 2 agents + 2 DM messages for 1 agent = 3 agent memories, 10 edges.
    assert "synced 3 agent memories" in done.stdout

    shown = run_cli(settings, "recall", "--agent", "a-finance", "--tenant", tenant, "--json")
    assert shown.returncode == 0, shown.stderr
    remembered = [(e["speaker_label"], e["content"]) for e in json.loads(shown.stdout)]
    assert remembered == [
        ("Devon (@devon)", "I prefer window seats"),
        ("Travel Agent (@travel)", "Noted, Devon: window seat."),
        ("Sarah (@sarah)", "Aisle for me, please."),
        ("Priya (@priya)", "Budget is 2000 EUR."),
    ]
    assert [e.id for e in recall(graph, tenant, "a-travel", channel_id="dm-devon")] == ["d1", "d2"]


def test_cli_emit_refuses_a_bad_file_and_sends_nothing(
    settings: Settings, ledger: Ledger, tenant: str, tmp_path: Path
) -> None:
    good, bad = dm_turn(tenant), group_turn(tenant)
    bad["channel"]["kind"] = "stadium"
    path = tmp_path / "turns.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    done = run_cli(settings, "emit", str(path))
    assert done.returncode == 2
    assert f"{path}:2:" in done.stderr and "channel.kind" in done.stderr
    assert ledger.statuses([(tenant, "ev-d")])[0].state == "pending"


def test_worker_env_carries_settings(settings: Settings) -> None:
    env = worker_env(settings)
    assert env["MEMSYNC_BROKER_URL"] == settings.broker_url
    assert env["MEMSYNC_NEO4J_URI"] == settings.neo4j_uri
    assert "MEMSYNC_NEO4J_PASSWORD" not in env or os.environ.get("MEMSYNC_TEST_NEO4J_PASSWORD")


def test_strict_trust_and_revocation(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    producer: Producer,
    ledger: Ledger,
    tenant: str,
) -> None:
    """Without grants a group is untrusted; a grant lets memory in; a revocation stops it."""
    emit_and_wait(producer, ledger, [group_turn(tenant)])
    assert tenant_counts(graph, tenant)["observed"] == 0  # strict: Sarah and Priya are strangers

    grant_group_trust(graph, tenant)
    granted = run_cli(settings, "trust", "grant", "a-travel", "u-priya", "--tenant", tenant)
    assert granted.returncode == 0, granted.stderr
    listed = run_cli(settings, "trust", "list", "--tenant", tenant, "--json")
    edges = {(e["truster"], e["trustee"], e["as_"]) for e in json.loads(listed.stdout)}
    assert ("u-devon", "u-sarah", "team") in edges and ("a-travel", "u-priya", "connected") in edges
    time.sleep(1.5)  # the workers' trust cache lives 1 s in this suite
    second = group_turn(tenant)
    second["event_id"] = "ev-a2"
    emit_and_wait(producer, ledger, [second])
    assert tenant_counts(graph, tenant)["observed"] == 8  # 4 kept messages x 2 agents

    revoked = run_cli(settings, "trust", "revoke", "a-finance", "u-sarah", "--tenant", tenant)
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    time.sleep(1.5)
    third = overlapping_turn(tenant)
    third["event_id"] = "ev-b2"
    emit_and_wait(producer, ledger, [third])
    observers = {e.id: e.observers for e in tenant_episodes(graph, tenant)}
    assert observers["g9"] == ["a-travel"]  # Finance no longer trusts Sarah: nothing new for it
    assert observers["g2"] == ["a-finance", "a-travel"]  # what it already knew stays
