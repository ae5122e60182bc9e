"""`memsync demo`: real services and a worker play a sample conversation; show what agents keep."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from importlib.resources import files
from pathlib import Path

from memsync.producer import Producer
from memsync.reading import Memory
from memsync.settings import EMBED_QUEUE, Settings
from pipeline.embedder import make_embedder
from pipeline.graph.directory import grant_trust
from pipeline.graph.embeddings import pending_for_episodes
from pipeline.graph.reader import agent_commitments, agent_facts, list_agents, recall
from pipeline.graph.schema import init_schema
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from schemas.keys import episode_key
from workers.cli.display import describe_memory
from workers.local import services
from workers.worker import runtime

REASONS = {
    "tool_message": "tool output never becomes memory",
    "tool_call_only": "an assistant message that only calls a tool",
    "system_message": "system or developer instructions",
    "empty_text": "no text",
    "injected_context": "memory handed back as context, not new speech",
    "public_channel": "public channel: untrusted",
    "anonymous_participant": "an anonymous human is present: untrusted",
    "no_messages": "nothing left to remember after filtering",
    "untrusted_participant": "a human neither the agent nor its owner trusts: untrusted",
}

# Who vouches for whom in the demo (strict mode): owners vouch for the people they work with.
DEMO_TRUST = (
    ("u-devon", "u-sarah", "team"),
    ("u-devon", "u-priya", "team"),
    ("u-sarah", "u-devon", "team"),
    ("u-sarah", "u-priya", "team"),
    ("u-sarah", "u-sam-k", "connected"),
    ("u-sarah", "u-sam-o", "connected"),
)


def demo_events() -> list[TurnEvent]:
    text = files("workers.cli").joinpath("demo_conversation.jsonl").read_text()
    return [validate_event(line) for line in text.splitlines() if line.strip()]


def worker_env(settings: Settings) -> dict[str, str]:
    """The environment a worker process needs to reach the same services as this process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSYNC_")}
    env.update(settings.as_env())
    return env


def run_demo(settings: Settings) -> int:
    started: list[services.Service] = []
    # Services the demo starts itself keep their data in a scratch folder, so every run starts
    # from an empty graph and prints the same story.
    scratch = Path(tempfile.mkdtemp(prefix="memsync-demo-"))
    try:
        host, port = settings.broker_address()
        if not services.port_open(host, port):
            print(f"starting Redis on {host}:{port} ...")
            started.append(services.start_redis(host, port, scratch / "redis", aof=True))
        host, port = settings.neo4j_address()
        if not services.port_open(host, port):
            print(f"starting Neo4j {services.neo4j_version()} on {host}:{port} ...")
            started.append(
                services.start_neo4j(
                    host,
                    port,
                    scratch / "neo4j",
                    settings.state_dir,
                    heap_mb=settings.neo4j_heap_mb,
                    page_cache_mb=settings.neo4j_page_cache_mb,
                )
            )
        embedder = make_embedder(settings)
        # Vector indexes too (as `memsync graph init`), so recall can search by meaning.
        init_schema(runtime.graph(), vector_dimensions=embedder.dimensions if embedder else None)
        print("starting a Celery worker ...")
        log = scratch / "worker.log"
        started.append(services.start_worker(worker_env(settings), log, name="memsync-demo"))
        if embedder is not None:
            # Embedding runs on its own queue and worker, never on the sync path.
            started.append(
                services.start_worker(
                    worker_env(settings),
                    scratch / "embed-worker.log",
                    name="memsync-demo-embed",
                    queues=[EMBED_QUEUE],
                    concurrency=1,
                )
            )
        return _play(settings)
    finally:
        runtime.close()
        for service in reversed(started):
            service.stop()
        if started:
            names = ", ".join(s.name for s in reversed(started))
            print(f"stopped what the demo started: {names}")
        shutil.rmtree(scratch, ignore_errors=True)


def _play(settings: Settings) -> int:
    events = demo_events()
    tenant = events[0].tenant
    print(f"\ntrust mode {settings.trust_mode}; grants:")
    for truster, trustee, kind in DEMO_TRUST:
        grant_trust(runtime.graph(), tenant, truster, trustee, kind)
        print(f"  {truster} trusts {trustee} as {kind}")
    producer = Producer(settings)
    for event in events:
        producer.emit(event)
    producer.close(timeout=30)
    statuses = runtime.ledger().wait([(e.tenant, e.event_id) for e in events], timeout=120)
    unfinished = [s.event_id for s in statuses if not s.finished]
    humans = {p.id for e in events for p in e.participants if p.kind == "human"}
    agents = {p.id for e in events for p in e.participants if p.kind == "agent"}
    channels = {e.channel.id for e in events}
    messages = sum(len(e.messages) for e in events)
    print(
        f"\nplayed {len(events)} turns ({messages} messages) in {len(channels)} channels "
        f"with {len(humans)} humans and {len(agents)} agents\n"
    )
    graph = runtime.graph()
    lens_of = {p.id: p.lens for e in events for p in e.participants if p.kind == "agent"}
    for agent in list_agents(graph, tenant):
        episodes = recall(graph, tenant, agent.id, limit=100)
        print(f"== {agent.label} remembers {len(episodes)} episodes ==")
        for e in episodes:
            print(f"  #{e.channel_title or e.channel_id:<24} {e.speaker_label}: {e.content}")
        facts = agent_facts(graph, tenant, agent.id, include_superseded=True)
        print(f"-- and knows (lens {lens_of.get(agent.id) or 'default'}):")
        for line in describe_memory(facts, agent_commitments(graph, tenant, agent.id)):
            print(line)
        print()
    order = {e.event_id: i for i, e in enumerate(events)}
    print("== not remembered, and why ==")
    seen: set[tuple[str, ...]] = set()
    for entry in runtime.ledger().audit():
        row = (entry["event_id"], entry["kind"], entry["subject"], entry["reason"])
        if entry["tenant"] != tenant or entry["event_id"] not in order or row in seen:
            continue
        seen.add(row)
    for event_id, kind, subject, reason in sorted(seen, key=lambda r: (order[r[0]], r[2])):
        what = "message" if kind == "dropped" else "agent"
        who = subject.removeprefix(f"{tenant}:")
        print(f"  {event_id:<8} {what:<8} {who:<10} {REASONS.get(reason, reason)}")
    if settings.embedder != "none":
        _wait_for_vectors(events)
    _show_reading(settings, tenant)
    if unfinished:
        print(f"\nnot finished in time: {', '.join(unfinished)}")
        return 1
    return 0


def _wait_for_vectors(events: list[TurnEvent], timeout: float = 120.0) -> None:
    """Wait (bounded) until the embed worker has caught up, so the recall below searches by
    meaning as well as by keyword; say so when it has not."""
    keys = [episode_key(e.tenant, e.channel.id, m.id) for e in events for m in e.messages]
    deadline = time.monotonic() + timeout
    while (left := pending_for_episodes(runtime.graph(), keys)) and time.monotonic() < deadline:
        time.sleep(0.5)  # polling the embed worker's backlog, bounded by the deadline
    if left:
        print(f"\n({left} memories still wait for vectors: recall finds those by keyword only)")


def _show_reading(settings: Settings, tenant: str) -> None:
    """Memory given back: one agent's assembled context for a channel, and one recall."""
    # Two queries, then the demo exits: the one-shot embedder is ready soonest.
    embedder = make_embedder(settings, use="once")
    memory = Memory(runtime.graph(), embedder=embedder, dm_policy=settings.dm_memory_policy)
    context = memory.build_context(
        "a-travel", "ch-trip", tenant=tenant, query="seat budget", budget_tokens=600
    )
    print("\n== what Travel Agent is told before answering in #ch-trip (memsync context) ==")
    for message in context.render():
        print(f"[{message['role']}]")
        print("\n".join(f"  {line}" for line in message["content"].splitlines()))
    print(f"({context.used_tokens} of {context.budget_tokens} tokens)")
    query = "what is the budget"
    print(f"\n== Finance recalls {query!r} in #ch-trip (memsync recall) ==")
    items = memory.recall(tenant=tenant, agent_id="a-finance", channel_id="ch-trip", query=query)
    for item in items:
        text = item.attributed().replace("\n", " | ")
        print(f"  {item.score:.3f} {item.kind:<10} {text}  (evidence: {', '.join(item.evidence)})")
        for change in item.changed:
            print(f"        ({change.note()})")
