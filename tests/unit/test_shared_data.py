"""The stages on real public conversations: tau-bench tool traffic, FriendsQA group scenes.

They read the slices vendored in tests/data (see its README), never the full sets beside the
project: a clone on its own must pass. The figures pinned here are the slices' own, counted
from the raw JSON.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pytest

from bench.shared import shared_data_dir
from pipeline.fanout import fan_out
from pipeline.filter import filter_turns
from pipeline.graph.writer import plan_batch
from pipeline.ingest import ingest_turns
from pipeline.resolve import names_needed, resolve_speakers
from pipeline.trust import ChannelTrustPolicy, check_trust
from pipeline.validate import validate_events
from schemas.event import TurnEvent
from schemas.keys import participant_key
from tests.datasets import (
    DATA_DIR,
    FRIENDS_OBSERVER_ID,
    FRIENDSQA_FILE,
    LICENCE_FILES,
    TAU_AGENT_ID,
    TAU_BENCH_FILE,
    FriendsScene,
    first_speaker,
    friends_events,
    friends_participant_id,
    friends_raw_event,
    friends_scenes,
    slug,
    tau_events,
    tau_message_id,
    tau_raw_events,
    tau_trajectories,
)

ROOT = Path(__file__).resolve().parents[2]


def test_tests_read_the_slices_in_the_repository() -> None:
    assert DATA_DIR == ROOT / "tests" / "data"
    for name in (TAU_BENCH_FILE, FRIENDSQA_FILE, *LICENCE_FILES):
        assert (DATA_DIR / name).is_file(), name
    # Read through the default root, the loaders never leave the repository.
    assert tau_trajectories() == tau_trajectories(ROOT / "tests" / "data")
    assert friends_scenes() == friends_scenes(ROOT / "tests" / "data")


def test_benchmarks_name_the_missing_shared_data(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="benchmarks need them beside the project") as info:
        shared_data_dir(tmp_path / "absent")
    assert str(tmp_path / "absent") in str(info.value)
    assert shared_data_dir(DATA_DIR) == DATA_DIR  # any tree with both files


def has_text(raw: Mapping[str, object]) -> bool:
    content = raw.get("content")
    return isinstance(content, str) and content.strip() != ""


def expected_tau_kept() -> set[str]:
    """Ids of the messages that must survive the filter, read straight from the raw JSON."""
    return {
        tau_message_id(t["task_id"], t["trial"], index)
        for t in tau_trajectories()
        for index, raw in enumerate(t["traj"])
        if raw["role"] in ("user", "assistant") and has_text(raw)
    }


def raw_tau_tally() -> Counter[str]:
    tally: Counter[str] = Counter()
    for trajectory in tau_trajectories():
        for raw in trajectory["traj"]:
            tally["messages"] += 1
            tally[f"role.{raw['role']}"] += 1
            if raw["role"] == "assistant" and not has_text(raw) and raw.get("tool_calls"):
                tally["assistant.tool_call_only"] += 1
            if raw["role"] == "assistant" and has_text(raw) and raw.get("tool_calls"):
                tally["assistant.text_and_tool_calls"] += 1
            speech = raw["role"] in ("user", "assistant")
            if speech and not has_text(raw) and not raw.get("tool_calls"):
                tally["empty_text"] += 1
    return tally


def test_tau_bench_slice_totals() -> None:
    tally = raw_tau_tally()
    assert len(tau_trajectories()) == 5
    assert tally["messages"] == 150
    assert tally["role.tool"] == 40
    events = tau_events()
    assert sum(len(e.messages) for e in events) == 150
    assert sum(m.role == "tool" for e in events for m in e.messages) == 40


def test_tau_bench_events_all_validate() -> None:
    events, errors = validate_events(tau_raw_events())
    assert errors == []
    assert len(events) == 5
    assert all(
        e.channel.kind == "dm" and [a.id for a in e.agents] == [TAU_AGENT_ID] for e in events
    )


def test_tau_bench_filter_drops_exactly_the_tool_traffic() -> None:
    tally = raw_tau_tally()
    turns = filter_turns(tau_events())
    kept = {m.id for t in turns for m in t.kept}
    assert kept == expected_tau_kept()
    reasons = Counter(d.reason for t in turns for d in t.dropped)
    assert reasons == Counter(
        {
            "tool_message": tally["role.tool"],
            "tool_call_only": tally["assistant.tool_call_only"],
            "system_message": tally["role.system"],
        }
    )
    assert tally["empty_text"] == 0
    # Pinned from the slice: 35 user + 35 assistant messages with text.
    assert len(kept) == 70
    assert tally["assistant.tool_call_only"] == 35
    # Assistant messages with both text and tool calls are speech: kept.
    assert tally["assistant.text_and_tool_calls"] == 5
    both = {
        m.id for t in turns for m in t.kept if m.tool_calls and m.role == "ai" and m.content.strip()
    }
    assert len(both) == 5
    assert all(m.role in ("human", "ai") for t in turns for m in t.kept)


def test_tau_bench_ingest_gives_one_job_per_conversation() -> None:
    outcome = ingest_turns(tau_events(), {}, ChannelTrustPolicy())
    counts = outcome.counts()
    assert counts["events"] == 5
    assert counts["messages.kept"] == len(expected_tau_kept())
    assert counts["trust.trusted"] == 5
    assert counts["sync_jobs"] == 5
    tool_contents = {
        raw.get("content")
        for t in tau_trajectories()
        for raw in t["traj"]
        if raw["role"] == "tool" and raw.get("content")
    }
    assert all(m.content not in tool_contents for job in outcome.jobs for m in job.messages)
    customer = next(p for p in outcome.jobs[0].participants if p.kind == "human")
    assert customer.label == f"Customer 0 (@customer-0-{tau_trajectories()[0]['trial']})"


def test_friendsqa_shape() -> None:
    scenes = friends_scenes()
    assert len(scenes) == 12
    assert sum(len(s["utterances"]) for s in scenes) == 288
    chorus = [u for s in scenes for u in s["utterances"] if len(u["speakers"]) > 1]
    assert len(chorus) == 2  # so first-speaker attribution is exercised below


def test_friendsqa_every_utterance_resolves_to_its_own_speaker() -> None:
    events = friends_events()
    turns = resolve_speakers(filter_turns(events), {})
    assert names_needed(events) == set()
    checked = 0
    for scene, turn in zip(friends_scenes(), turns, strict=True):
        utterances = [u for u in scene["utterances"] if u["utterance"].strip()]
        assert len(turn.messages) == len(utterances)
        for message, utterance in zip(turn.messages, utterances, strict=True):
            name = first_speaker(utterance)
            assert message.id.endswith(f"-u{utterance['uid']}")
            assert message.speaker_label == f"{name} (@{slug(name)})"
            assert message.speaker_key == participant_key("friends", friends_participant_id(name))
            assert message.content == utterance["utterance"]
            checked += 1
        speakers = {first_speaker(u) for u in scene["utterances"]}
        assert {p.display_name for p in turn.participants} == speakers
    assert checked == 288


def test_friendsqa_same_name_is_the_same_participant_across_scenes() -> None:
    turns = resolve_speakers(filter_turns(friends_events()), {})
    keys_by_name: dict[str, set[str]] = {}
    for turn in turns:
        for p in turn.participants:
            keys_by_name.setdefault(p.display_name, set()).add(p.key)
    assert all(len(keys) == 1 for keys in keys_by_name.values())
    assert len(keys_by_name["Ross Geller"]) == 1


def scene_with(name: str) -> FriendsScene:
    return next(
        s for s in friends_scenes() if any(first_speaker(u) == name for u in s["utterances"])
    )


@pytest.mark.parametrize("handle", ["ross-g", "ross-geller"])
def test_friendsqa_two_people_sharing_a_name_stay_distinct(handle: str) -> None:
    scene = scene_with("Ross Geller")
    raw = copy.deepcopy(friends_raw_event(scene))
    other = {
        "id": "u-ross-geller-2",
        "kind": "human",
        "display_name": "Ross Geller",
        "handle": handle,
    }
    raw["participants"].append(other)
    raw["messages"].insert(
        1,
        {
            "id": "impostor-1",
            "role": "human",
            "sender_id": "u-ross-geller-2",
            "content": "I am a different Ross.",
            "created_at": raw["messages"][0]["created_at"],
        },
    )
    [turn] = resolve_speakers(filter_turns([TurnEvent.model_validate(raw)]), {})
    rosses = [p for p in turn.participants if p.display_name == "Ross Geller"]
    assert len(rosses) == 2
    original = participant_key("friends", friends_participant_id("Ross Geller"))
    impostor = participant_key("friends", "u-ross-geller-2")
    assert {p.key for p in rosses} == {original, impostor}
    by_key = {k: [m.id for m in turn.messages if m.speaker_key == k] for k in (original, impostor)}
    assert by_key[impostor] == ["impostor-1"]
    ross_lines = [
        f"{scene['title']}-u{u['uid']}"
        for u in scene["utterances"]
        if first_speaker(u) == "Ross Geller" and u["utterance"].strip()
    ]
    assert by_key[original] == ross_lines
    assert len(ross_lines) >= 1
    # The same name and handle as the original: the newcomer's handle is marked with its id.
    mark = "" if handle == "ross-g" else "~u-ross-geller-2"
    assert next(m for m in turn.messages if m.id == "impostor-1").speaker_label == (
        f"Ross Geller (@{handle}{mark})"
    )
    # Both reach the graph as separate participants.
    trusted = check_trust([turn], ChannelTrustPolicy())
    assert trusted[0].decisions == []  # no agent in the scene: nothing to fan out
    agent = {"id": "a-observer", "kind": "agent", "display_name": "Observer", "handle": "observer"}
    raw["participants"].append(agent)
    jobs = fan_out(
        check_trust(
            resolve_speakers(filter_turns([TurnEvent.model_validate(raw)]), {}),
            ChannelTrustPolicy(),
        )
    )
    rows = plan_batch(jobs).participants
    assert sorted(r["key"] for r in rows if r["display_name"] == "Ross Geller") == sorted(
        [original, impostor]
    )


def test_friendsqa_silent_observer_gets_every_scene() -> None:
    outcome = ingest_turns(friends_events(observer=True), {}, ChannelTrustPolicy())
    assert outcome.counts()["sync_jobs"] == 12
    assert {j.agent.id for j in outcome.jobs} == {FRIENDS_OBSERVER_ID}
    batch = plan_batch(outcome.jobs)
    assert len(batch.episodes) == 288
    speakers = {first_speaker(u) for s in friends_scenes() for u in s["utterances"]}
    assert len(batch.participants) == len(speakers) + 1
    assert len(batch.observed) == 288
