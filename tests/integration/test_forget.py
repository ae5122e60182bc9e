"""Forgetting and export on real Redis, Neo4j and a real worker: `memsync forget --participant`
while the worker writes other turns (and the forgotten person's own turns are still in flight),
`--agent`, `--channel`, `memsync export`, and the retention sweep (`memsync graph sweep`)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import neo4j
import pytest

from memsync.producer import Producer
from memsync.reading import Memory
from memsync.settings import Settings
from pipeline.extract import RulesExtractor
from pipeline.graph.directory import grant_trust
from pipeline.graph.erasure import list_erasures
from pipeline.graph.memoryrows import MemoryRows, plan_memory
from pipeline.graph.store import GraphStore
from pipeline.graph.summaries import channel_episodes, current_summary, summary_history
from pipeline.graph.writer import SyncBatch, _write_batch, plan_batch, write_sync_jobs
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.summarize import ExtractiveSummarizer
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.keys import channel_key, participant_key
from tests.integration.test_operations import cli, wait_for
from tests.integration.test_spine import DEVON, PRIYA, SARAH, TRAVEL, emit_and_wait, event, msg
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.ledger import Ledger
from workers.worker.folding import fold_channel

pytestmark = pytest.mark.integration

GROUP = {"id": "ch-trip", "kind": "group", "title": "Trip"}
DM = {"id": "dm-sarah", "kind": "dm"}
HELPER = {
    "id": "a-helper",
    "kind": "agent",
    "display_name": "Helper",
    "handle": "helper",
    "owner_id": "u-devon",
}
# Words only Sarah says: none may survive her erasure anywhere an agent reads.
SARAHS_WORDS = ("(@sarah)", "aisle", "budget report", "green tea", "passport", "slides")


def run(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    done = cli(settings, *args, timeout=120, **env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def fold(graph: GraphStore, tenant: str, agent: str, channel: str) -> None:
    """Fold the pair's summary in-process with a small budget, as the fold task would."""
    fold_channel(
        graph,
        ExtractiveSummarizer(4000),
        tenant=tenant,
        agent_key=participant_key(tenant, agent),
        channel_key=channel_key(tenant, channel),
        fold_tokens=100,
        reanchor_every=8,
    )


def count(graph: GraphStore, query: str, **params: Any) -> int:
    with graph.session(write=False) as session:
        return int(session.run(query, **params).single(strict=True)[0])


def group_turns(tenant: str) -> list[Any]:
    people = [DEVON, SARAH, PRIYA, TRAVEL]
    return [
        event(
            tenant,
            "ev-1",
            GROUP,
            people,
            [
                msg("g0", "user", "u-sarah", "Devon prefers window seats", 0),
                msg("g2", "user", "u-sarah", "I prefer aisle seats", 2),
                msg("g3", "user", "u-sarah", "I'll send the budget report by Friday", 3),
                msg("g4", "user", "u-devon", "Sarah prefers vegetarian meals", 4),
                msg("g5", "user", "u-devon", "I'll send Sarah the itinerary by Monday", 5),
                msg("g6", "user", "u-priya", "I'm allergic to peanuts", 6),
                msg("g7", "user", "u-sarah", "Devon prefers green tea", 7),
            ],
        ),
        event(
            tenant,
            "ev-2",
            GROUP,
            people,
            [
                # Devon restates what she said of him, in a later batch (one batch keeps one
                # row per fact): the fact then rests on his word too.
                msg("g1", "user", "u-devon", "I prefer window seats", 1),
                msg("g8", "user", "u-sarah", "Sent the budget report", 8),
                msg("g9", "user", "u-priya", "The hotel booking code is HB7781Q, agreed.", 9),
                msg("g10", "ai", "a-travel", "Noted: booking HB7781Q for the whole group.", 10),
                msg("g11", "user", "u-devon", "Our flight number is LX318 on the 4th.", 11),
                msg("g12", "user", "u-sarah", "My seat number is 14C, decided.", 12),
                msg("g13", "user", "u-devon", "Sarah, I sent the itinerary.", 12),
            ],
        ),
        event(
            tenant,
            "ev-3",
            DM,
            [SARAH, TRAVEL],
            [
                msg("d1", "user", "u-sarah", "My passport expires in March", 13),
                msg("d2", "user", "u-sarah", "I'll send the visa form code VF-2231 by Monday", 14),
                msg("d3", "ai", "a-travel", "Thanks, reference TR-5521 noted for the visa.", 15),
            ],
        ),
    ]


def others_turn(tenant: str, i: int) -> Any:
    """A turn of the others only (Sarah is not in it): it must be written whole."""
    return event(
        tenant,
        f"ev-bg-{i}",
        GROUP,
        [DEVON, PRIYA, TRAVEL],
        [msg(f"bg-{i}", "user", "u-devon" if i % 2 else "u-priya", f"Checkpoint {i} noted.", 20)],
    )


def sarah_in_flight(tenant: str, i: int) -> Any:
    """A turn of Sarah's emitted while she is being forgotten: nothing of it may stay."""
    return event(
        tenant,
        f"ev-sarah-{i}",
        GROUP,
        [DEVON, SARAH, TRAVEL],
        [msg(f"sf-{i}", "user", "u-sarah", f"I'll send the slides {i} by Thursday", 21)],
    )


def test_forget_participant_while_the_worker_writes(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    producer: Producer,
    ledger: Ledger,
    tenant: str,
) -> None:
    for person in ("u-sarah", "u-priya"):
        grant_trust(graph, tenant, "u-devon", person, "team")
    first, *rest = group_turns(tenant)
    emit_and_wait(producer, ledger, [first])
    emit_and_wait(producer, ledger, rest)
    for channel in (GROUP["id"], DM["id"]):
        fold(graph, tenant, "a-travel", channel)
    before = current_summary(graph, tenant, "a-travel", GROUP["id"])
    assert before is not None and "Sarah (@sarah)" in before.text
    sarah = participant_key(tenant, "u-sarah")

    exported = run(settings, "export", "--participant", "u-sarah", "--tenant", tenant)
    assert exported.returncode == 0, exported.stderr
    data = json.loads(exported.stdout)
    assert data["participant"]["label"] == "Sarah (@sarah)"
    assert [c["id"] for c in data["channels"]] == sorted([GROUP["id"], DM["id"]])
    assert [e["id"] for e in data["episodes"]] == ["g0", "g2", "g3", "g7", "g8", "g12", "d1", "d2"]
    assert {e["text"] for e in data["episodes"]} >= {"I prefer aisle seats"}
    values = {(f["predicate"], f["value"], f["about_you"]) for f in data["facts"]}
    assert ("prefers", "aisle seats", True) in values
    assert ("prefers", "vegetarian meals", True) in values  # Devon's word about her
    assert ("prefers", "green tea", False) in values  # her word about Devon
    assert all(f["evidence"] and f["learnt_in"] for f in data["facts"])
    owed = {(c["value"], c["owed_by_you"], c["owed_to_you"]) for c in data["commitments"]}
    assert ("send the budget report", True, False) in owed
    assert ("send Sarah the itinerary", False, True) in owed
    again = run(settings, "export", "--participant", "u-sarah", "--tenant", tenant)
    assert again.stdout == exported.stdout  # deterministic

    # The worker writes the others' turns (and Sarah's last ones) while she is forgotten.
    emitted: list[Any] = []
    stop = threading.Event()

    def emit_meanwhile() -> None:
        # Five turns at a time, each five waited for: paced by the worker, never by a sleep.
        i = 0
        while not stop.is_set() or i < 15:
            turns = [
                sarah_in_flight(tenant, n) if n % 5 == 4 else others_turn(tenant, n)
                for n in range(i, i + 5)
            ]
            for turn in turns:
                producer.emit(turn)
            emitted.extend(turns)
            i += 5
            assert producer.flush(timeout=30)
            ledger.wait([(tenant, t["event_id"]) for t in turns], timeout=60)

    emitter = threading.Thread(target=emit_meanwhile)
    emitter.start()
    try:
        ledger.wait([(tenant, "ev-bg-0")], timeout=60)  # the worker is writing by now
        written_before = len(emitted)
        forgot = run(settings, "forget", "--participant", "u-sarah", "--tenant", tenant, "--json")
        # Turns were emitted and synced while forget ran (each round waits for its syncs).
        assert len(emitted) > written_before
    finally:
        stop.set()
        emitter.join(120)
    assert producer.flush(timeout=30)
    statuses = ledger.wait([(tenant, t["event_id"]) for t in emitted], timeout=120)
    assert all(s.finished for s in statuses), statuses
    assert forgot.returncode == 0, forgot.stdout + forgot.stderr
    report = json.loads(forgot.stdout)
    assert report["complete"] and report["run"] == 1
    assert report["counts"]["episodes"] >= 8 and report["counts"]["participants"] == 1
    assert report["counts"]["facts"] >= 4 and report["counts"]["commitments"] >= 3
    assert report["counts"]["closures"] >= 1 and report["counts"]["facts_reattributed"] == 1
    assert report["counts"]["summaries_rebuilt"] >= 1

    # A turn of hers arriving later still (a resend, a replay) writes nothing of her either,
    # while the rest of the turn is written.
    late = event(
        tenant,
        "ev-late",
        GROUP,
        [DEVON, SARAH, TRAVEL],
        [
            msg("late-1", "user", "u-sarah", "I prefer aisle seats near the slides", 30),
            msg("late-2", "user", "u-devon", "I prefer the quiet carriage", 31),
        ],
    )
    jobs = ingest_turns([validate_event(late)], {}, DirectoryTrustPolicy("open", {})).jobs
    write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))

    # Nothing of Sarah: node, messages, facts about or by her, commitments, closures, summaries.
    params: dict[str, Any] = {"tenant": tenant, "key": sarah}
    assert count(graph, "MATCH (p:Participant {key: $key}) RETURN count(p)", **params) == 0
    assert (
        count(
            graph,
            "MATCH (e:Episode {tenant: $tenant}) WHERE e.speaker_id = 'u-sarah' "
            "OR e.speaker_label CONTAINS '(@sarah)' RETURN count(e)",
            **params,
        )
        == 0
    )
    assert (
        count(
            graph,
            "MATCH (f:Fact {tenant: $tenant}) WHERE f.subject_key = $key OR f.stated_by = $key "
            "RETURN count(f)",
            **params,
        )
        == 0
    )
    assert (
        count(
            graph,
            "MATCH (c:Commitment {tenant: $tenant}) "
            "WHERE c.owed_by_key = $key OR c.owed_to_key = $key RETURN count(c)",
            **params,
        )
        == 0
    )
    assert (
        count(
            graph,
            "MATCH (k:Closure {tenant: $tenant}) "
            "WHERE k.owed_by_key = $key OR k.owed_to_key = $key RETURN count(k)",
            **params,
        )
        == 0
    )
    with graph.session(write=False) as session:
        texts = [
            r["text"]
            for r in session.run(
                "MATCH (s:Summary {tenant: $tenant}) RETURN s.text AS text", tenant=tenant
            )
        ]
        memory_texts = [
            r["text"]
            for r in session.run(
                "MATCH (n) WHERE (n:Fact OR n:Commitment) AND n.tenant = $tenant "
                "RETURN n.text AS text",
                tenant=tenant,
            )
        ]
    for text in texts + memory_texts:
        assert not any(word in text for word in SARAHS_WORDS), text
    # The group summary was rebuilt, by the re-anchoring rebuild, from what is left.
    history = summary_history(
        graph, tenant, participant_key(tenant, "a-travel"), channel_key(tenant, GROUP["id"])
    )
    assert len(history) == 1 and history[0].anchored and history[0].version > before.version
    raw = channel_episodes(
        graph, history[0].agent_key, history[0].channel_key, until=history[0].position
    )
    assert raw and history[0].text == ExtractiveSummarizer(settings.summary_max_tokens).rebuild(raw)

    # Recall and context no longer hold her; the others' memory is intact.
    memory = Memory(graph)
    for query in ("aisle seats", "budget report", "slides", "passport"):
        items = memory.recall(tenant=tenant, agent_id="a-travel", query=query)
        assert not any(w in i.text for i in items for w in SARAHS_WORDS), (query, items)
    context = memory.build_context("a-travel", GROUP["id"], tenant=tenant, query="seat choice")
    rendered = "\n".join(m["content"] for m in context.render())
    assert not any(word in rendered for word in SARAHS_WORDS), rendered
    assert "u-sarah" not in {p.id for p in context.participants}
    with graph.session(write=False) as session:
        facts = {
            (r["subject"], r["value"]): r["by"]
            for r in session.run(
                "MATCH (f:Fact {tenant: $tenant}) RETURN f.subject_key AS subject, "
                "f.value AS value, f.stated_by AS by",
                tenant=tenant,
            )
        }
        episode_ids = {
            r["id"]
            for r in session.run("MATCH (e:Episode {tenant: $tenant}) RETURN e.id AS id", **params)
        }
    devon = participant_key(tenant, "u-devon")
    # Stated first by her, then by Devon himself: kept, and now credited to him.
    assert facts[(devon, "window seats")] == devon
    assert (participant_key(tenant, "u-priya"), "peanuts") in facts
    assert (devon, "quiet carriage") in facts and "late-2" in episode_ids
    others = {t["messages"][0]["id"] for t in emitted if t["event_id"].startswith("ev-bg-")}
    assert others <= episode_ids and {"g1", "g5", "g6", "g9", "g10", "g11"} <= episode_ids

    # The audit record: who (a hash), when, by which command, counts; no content.
    listed = run(settings, "forget", "--list", "--tenant", tenant, "--json")
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    assert len(records) == 1 and records[0]["scope"] == "participant" and records[0]["blocking"]
    assert (
        records[0]["subject_hash"] == hashlib.sha256(f"participant\0{sarah}".encode()).hexdigest()
    )
    assert records[0]["totals"]["episodes"] == report["counts"]["episodes"]
    assert not any(w.lower() in listed.stdout.lower() for w in ("sarah", "aisle", "u-sarah"))

    # A second run deletes nothing and succeeds; the export is empty.
    second = run(settings, "forget", "--participant", "u-sarah", "--tenant", tenant)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("nothing left to forget (run 2)")
    empty = json.loads(
        run(settings, "export", "--participant", "u-sarah", "--tenant", tenant).stdout
    )
    assert empty["participant"] is None
    assert empty["episodes"] == empty["facts"] == empty["commitments"] == empty["channels"] == []
    assert [e["runs"] for e in empty["erasures"]] == [2]

    # Errors: an unknown participant names it (exit 1); an agent or no subject is bad usage.
    unknown = run(settings, "forget", "--participant", "u-nobody", "--tenant", tenant)
    assert unknown.returncode == 1 and "u-nobody" in unknown.stderr
    assert run(settings, "forget", "--participant", "a-travel", "--tenant", tenant).returncode == 2
    assert run(settings, "forget", "--tenant", tenant).returncode == 2
    assert run(settings, "forget", "--participant", "x", "--batch", "many").returncode == 2


def test_forget_agent_leaves_other_agents_memory(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    producer: Producer,
    ledger: Ledger,
    tenant: str,
) -> None:
    people = [DEVON, TRAVEL, HELPER]
    emit_and_wait(
        producer,
        ledger,
        [
            event(
                tenant,
                "ev-a",
                GROUP,
                people,
                [
                    msg("a1", "user", "u-devon", "I prefer window seats", 1),
                    msg("a2", "user", "u-devon", "I'll send the expense report by Friday", 2),
                    msg("a3", "ai", "a-helper", "Noted: expense report ER-1102, due Friday.", 3),
                    msg("a4", "user", "u-devon", "Our booking code is QX-4410, confirmed.", 4),
                    msg("a5", "user", "u-devon", "Flight LX318 leaves at 09:40 on the 4th.", 5),
                    *[
                        msg(f"a{i}", "user", "u-devon", f"Hotel option {i}: code HT-{i:04d}.", i)
                        for i in range(6, 14)
                    ],
                ],
            )
        ],
    )
    for agent in ("a-helper", "a-travel"):
        fold(graph, tenant, agent, GROUP["id"])
    helper = participant_key(tenant, "a-helper")
    travel = participant_key(tenant, "a-travel")
    mine = (
        "MATCH (n) WHERE (n:Fact OR n:Commitment OR n:Closure OR n:Summary) "
        "AND n.agent_key = $agent RETURN count(n)"
    )
    assert count(graph, mine, agent=helper) >= 3
    travel_before = count(graph, mine, agent=travel)

    done = run(settings, "forget", "--agent", "a-helper", "--tenant", tenant, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["counts"]["observed"] == 13 and report["counts"]["episodes"] == 0
    assert report["counts"]["summary_versions"] >= 1 and report["counts"]["summaries_rebuilt"] == 0
    assert count(graph, mine, agent=helper) == 0
    # Only SAID is left, for a3, which the Travel Agent still remembers, and its membership of
    # the channel, which keeps the channel's audience as it was for the audience rule.
    left = "MATCH (:Participant {key: $a})-[r]->() WHERE NOT r:MEMBER_OF RETURN count(r)"
    assert count(graph, left, a=helper) == 1
    said = "MATCH (:Participant {key: $a})-[r:SAID]->() RETURN count(r)"
    assert count(graph, said, a=helper) == 1
    assert count(graph, mine, agent=travel) == travel_before
    assert count(graph, "MATCH (e:Episode {tenant: $t}) RETURN count(e)", t=tenant) == 13
    assert Memory(graph).recall(tenant=tenant, agent_id="a-helper", query="expense report") == []
    assert Memory(graph).recall(tenant=tenant, agent_id="a-travel", query="expense report")

    second = run(settings, "forget", "--agent", "a-helper", "--tenant", tenant)
    assert second.returncode == 0 and second.stdout.startswith("nothing left to forget")
    records = json.loads(run(settings, "forget", "--list", "--tenant", tenant, "--json").stdout)
    assert [(r["scope"], r["blocking"], r["runs"]) for r in records] == [("agent", False, 2)]
    assert run(settings, "forget", "--agent", "u-devon", "--tenant", tenant).returncode == 2


def test_forget_channel_keeps_memory_with_evidence_elsewhere(
    worker: services.Service,
    settings: Settings,
    graph: GraphStore,
    producer: Producer,
    ledger: Ledger,
    tenant: str,
) -> None:
    grant_trust(graph, tenant, "u-devon", "u-priya", "team")
    dm = {"id": "dm-devon", "kind": "dm"}
    emit_and_wait(
        producer,
        ledger,
        [
            event(
                tenant,
                "ev-g",
                GROUP,
                [DEVON, PRIYA, TRAVEL],
                [
                    msg("c1", "user", "u-devon", "I prefer window seats", 1),
                    msg("c2", "user", "u-priya", "I'm allergic to peanuts", 2),
                    msg("c3", "user", "u-priya", "I'll send the hotel list by Friday", 3),
                    msg("c4", "user", "u-devon", "The booking code is QX-4410, decided.", 4),
                    msg("c5", "user", "u-priya", "Flight LX318 at 09:40 on the 4th, agreed.", 5),
                    *[
                        msg(f"c{i}", "user", "u-priya", f"Hotel option {i}: code HT-{i:04d}.", i)
                        for i in range(10, 18)
                    ],
                ],
            )
        ],
    )
    # Its own batch: a restatement in the same batch would be one row with one evidence.
    emit_and_wait(
        producer,
        ledger,
        [
            event(
                tenant,
                "ev-d",
                dm,
                [DEVON, TRAVEL],
                [
                    msg("c6", "user", "u-devon", "I prefer window seats", 6),
                    msg("c7", "user", "u-devon", "My passport expires in March", 7),
                ],
            ),
        ],
    )
    fold(graph, tenant, "a-travel", GROUP["id"])
    assert current_summary(graph, tenant, "a-travel", GROUP["id"]) is not None

    done = run(settings, "forget", "--channel", GROUP["id"], "--tenant", tenant, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["counts"]["episodes"] == 13 and report["counts"]["channels"] == 1
    with graph.session(write=False) as session:
        values = sorted(
            r["value"]
            for r in session.run(
                "MATCH (n) WHERE (n:Fact OR n:Commitment) AND n.tenant = $t "
                "RETURN n.value AS value",
                t=tenant,
            )
        )
        ids = sorted(
            r["id"]
            for r in session.run("MATCH (e:Episode {tenant: $t}) RETURN e.id AS id", t=tenant)
        )
    # Learnt in both channels: kept (its DM evidence); learnt only in the group: gone.
    assert "window seats" in values and "peanuts" not in values, values
    assert "send the hotel list" not in values, values
    assert ids == ["c6", "c7"]
    assert (
        summary_history(
            graph, tenant, participant_key(tenant, "a-travel"), channel_key(tenant, GROUP["id"])
        )
        == []
    )
    assert (
        count(
            graph, "MATCH (c:Channel {key: $k}) RETURN count(c)", k=channel_key(tenant, GROUP["id"])
        )
        == 0
    )
    second = run(settings, "forget", "--channel", GROUP["id"], "--tenant", tenant)
    assert second.returncode == 0 and second.stdout.startswith("nothing left to forget")


def test_retention_sweep_drops_old_episodes_and_expired_facts(
    settings: Settings, graph: GraphStore, tenant: str
) -> None:
    old = datetime(2020, 1, 6, 9, 0, tzinfo=UTC)
    recent = datetime.now(UTC) - timedelta(days=1)
    lines = [
        ("u-devon", "I prefer aisle seats"),  # a preference: expired a year later
        ("u-devon", "I'll send the tax forms by Friday"),  # a commitment: never expires
        *[("u-devon", f"Thanks, the booking code is BK{i:04d}Q for now.") for i in range(10)],
    ]
    messages = [
        {
            "id": f"o{i}",
            "role": "user",
            "sender_id": sender,
            "content": text,
            "created_at": (old + timedelta(minutes=i)).isoformat(),
        }
        for i, (sender, text) in enumerate(lines)
    ]
    messages.append(
        {
            "id": "n1",
            "role": "user",
            "sender_id": "u-devon",
            "content": "I prefer window seats",
            "created_at": recent.isoformat(),
        }
    )
    turn = event(tenant, "ev-r", {"id": "dm-r", "kind": "dm"}, [DEVON, TRAVEL], messages)
    jobs = ingest_turns([validate_event(turn)], {}, DirectoryTrustPolicy("open", {})).jobs
    write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))
    agent, chan = participant_key(tenant, "a-travel"), channel_key(tenant, "dm-r")
    fold_channel(
        graph,
        ExtractiveSummarizer(4000),
        tenant=tenant,
        agent_key=agent,
        channel_key=chan,
        fold_tokens=100,
        reanchor_every=8,
        max_folds=1,
    )
    summary = current_summary(graph, tenant, "a-travel", "dm-r")
    assert summary is not None
    covered = {
        e.key.rsplit(":", 1)[-1]
        for e in channel_episodes(graph, agent, chan, until=summary.position)
    }
    assert {"o0", "o1", "o2"} <= covered and "o11" not in covered

    def state() -> tuple[list[str], list[str]]:
        with graph.session(write=False) as session:
            ids = sorted(
                r["id"]
                for r in session.run("MATCH (e:Episode {tenant: $t}) RETURN e.id AS id", t=tenant)
            )
            facts = sorted(
                r["v"]
                for r in session.run("MATCH (f:Fact {tenant: $t}) RETURN f.value AS v", t=tenant)
            )
        return ids, facts

    start = state()
    env = {"MEMSYNC_EPISODE_RETENTION_DAYS": "30"}
    dry = run(settings, "graph", "sweep", "--tenant", tenant, "--dry-run", "--json", **env)
    assert dry.returncode == 0, dry.stderr
    expired = len(start[1]) - 1  # all but the recent one (a fact or a preference, years ago)
    assert json.loads(dry.stdout)["facts_expired"] == expired and state() == start
    swept = run(settings, "graph", "sweep", "--tenant", tenant, "--json", **env)
    assert swept.returncode == 0, swept.stderr
    report = json.loads(swept.stdout)
    ids, facts = state()
    assert report["facts_expired"] == expired and facts == ["window seats"]
    # Gone: old, summarised and cited by nothing (o0 once its expired fact went). Kept: the
    # commitment's evidence, the old ones no summary covers yet, the recent one.
    gone = sorted(covered - {"o1"})
    assert report["episodes_deleted"] == len(gone)
    assert ids == sorted(set(start[0]) - set(gone)) and {"o1", "o11", "n1"} <= set(ids)
    assert count(graph, "MATCH (c:Commitment {tenant: $t}) RETURN count(c)", t=tenant) == 1
    again = json.loads(run(settings, "graph", "sweep", "--tenant", tenant, "--json", **env).stdout)
    assert again["facts_expired"] == 0 and again["episodes_deleted"] == 0


def test_forget_waits_for_a_sync_that_began_before_the_tombstone(
    settings: Settings, graph: GraphStore, tenant: str
) -> None:
    """A sync transaction that began before the tombstone cannot have seen it: forget waits
    for it to end, then deletes what it wrote."""
    policy = DirectoryTrustPolicy("open", {})

    def planned(eid: str, mid: str, text: str) -> tuple[SyncBatch, MemoryRows]:
        turn = event(
            tenant, eid, GROUP, [DEVON, SARAH, TRAVEL], [msg(mid, "user", "u-sarah", text, 1)]
        )
        jobs = ingest_turns([validate_event(turn)], {}, policy).jobs
        return plan_batch(jobs), plan_memory(memorize(jobs, RulesExtractor(), BUILTIN_LENSES))

    batch, memory = planned("ev-1", "s1", "I prefer aisle seats")
    with graph.session() as session:
        session.execute_write(_write_batch, batch, memory)
    batch, memory = planned("ev-2", "s2", "I'll send the budget report by Friday")
    session = graph.driver.session(database=graph.database)
    tx = session.begin_transaction()
    command = [sys.executable, "-m", "workers.cli.main", "forget", "--participant", "u-sarah"]
    forget: subprocess.Popen[str] | None = None
    out = err = ""
    try:
        # The writer's own transaction function, in a transaction this test holds open (an
        # explicit transaction runs the same statements a managed one would).
        _write_batch(cast(neo4j.ManagedTransaction, tx), batch, memory)
        forget = subprocess.Popen(
            [*command, "--tenant", tenant, "--json"],
            env=worker_env(settings),
            cwd=services.PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: bool(list_erasures(graph, tenant)))
        assert forget.poll() is None  # the tombstone is in; forget waits for this transaction
        tx.commit()
    finally:
        if not tx.closed():
            tx.rollback()
        session.close()
        if forget is not None and forget.poll() is None:
            out, err = forget.communicate(timeout=120)
    assert forget is not None and forget.returncode == 0, err
    report = json.loads(out)
    assert report["barrier_ok"] and report["counts"]["episodes"] == 2
    key = participant_key(tenant, "u-sarah")
    assert count(graph, "MATCH (e:Episode {tenant: $t}) RETURN count(e)", t=tenant) == 0
    assert (
        count(
            graph,
            "MATCH (n) WHERE (n:Fact OR n:Commitment) AND n.tenant = $t RETURN count(n)",
            t=tenant,
        )
        == 0
    )
    assert count(graph, "MATCH (p:Participant {key: $k}) RETURN count(p)", k=key) == 0
