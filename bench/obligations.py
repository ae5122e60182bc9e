"""What an agent still owes at the end of real customer chats: tau-bench's airline trajectories
emitted turn by turn as a platform sends them (tool calls and their results included), written
through stages 1-5 and the graph writer into a private Neo4j, then every commitment the airline
agent tracks counted by status.

    .venv/bin/python -m bench.obligations [--data DIR] [--limit N] [--show open|closed]

A promise kept by the agent's next tool call ("Once you confirm, I'll proceed with the
cancellation", a yes, then cancel_reservation) should end closed; one the chat never acted on
stays open. The data comes from ../shared/data at run time; nothing of it is copied here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from bench.shared import shared_data_dir
from bench.taucustomer import AGENT_SPEAKER, STOP_TOKEN, TAU_FILE, customer_name
from pipeline.extract import RulesExtractor
from pipeline.ingest import ingest_turns
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from pipeline.trust import ChannelTrustPolicy
from pipeline.validate import validate_event
from schemas.event import TurnEvent

TENANT: Final = "tau-obligations"
AGENT: Final = {"id": "a-airline", "kind": "agent", "display_name": AGENT_SPEAKER, "handle": "air"}
ROLES: Final = {"user": "human", "assistant": "ai", "tool": "tool"}
START: Final = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def chat_events(number: int, trajectory: dict[str, Any]) -> list[TurnEvent]:
    """One trajectory as turn events of a DM: each turn opens with the customer's message and
    holds the agent's replies, calls and tool results up to the next one."""
    user_id = trajectory["info"]["task"]["user_id"]
    customer = {
        "id": f"u-{user_id}",
        "kind": "human",
        "display_name": customer_name(user_id),
        "handle": user_id,
    }
    turns: list[list[dict[str, Any]]] = []
    at = START + timedelta(hours=number)
    for index, message in enumerate(trajectory["traj"]):
        role = ROLES.get(message["role"])
        if role is None:
            continue
        if role == "human" or not turns:
            turns.append([])
        calls = [
            {"id": call.get("id"), "name": call["function"]["name"]}
            for call in message.get("tool_calls") or []
        ]
        turns[-1].append(
            {
                "id": f"m{index}",
                "role": role,
                "sender_id": customer["id"] if role == "human" else AGENT["id"],
                "content": (message.get("content") or "").replace(STOP_TOKEN, "").strip(),
                "created_at": (at + timedelta(seconds=index)).isoformat(),
                **({"tool_calls": calls} if calls else {}),
                **({"tool_call_id": message.get("tool_call_id")} if role == "tool" else {}),
            }
        )
    return [
        validate_event(
            {
                "schema_version": 1,
                "event_id": f"chat-{number}-turn-{t}",
                "tenant": TENANT,
                "channel": {"id": f"chat-{number}", "kind": "dm"},
                "participants": [customer, AGENT],
                "messages": messages,
            }
        )
        for t, messages in enumerate(turns)
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.obligations", description=__doc__)
    parser.add_argument("--data", type=Path, default=None, help="../shared/data by default")
    parser.add_argument("--limit", type=int, default=None, help="the first N trajectories")
    parser.add_argument("--show", choices=("open", "closed"), help="list those commitments")
    args = parser.parse_args(argv)

    # Imported here: the graph side needs the worker's installation, the parsing above does not.
    from memsync.settings import Settings
    from pipeline.graph.reader import agent_commitments
    from pipeline.graph.schema import init_schema
    from pipeline.graph.store import GraphStore
    from pipeline.graph.writer import write_sync_jobs
    from workers.local import services

    path = shared_data_dir(args.data) / TAU_FILE
    trajectories: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    trajectories = trajectories[: args.limit] if args.limit else trajectories
    events = [e for n, t in enumerate(trajectories) for e in chat_events(n, t)]
    outcome = ingest_turns(events, {}, ChannelTrustPolicy())
    jobs = [job for job in outcome.jobs if job.agent.key.endswith(f":{AGENT['id']}")]
    memory = memorize(jobs, RulesExtractor(), BUILTIN_LENSES)
    items = Counter(f"{item.kind} ({item.predicate})" for _, item in memory)

    root = Path(tempfile.mkdtemp(prefix="memsync-obligations-"))
    port = services.free_port()
    neo4j = services.start_neo4j("127.0.0.1", port, root / "neo4j", Settings().state_dir)
    graph = GraphStore.connect(f"bolt://127.0.0.1:{port}", "neo4j", None, "neo4j")
    try:
        init_schema(graph)
        started = time.perf_counter()
        # Every chat in one batch: closures are resolved the same whatever the arrival order.
        write_sync_jobs(graph, jobs, memory)
        took = time.perf_counter() - started
        commitments = agent_commitments(graph, TENANT, str(AGENT["id"]))
    finally:
        graph.close()
        neo4j.stop()
        shutil.rmtree(root, ignore_errors=True)

    agent_owes = [c for c in commitments if c.owed_by_key.endswith(f":{AGENT['id']}")]
    print(f"{len(trajectories)} chats, {len(events)} turns, {len(jobs)} sync jobs")
    print(f"written in {took:.1f} s")
    print("items read:", ", ".join(f"{k} {v}" for k, v in sorted(items.items())))
    for who, found in (("the agent", agent_owes), ("everyone", commitments)):
        status = Counter(c.status for c in found)
        figures = ", ".join(f"{s} {n}" for s, n in sorted(status.items()))
        print(f"commitments owed by {who}: {len(found)} ({figures})")
    if args.show:
        for c in agent_owes:
            if c.status == args.show:
                print(f"  {c.value}")


if __name__ == "__main__":
    main()
