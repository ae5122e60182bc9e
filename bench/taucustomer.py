"""tau-bench's airline conversations as a customer-memory recall set: real customer-service
chats (a simulated customer and a deployed model as the agent), not written for memsync.

The conversations come from ../shared/data at run time, never copied into the repository; only
the questions live here (bench/data/customer_memory_tau.jsonl, written blind), and they index
the filtered message list this module rebuilds: trial 0 of each task, the user's and the
assistant's messages that carry text, with the user simulator's stop token removed (tool calls
and their results are dropped, as memsync's filter stage drops them). A kept message that also
called a tool keeps its calls, as a platform would send it: what it promises is kept by them
(pipeline/memorize.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from bench.shared import json_lines

CUSTOMER_MEMORY_TAU: Final = Path(__file__).resolve().parent / "data" / "customer_memory_tau.jsonl"
TAU_FILE: Final = Path("tau-bench", "gpt-4o-airline.json")
AGENT_SPEAKER: Final = "Airline Agent"
# The user simulator ends a conversation with this token, inside or after its last message.
STOP_TOKEN: Final = "###STOP###"


@dataclass(frozen=True)
class Conversation:
    """One airline conversation as the recall set reads it: (speaker, text) in order."""

    task_id: int
    user_id: str
    messages: tuple[tuple[str, str], ...]
    # The tool calls a kept message also made, by its index in `messages`.
    calls: Mapping[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def customer(self) -> str:
        return customer_name(self.user_id)


def customer_name(user_id: str) -> str:
    """The customer's name from a tau-bench user id ("mia_li_3668" is Mia Li)."""
    return " ".join(part.capitalize() for part in user_id.split("_")[:-1])


def conversations(root: Path) -> dict[int, Conversation]:
    """Trial 0 of every task under `root`, by task id, filtered as the module says."""
    trajectories: list[dict[str, Any]] = json.loads((root / TAU_FILE).read_text(encoding="utf-8"))
    found: dict[int, Conversation] = {}
    for trajectory in trajectories:
        if trajectory["trial"] != 0:
            continue
        user_id = trajectory["info"]["task"]["user_id"]
        kept: list[tuple[str, str]] = []
        calls: dict[int, list[dict[str, Any]]] = {}
        for message in trajectory["traj"]:
            if message["role"] not in ("user", "assistant"):
                continue
            text = (message.get("content") or "").replace(STOP_TOKEN, "").strip()
            if text:
                speaker = customer_name(user_id) if message["role"] == "user" else AGENT_SPEAKER
                if message.get("tool_calls"):
                    calls[len(kept)] = message["tool_calls"]
                kept.append((speaker, text))
        found[trajectory["task_id"]] = Conversation(
            trajectory["task_id"], user_id, tuple(kept), calls
        )
    return found


def questions(path: Path = CUSTOMER_MEMORY_TAU) -> list[dict[str, Any]]:
    """The set's questions: id, task_id, question, answer (indices into the conversation)."""
    return json_lines(path)
