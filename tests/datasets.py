"""Loaders that turn the public conversation data sets into turn events, for tests and benchmarks.

Tests read small slices vendored under tests/data (so a clone on its own runs them); benchmarks
read the full sets from the data tree beside the project (``bench.shared``). Both trees
have the same layout, and every loader takes the tree as ``root``. Loaders return plain
JSON-shaped dicts (what a platform would emit) and have twins that validate them into
``TurnEvent`` objects. bench/slices.py cuts the slices; tests/data/README.md says how.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, TypedDict, cast

from schemas.event import SCHEMA_VERSION, TurnEvent

TESTS_DATA_DIR = Path(__file__).resolve().parent / "data"
DATA_DIR = TESTS_DATA_DIR  # what tests read unless told otherwise

# Paths inside a data tree (the slices keep the upstream names, so one loader reads both).
TAU_BENCH_FILE = Path("tau-bench", "gpt-4o-airline.json")
FRIENDSQA_FILE = Path("friendsqa", "friendsqa_dev.json")
# Upstream provenance and licence files copied next to the slices unchanged.
LICENCE_FILES = (
    Path("tau-bench", "LICENSE"),
    Path("tau-bench", "SOURCE"),
    Path("friendsqa", "LICENSE.txt"),
    Path("friendsqa", "SOURCE"),
    Path("irc-dev", "LICENSE-data.txt"),
    Path("irc-dev", "SOURCE"),
)

# Synthetic clock: every message is one second after the previous one, every conversation starts
# an hour after the previous one, so times increase across a whole data set.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

TAU_AGENT_ID = "a-airline"
FRIENDS_OBSERVER_ID = "a-observer"

RawEvent = dict[str, Any]


class TauMessage(TypedDict, total=False):
    """One message of a tau-bench trajectory, as stored (content may be null)."""

    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str
    name: str


class TauTrajectory(TypedDict):
    """One tau-bench trajectory (only the keys the loader reads)."""

    task_id: int
    trial: int
    traj: list[TauMessage]


class FriendsUtterance(TypedDict):
    """One FriendsQA utterance."""

    uid: int
    speakers: list[str]
    utterance: str


class FriendsScene(TypedDict):
    """One FriendsQA scene: its title and its utterances (stored under the key "utterances:")."""

    title: str
    utterances: list[FriendsUtterance]


def _at(conversation: int, index: int) -> str:
    return (EPOCH + timedelta(hours=conversation, seconds=index)).isoformat()


# --- tau-bench -------------------------------------------------------------------------------


@cache
def tau_trajectories(root: Path = DATA_DIR) -> tuple[TauTrajectory, ...]:
    """The raw tau-bench airline trajectories under `root`, parsed once per test session."""
    data = json.loads((root / TAU_BENCH_FILE).read_text(encoding="utf-8"))
    return tuple(cast(list[TauTrajectory], data))


def tau_message_id(task_id: int, trial: int, index: int) -> str:
    return f"t{task_id}-{trial}-m{index}"


def tau_customer_id(task_id: int, trial: int) -> str:
    return f"u-customer-{task_id}-{trial}"


def tau_raw_event(trajectory: TauTrajectory, position: int = 0) -> RawEvent:
    """One trajectory as a DM between its customer (human) and the airline agent.

    Roles are passed through as stored (``user``/``assistant``/``tool``/``system``) so the
    schema's alias normalisation is exercised; ``content: null`` and the OpenAI ``tool_calls``
    shape are passed through unchanged too. User messages come from the customer; assistant,
    tool and system messages are sent by the agent.
    """
    task_id, trial = trajectory["task_id"], trajectory["trial"]
    customer = tau_customer_id(task_id, trial)
    messages: list[dict[str, Any]] = []
    for index, raw in enumerate(trajectory["traj"]):
        message: dict[str, Any] = {
            "id": tau_message_id(task_id, trial, index),
            "role": raw["role"],
            "sender_id": customer if raw["role"] == "user" else TAU_AGENT_ID,
            "content": raw.get("content"),
            "created_at": _at(position, index),
        }
        if raw.get("tool_calls") is not None:
            message["tool_calls"] = raw.get("tool_calls")
        if "tool_call_id" in raw:
            message["tool_call_id"] = raw["tool_call_id"]
        messages.append(message)
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": f"tau-{task_id}-{trial}",
        "tenant": "taubench",
        "channel": {"id": f"tau-{task_id}-{trial}", "kind": "dm", "title": "Airline support"},
        "participants": [
            {
                "id": customer,
                "kind": "human",
                "display_name": f"Customer {task_id}",
                "handle": f"customer-{task_id}-{trial}",
            },
            {
                "id": TAU_AGENT_ID,
                "kind": "agent",
                "display_name": "Airline Agent",
                "handle": "airline",
                "lens": "airline",
            },
        ],
        "messages": messages,
    }


def tau_raw_events(root: Path = DATA_DIR) -> list[RawEvent]:
    return [tau_raw_event(t, position) for position, t in enumerate(tau_trajectories(root))]


def tau_events(root: Path = DATA_DIR) -> list[TurnEvent]:
    """Every tau-bench trajectory as a validated TurnEvent."""
    return [TurnEvent.model_validate(raw) for raw in tau_raw_events(root)]


# --- FriendsQA -------------------------------------------------------------------------------


def slug(name: str) -> str:
    """A handle for a speaker name: lower case, runs of other characters become one '-'.

    ``"Ross Geller"`` -> ``"ross-geller"``, ``"#ALL#"`` -> ``"all"``,
    ``"Carl (Rachel's date)"`` -> ``"carl-rachel-s-date"``.
    """
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "speaker"


def friends_participant_id(name: str) -> str:
    return f"u-{slug(name)}"


@cache
def friends_scenes(root: Path = DATA_DIR) -> tuple[FriendsScene, ...]:
    """Every FriendsQA scene (one per paragraph) under `root`, parsed once per test session."""
    data = json.loads((root / FRIENDSQA_FILE).read_text(encoding="utf-8"))
    scenes: list[FriendsScene] = []
    for episode in data["data"]:
        for paragraph in episode["paragraphs"]:
            utterances = cast(list[FriendsUtterance], paragraph["utterances:"])
            scenes.append(FriendsScene(title=episode["title"], utterances=utterances))
    return tuple(scenes)


def first_speaker(utterance: FriendsUtterance) -> str:
    """The speaker an utterance is attributed to.

    A few utterances list several speakers (people speaking in chorus). A message has exactly
    one sender, so the utterance is attributed to the first speaker listed; the others are still
    participants of the scene if they speak elsewhere in it, but not because of this line.
    """
    return utterance["speakers"][0]


def friends_raw_event(
    scene: FriendsScene, position: int = 0, *, observer: bool = False
) -> RawEvent:
    """One scene as a group-chat turn: each distinct (first) speaker is a named human.

    Participant ids and handles are slugs of the speaker name, so the same name is the same
    participant across scenes. With ``observer=True`` a silent agent participant is added, so the
    scene can be fanned out to an agent that never speaks.
    """
    participants: dict[str, dict[str, Any]] = {}
    messages: list[dict[str, Any]] = []
    for index, utterance in enumerate(scene["utterances"]):
        name = first_speaker(utterance)
        pid = friends_participant_id(name)
        participants.setdefault(
            pid, {"id": pid, "kind": "human", "display_name": name, "handle": slug(name)}
        )
        messages.append(
            {
                "id": f"{scene['title']}-u{utterance['uid']}",
                "role": "human",
                "sender_id": pid,
                "content": utterance["utterance"],
                "created_at": _at(position, index),
            }
        )
    people = list(participants.values())
    if observer:
        people.append(
            {
                "id": FRIENDS_OBSERVER_ID,
                "kind": "agent",
                "display_name": "Observer",
                "handle": "observer",
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": f"friends-{scene['title']}",
        "tenant": "friends",
        "channel": {"id": scene["title"], "kind": "group", "title": scene["title"]},
        "participants": people,
        "messages": messages,
    }


def friends_raw_events(*, observer: bool = False, root: Path = DATA_DIR) -> list[RawEvent]:
    return [
        friends_raw_event(scene, position, observer=observer)
        for position, scene in enumerate(friends_scenes(root))
    ]


def friends_events(*, observer: bool = False, root: Path = DATA_DIR) -> list[TurnEvent]:
    """Every FriendsQA scene as a validated group TurnEvent."""
    return [
        TurnEvent.model_validate(raw) for raw in friends_raw_events(observer=observer, root=root)
    ]
