"""The sync-path workload of issue 9, built from real conversation data with a fixed seed.

Group channels of named humans (FriendsQA speakers) and agents drawn from a shared pool; each
turn is a human utterance (FriendsQA) and an agent reply (a tau-bench assistant message with
text), and every fourth turn also carries a tau-bench tool call (an assistant message that only
calls a tool) and its tool result, both of which the filter stage drops. Pure: no services.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from schemas.event import SCHEMA_VERSION
from tests.datasets import first_speaker, friends_scenes, slug, tau_trajectories

TOOL_CALL_EVERY = 4
DEFAULT_SEED = 20261130
DEFAULT_TENANT = "bench-sync"
# Fixed, so the events never depend on when the bench ran (and stay in the schema's window).
EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TURN_SPACING = timedelta(seconds=1)
MESSAGE_SPACING = timedelta(milliseconds=100)

RawEvent = dict[str, Any]


@dataclass(frozen=True)
class ToolExchange:
    """One tau-bench tool call (the assistant message's first call) and the result it got."""

    name: str
    arguments: str
    result: str


@dataclass(frozen=True)
class Texts:
    """The real text the workload draws from, in file order."""

    names: tuple[str, ...]  # distinct FriendsQA speaker names (stage notes like #ALL# left out)
    utterances: tuple[str, ...]  # FriendsQA utterances with text
    replies: tuple[str, ...]  # tau-bench assistant messages with text
    tools: tuple[ToolExchange, ...]  # tau-bench tool-call-only messages with their result


def load_texts(data: Path) -> Texts:
    """Read the FriendsQA and tau-bench texts under `data` (full set or the tests/data slices)."""
    scenes = friends_scenes(data)
    names: dict[str, None] = {}
    utterances: list[str] = []
    for scene in scenes:
        for utterance in scene["utterances"]:
            name = first_speaker(utterance)
            if not name.startswith("#"):
                names.setdefault(name)
            if utterance["utterance"].strip():
                utterances.append(utterance["utterance"])
    replies: list[str] = []
    tools: list[ToolExchange] = []
    for trajectory in tau_trajectories(data):
        traj = trajectory["traj"]
        results = {
            m.get("tool_call_id"): m.get("content") or "" for m in traj if m["role"] == "tool"
        }
        for message in traj:
            if message["role"] != "assistant":
                continue
            content = message.get("content")
            calls = message.get("tool_calls") or []
            if content and content.strip():
                replies.append(content)
            elif calls:
                call = calls[0]
                function = call.get("function", call)
                if call.get("id") in results:
                    tools.append(
                        ToolExchange(
                            name=str(function["name"]),
                            arguments=str(function.get("arguments") or ""),
                            result=str(results[call.get("id")]),
                        )
                    )
    if not names or not utterances or not replies or not tools:
        raise ValueError(f"no usable FriendsQA or tau-bench text under {data}")
    return Texts(tuple(names), tuple(utterances), tuple(replies), tuple(tools))


def agent_participant(number: int) -> dict[str, Any]:
    return {
        "id": f"a-{number}",
        "kind": "agent",
        "display_name": f"Agent {number}",
        "handle": f"agent{number}",
    }


def channel_agents(channel: int, agents: int, pool: int) -> list[dict[str, Any]]:
    """The agents of a channel: consecutive members of the pool, so channels share agents."""
    return [agent_participant((channel + k) % pool) for k in range(agents)]


def workload(
    data: Path,
    *,
    turns: int = 4000,
    channels: int = 10,
    humans: int = 2,
    agents: int = 3,
    agent_pool: int | None = None,
    seed: int = DEFAULT_SEED,
    tenant: str = DEFAULT_TENANT,
) -> list[RawEvent]:
    """`turns` raw turn events (what the producer's emit() takes), the same for the same seed.

    Turn i is in channel i mod `channels`; a random human of the channel speaks and a random agent
    of it replies. The agent pool (default `agents` + 2) is shared: each agent sits in several
    channels. Every 4th turn (i mod 4 == 3) carries a tool call and its result before the reply.
    """
    if turns < 0 or channels < 1 or humans < 1 or agents < 1:
        raise ValueError("turns >= 0, channels, humans and agents >= 1")
    pool = agent_pool if agent_pool is not None else agents + 2
    if pool < agents:
        raise ValueError(f"an agent pool of {pool} cannot seat {agents} agents in a channel")
    texts = load_texts(data)
    rng = random.Random(seed)
    names = list(texts.names)
    rng.shuffle(names)
    members: list[list[dict[str, Any]]] = []
    for channel in range(channels):
        people = []
        for h in range(humans):
            index = channel * humans + h
            # A small data tree may have fewer names than seats: the round says which copy it is.
            name = names[index % len(names)]
            if index >= len(names):
                name = f"{name} {index // len(names) + 1}"
            people.append(
                {
                    "id": f"u-{slug(name)}",
                    "kind": "human",
                    "display_name": name,
                    "handle": slug(name),
                }
            )
        members.append(people)
    events: list[RawEvent] = []
    for i in range(turns):
        channel = i % channels
        people = members[channel]
        seated = channel_agents(channel, agents, pool)
        speaker = rng.choice(people)
        replier = rng.choice(seated)
        at = EPOCH + i * TURN_SPACING
        messages: list[dict[str, Any]] = [
            {
                "id": f"m-{i}-0",
                "role": "human",
                "sender_id": speaker["id"],
                "content": rng.choice(texts.utterances),
                "created_at": at.isoformat(),
            }
        ]
        if i % TOOL_CALL_EVERY == TOOL_CALL_EVERY - 1:
            tool = rng.choice(texts.tools)
            call_id = f"call-{i}"
            messages.append(
                {
                    "id": f"m-{i}-{len(messages)}",
                    "role": "ai",
                    "sender_id": replier["id"],
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool.name, "arguments": tool.arguments},
                        }
                    ],
                    "created_at": (at + len(messages) * MESSAGE_SPACING).isoformat(),
                }
            )
            messages.append(
                {
                    "id": f"m-{i}-{len(messages)}",
                    "role": "tool",
                    "sender_id": replier["id"],
                    "content": tool.result,
                    "tool_call_id": call_id,
                    "created_at": (at + len(messages) * MESSAGE_SPACING).isoformat(),
                }
            )
        messages.append(
            {
                "id": f"m-{i}-{len(messages)}",
                "role": "ai",
                "sender_id": replier["id"],
                "content": rng.choice(texts.replies),
                "created_at": (at + len(messages) * MESSAGE_SPACING).isoformat(),
            }
        )
        events.append(
            {
                "schema_version": SCHEMA_VERSION,
                "event_id": f"sync-{i:06d}",
                "tenant": tenant,
                "channel": {"id": f"ch-{channel}", "kind": "group", "title": f"Channel {channel}"},
                "participants": [*copy.deepcopy(people), *seated],
                "messages": messages,
            }
        )
    return events


def retenant(events: list[RawEvent], tenant: str) -> list[RawEvent]:
    """Deep copies of `events` in another tenant (each bench phase writes its own tenant)."""
    result = copy.deepcopy(events)
    for event in result:
        event["tenant"] = tenant
    return result


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-100) of a sample; NaN when it is empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def spread(values: Sequence[float]) -> dict[str, float]:
    """n, p50, p99 and max of a sample (NaN for an empty one), for the bench reports."""
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else math.nan,
    }


def jsonable(value: Any) -> Any:
    """Figures as strict JSON: NaN (an empty sample) becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
