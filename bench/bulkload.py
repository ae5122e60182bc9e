"""A synthetic but realistically shaped tenant, and a bulk loader that writes it fast.

Shape (every figure is a function of the episode's global index, so a tenant grows in place):
250 channels (10 direct messages, 48 public, the rest groups); episodes come in channel-days of
40 messages (block b is channel b % 250, day b // 250), so 10k episodes touch every channel
once and 1M give each channel 100 days. A group or public channel has 5-10 human speakers from
a pool of FriendsQA and IRC names, a DM one human; 6 agents, two per group channel, three per
public one, one per DM, observe every message of their channels (each agent remembers about a
third of the tenant), and every 8th message is said by the channel's first agent. Texts are
FriendsQA utterances and IRC lines, cycled in order with distinct ids (conversations stay
coherent); every 20th IRC line and every FriendsQA question are held out as queries. Every 50th
human message gives each observing agent a preference fact about its speaker, every 200th a
commitment owed by its speaker.

Episodes and OBSERVED edges go through pipeline/graph/cypher/bulkload.py CREATE_EPISODES, which
mirrors the writer's MERGE_EPISODES + MERGE_OBSERVED (cypher/write.py) with CREATE; participants,
channels, facts and commitments go through the writer's own statements and row planning.
`shape_check` writes a sample through the real stages and writer and compares the result.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, Final

from pipeline.graph import cypher
from pipeline.graph.cypher import bulkload as bulk_cypher
from pipeline.graph.memoryrows import plan_memory
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import fingerprint
from pipeline.memorize import AgentMemory
from pipeline.resolve import identity_label
from schemas.keys import channel_key, episode_key, participant_key, scope_token
from schemas.memory import MemoryItem
from tests.datasets import FRIENDSQA_FILE, first_speaker, friends_scenes, slug

CHANNELS: Final = 250
BLOCK: Final = 40  # messages per channel-day
AGENTS: Final = 6
AI_EVERY: Final = 8
FACT_EVERY: Final = 50
COMMITMENT_EVERY: Final = 200
HOLD_OUT_EVERY: Final = 20
EPOCH: Final = datetime(2026, 1, 1, tzinfo=UTC)
IRC_LINE: Final = re.compile(r"^\[\d\d:\d\d\] <([^>]+)> (.+)$")
_WORD: Final = re.compile(r"[A-Za-z][A-Za-z']{2,}")


@dataclass(frozen=True)
class Person:
    """A participant of the synthetic tenant."""

    id: str
    kind: str
    display_name: str
    handle: str

    @property
    def label(self) -> str:
        return identity_label(self.display_name, self.handle)


@dataclass(frozen=True)
class Corpus:
    """Texts to load (in order), speaker names, and held-out query texts."""

    texts: tuple[str, ...]
    names: tuple[str, ...]
    queries: tuple[str, ...]


def load_corpus(root: Path) -> Corpus:
    """FriendsQA utterances and IRC lines from the data tree at `root` (../shared/data or the
    vendored slices); FriendsQA questions and every 20th IRC line are held out as queries."""
    import json

    texts: list[str] = []
    names: dict[str, str] = {}
    queries: list[str] = []
    for scene in friends_scenes(root):
        for utterance in scene["utterances"]:
            name = first_speaker(utterance)
            names.setdefault(slug(name), name)
            if utterance["utterance"].strip():
                texts.append(utterance["utterance"].strip())
    data = json.loads((root / FRIENDSQA_FILE).read_text(encoding="utf-8"))
    for episode in data["data"]:
        for paragraph in episode["paragraphs"]:
            queries.extend(qa["question"] for qa in paragraph.get("qas", []))
    irc = 0
    for path in sorted((root / "irc-dev").glob("*.ascii.txt")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            found = IRC_LINE.match(line)
            if not found:
                continue
            nick, text = found.group(1), found.group(2).strip()
            if not text:
                continue
            irc += 1
            if irc % HOLD_OUT_EVERY == 0:
                queries.append(text)
                continue
            names.setdefault(slug(nick), nick)
            texts.append(text)
    searchable = [q for q in queries if len(_WORD.findall(q)) >= 3]
    return Corpus(tuple(texts), tuple(names[k] for k in sorted(names)), tuple(searchable))


@dataclass(frozen=True)
class Channel:
    """One channel of the synthetic tenant: its members and the agents that observe it."""

    index: int
    id: str
    kind: str
    humans: tuple[Person, ...]
    agents: tuple[Person, ...]


class Tenant:
    """The synthetic tenant: people, channels, and episode rows by global index."""

    def __init__(self, name: str, corpus: Corpus) -> None:
        self.name = name
        self.corpus = corpus

    @cached_property
    def agents(self) -> tuple[Person, ...]:
        return tuple(Person(f"a-{n}", "agent", f"Agent {n}", f"agent{n}") for n in range(AGENTS))

    @cached_property
    def humans(self) -> tuple[Person, ...]:
        return tuple(Person(f"u-{slug(n)}", "human", n, slug(n)) for n in self.corpus.names)

    @cached_property
    def channels(self) -> tuple[Channel, ...]:
        result = []
        pool = len(self.humans)
        for c in range(CHANNELS):
            kind = "dm" if c % 25 == 0 else "public" if c % 5 == 0 else "group"
            size = 1 if kind == "dm" else 5 + c % 6
            humans = tuple(self.humans[(c * 37 + k * 101) % pool] for k in range(size))
            picks = {"dm": (0,), "group": (0, 2), "public": (0, 1, 3)}[kind]
            agents = tuple(self.agents[(c + p) % AGENTS] for p in picks)
            result.append(Channel(c, f"ch-{c:03d}", kind, humans, agents))
        return tuple(result)

    def key(self, person: Person) -> str:
        return participant_key(self.name, person.id)

    def channel_key(self, channel: Channel) -> str:
        return channel_key(self.name, channel.id)

    def participant_rows(self) -> list[dict[str, Any]]:
        """Rows for the writer's MERGE_PARTICIPANTS (as plan_batch builds them)."""
        return [
            {
                "key": self.key(p),
                "tenant": self.name,
                "id": p.id,
                "kind": p.kind,
                "display_name": p.display_name,
                "handle": p.handle,
                "label": p.label,
                "anonymous": False,
                "provisional": False,
            }
            for p in (*self.humans, *self.agents)
        ]

    def channel_rows(self) -> list[dict[str, Any]]:
        """Rows for the writer's MERGE_CHANNELS."""
        return [
            {
                "key": self.channel_key(c),
                "tenant": self.name,
                "id": c.id,
                "kind": c.kind,
                "title": f"Channel {c.index}",
            }
            for c in self.channels
        ]

    def member_rows(self) -> list[dict[str, Any]]:
        """Rows for the writer's MERGE_MEMBERS: each channel's humans and agents."""
        return [
            {"participant_key": self.key(p), "channel_key": self.channel_key(c)}
            for c in self.channels
            for p in (*c.humans, *c.agents)
        ]

    def message(self, i: int) -> tuple[Channel, Person, str, str, datetime]:
        """Episode `i`: its channel, speaker, role, text and time."""
        block, j = divmod(i, BLOCK)
        day, c = divmod(block, CHANNELS)
        channel = self.channels[c]
        if j % AI_EVERY == AI_EVERY - 1:
            speaker, role = channel.agents[0], "ai"
        else:
            speaker, role = channel.humans[(j * 3 + block) % len(channel.humans)], "human"
        at = EPOCH + timedelta(days=day, hours=c % 24, seconds=45 * j)
        return channel, speaker, role, self.corpus.texts[i % len(self.corpus.texts)], at

    def rows(
        self, start: int, stop: int, synced_at: datetime, at: datetime | None = None
    ) -> tuple[list[dict[str, Any]], list[AgentMemory]]:
        """CREATE_EPISODES rows for episodes [start, stop) and their agents' memory items;
        `at` overrides every episode's time (the lag test writes "now")."""
        rows: list[dict[str, Any]] = []
        memories: list[AgentMemory] = []
        for i in range(start, stop):
            channel, speaker, role, text, created = self.message(i)
            created = at or created
            block = i // BLOCK
            key = episode_key(self.name, channel.id, f"m{i}")
            speaker_key = self.key(speaker)
            observers = [self.key(a) for a in channel.agents]
            rows.append(
                {
                    "key": key,
                    "tenant": self.name,
                    "id": f"m{i}",
                    "role": role,
                    "content": text,
                    "speaker_label": speaker.label,
                    "speaker_key": speaker_key,
                    "speaker_id": speaker.id,
                    "fingerprint": fingerprint(speaker_key, text),
                    "channel_key": self.channel_key(channel),
                    "created_at": created,
                    "observers": observers,
                    "scope": _episode_scope(self.channel_key(channel), observers, speaker_key),
                    "synced_at": synced_at,
                    "event_id": f"ev-{block}",
                }
            )
            if role != "human":
                continue
            words = _WORD.findall(text)
            if i % FACT_EVERY == 7 and len(words) >= 2:
                value = " ".join(words[:4]).lower()
                item = MemoryItem(
                    kind="preference",
                    subject_key=speaker_key,
                    speaker_key=speaker_key,
                    evidence_key=key,
                    source="self_stated",
                    predicate="likes",
                    value=value,
                    text=f"{speaker.label} likes {value}",
                    topic=words[-1].lower(),
                    confidence=0.8,
                    stated_at=created,
                )
                memories.extend((agent, item) for agent in observers)
            if i % COMMITMENT_EVERY == 13 and len(words) >= 2:
                value = " ".join(words[:5]).lower()
                item = MemoryItem(
                    kind="commitment",
                    subject_key=speaker_key,
                    speaker_key=speaker_key,
                    evidence_key=key,
                    source="self_stated",
                    predicate="will",
                    value=value,
                    text=f"{speaker.label} will {value}",
                    confidence=0.7,
                    stated_at=created,
                    owed_by_key=speaker_key,
                    due=created + timedelta(days=2),
                )
                memories.extend((agent, item) for agent in observers)
        return rows, memories

    def raw_events(self, start: int, stop: int) -> list[dict[str, Any]]:
        """Episodes [start, stop) as turn events (one per channel-day block), for the real
        stages; blocks must be whole."""
        events = []
        for block in range(start // BLOCK, stop // BLOCK):
            messages = []
            channel = None
            for i in range(block * BLOCK, (block + 1) * BLOCK):
                channel, speaker, role, text, at = self.message(i)
                messages.append(
                    {
                        "id": f"m{i}",
                        "role": role,
                        "sender_id": speaker.id,
                        "content": text,
                        "created_at": at.isoformat(),
                    }
                )
            assert channel is not None
            people = [
                {"id": p.id, "kind": p.kind, "display_name": p.display_name, "handle": p.handle}
                for p in (*channel.humans, *channel.agents)
            ]
            events.append(
                {
                    "schema_version": 1,
                    "event_id": f"ev-{block}",
                    "tenant": self.name,
                    "channel": {
                        "id": channel.id,
                        "kind": channel.kind,
                        "title": f"Channel {channel.index}",
                    },
                    "participants": people,
                    "messages": messages,
                }
            )
        return events


def ensure_people(graph: GraphStore, tenant: Tenant) -> None:
    """Participants, agents, channels and their members, through the writer's own statements."""
    with graph.session() as session:
        session.run(cypher.MERGE_PARTICIPANTS, rows=tenant.participant_rows()).consume()
        session.run(cypher.MARK_AGENTS, keys=[tenant.key(a) for a in tenant.agents]).consume()
        session.run(cypher.MERGE_CHANNELS, rows=tenant.channel_rows()).consume()
        session.run(cypher.MERGE_MEMBERS, rows=tenant.member_rows()).consume()


def write_rows(
    graph: GraphStore, rows: Sequence[dict[str, Any]], memories: Sequence[AgentMemory]
) -> None:
    """One transaction: episodes and OBSERVED (bulk CREATE), then memory (the writer's
    statements and row planning)."""
    memory = plan_memory(memories)
    channels = sorted({row["channel_key"] for row in rows})

    def write(tx: Any) -> None:
        tx.run(bulk_cypher.CREATE_EPISODES, rows=list(rows)).consume()
        if memory.facts:
            tx.run(cypher.MERGE_FACTS, rows=memory.facts, channels=channels).consume()
            tx.run(cypher.RESTACK_FACTS, slots=memory.slots).consume()
        if memory.commitments:
            tx.run(cypher.MERGE_COMMITMENTS, rows=memory.commitments, channels=channels).consume()
        if memory.obligations:
            touched = [r["key"] for r in tx.run(cypher.RESOLVE_CLOSURES, pairs=memory.obligations)]
            tx.run(cypher.RESTATUS_COMMITMENTS, keys=sorted(touched)).consume()

    with graph.session() as session:
        session.execute_write(write)


def load(
    graph: GraphStore, tenant: Tenant, start: int, stop: int, batch: int = 5000
) -> Iterator[int]:
    """Bulk-load episodes [start, stop); yields the count loaded after each transaction."""
    ensure_people(graph, tenant)
    synced_at = datetime.now(UTC)
    for lo in range(start, stop, batch):
        hi = min(stop, lo + batch)
        rows, memories = tenant.rows(lo, hi, synced_at)
        write_rows(graph, rows, memories)
        yield hi


def shapes(graph: GraphStore, tenant: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per label set, the property names its nodes carry; per (from, type, to), the edge's."""
    with graph.session(write=False) as session:
        nodes = {
            ":".join(sorted(r["labels"])): sorted(r["props"])
            for r in session.run(bulk_cypher.NODE_SHAPES, tenant=tenant)
        }
        edges = {
            f"{':'.join(sorted(r['from']))}-{r['type']}->{':'.join(sorted(r['to']))}": sorted(
                p for p in r["props"] if p is not None
            )
            for r in session.run(bulk_cypher.RELATIONSHIP_SHAPES, tenant=tenant)
        }
    return nodes, edges


# Labels and edges whose shape must match exactly; facts and commitments carry optional
# properties that depend on what the extractor found, and go through the writer's statements.
STRICT: Final = ("Participant", "Agent:Participant", "Channel", "Episode")


def shape_check(graph: GraphStore, corpus: Corpus, episodes: int = 4 * BLOCK) -> list[str]:
    """Write the same episodes through the real stages and writer and through the bulk loader
    (two tenants) and list every difference in node and edge shape (empty: identical)."""
    from pipeline.extract import RulesExtractor
    from pipeline.graph.writer import write_sync_jobs
    from pipeline.ingest import ingest_turns
    from pipeline.lens import BUILTIN_LENSES
    from pipeline.memorize import memorize
    from pipeline.trust import DirectoryTrustPolicy
    from pipeline.validate import validate_event

    real, fast = Tenant("shape-writer", corpus), Tenant("shape-bulk", corpus)
    events = [validate_event(raw) for raw in real.raw_events(0, episodes)]
    jobs = ingest_turns(events, {}, DirectoryTrustPolicy("open", {})).jobs
    write_sync_jobs(graph, jobs, memorize(jobs, RulesExtractor(), BUILTIN_LENSES))
    for _ in load(graph, fast, 0, episodes):
        pass
    want_nodes, want_edges = shapes(graph, real.name)
    got_nodes, got_edges = shapes(graph, fast.name)
    problems = []
    for label in STRICT:
        if want_nodes.get(label) != got_nodes.get(label):
            problems.append(f"{label}: writer {want_nodes.get(label)} bulk {got_nodes.get(label)}")
    for edge in sorted(set(want_edges) | set(got_edges)):
        core = edge.split("-")[1] in ("SAID", "IN", "OBSERVED", "MEMBER_OF")
        compared = core or (edge in want_edges and edge in got_edges)
        if compared and want_edges.get(edge) != got_edges.get(edge):
            problems.append(f"{edge}: writer {want_edges.get(edge)} bulk {got_edges.get(edge)}")
    return problems


def _episode_scope(channel: str, observers: Sequence[str], speaker: str) -> str:
    """The scope terms the writer's MERGE_OBSERVED leaves on an episode, in its order: each
    observer adds the channel's, its own and the speaker's, once each."""
    terms: list[str] = []
    for agent in observers:
        for term in (
            scope_token("channel", channel),
            scope_token("agent", agent),
            scope_token("speaker", speaker),
        ):
            if term not in terms:
                terms.append(term)
    return " ".join(terms)
