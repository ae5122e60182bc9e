"""Rolling summaries in the graph: read the current one, read episodes to fold, write a version.

Versioning: one node per version. Its key carries the version number, the current one has
`current = true`, older ones are kept for audit (with their SUMMARISED and OF edges, so what an
agent was told at any time can be traced) and stop being embedded. Chosen over one node with a
version counter and a history list because (1) the current summary is one seek on the
(agent_key, channel_key, current) index, (2) two folds of the same version meet on one key,
which the uniqueness constraint serialises: that is the optimistic concurrency check, with no
lock held across the summarizer call, and (3) each version is its own full-text and vector hit
that is simply not current, instead of a growing list property rewritten on every fold.

Position: a summary covers the agent's episodes of the channel up to (covers_until,
covers_until_key) in (created_at, key) order, so two messages of the same second are never
split ambiguously. An episode that arrives late with an earlier time is not folded; the next
re-anchoring (a rebuild from the raw episodes up to the position) takes it in, if it falls within
the re-anchor's horizon (`last_tokens` of `channel_episodes`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import neo4j
from pydantic import BaseModel, ConfigDict

from pipeline.graph.cypher import summary as summary_cypher
from pipeline.graph.store import GraphStore, instant
from pipeline.summarize import EpisodeText, episode_tokens
from schemas.keys import channel_key as make_channel_key
from schemas.keys import compose_key, participant_key, scope_token

# Episodes are filtered from this time on, and up to the end; Neo4j compares no datetime with
# null, and a bound on both sides keeps the read a seek of the (channel_key, created_at) index.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_END = datetime(9999, 12, 31, tzinfo=UTC)
# Records per round trip for a read capped by tokens (see channel_episodes).
CAPPED_FETCH_SIZE = 100


class Position(BaseModel):
    """Where a summary ends: the last folded episode's time and key."""

    model_config = ConfigDict(frozen=True)

    created_at: datetime
    key: str


class SummaryView(BaseModel):
    """One version of an agent's summary of a channel."""

    model_config = ConfigDict(frozen=True)

    key: str
    tenant: str
    agent_key: str
    channel_key: str
    text: str
    version: int
    covers_until: datetime
    covers_until_key: str
    # Folds since the summary was last rebuilt from raw episodes (0: this one was).
    folds_since_anchor: int
    anchored: bool
    summarizer: str
    written_at: datetime

    @property
    def position(self) -> Position:
        return Position(created_at=self.covers_until, key=self.covers_until_key)


class NewSummary(BaseModel):
    """A version to write over `expected_version` (0: there is none yet)."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    agent_key: str
    channel_key: str
    expected_version: int
    text: str
    covers_until: Position
    folds_since_anchor: int
    anchored: bool
    summarizer: str


def summary_key(agent_key: str, channel_key: str, version: int) -> str:
    """One version's key: agent and channel keys are tenant-qualified already."""
    return compose_key(agent_key, "summary", channel_key, str(version))


def _to_datetime(value: Any) -> datetime:
    return value.to_native() if hasattr(value, "to_native") else value  # type: ignore[no-any-return]


def _view(record: neo4j.Record) -> SummaryView:
    data = dict(record)
    data["covers_until"] = _to_datetime(data["covers_until"])
    data["written_at"] = _to_datetime(data["written_at"])
    return SummaryView.model_validate(data)


def current_summary(
    graph: GraphStore, tenant: str, agent_id: str, channel_id: str
) -> SummaryView | None:
    """The current summary of (agent, channel) by their ids, or None (nothing folded yet)."""
    return current_summary_by_key(
        graph, tenant, participant_key(tenant, agent_id), make_channel_key(tenant, channel_id)
    )


def current_summary_by_key(
    graph: GraphStore, tenant: str, agent_key: str, channel_key: str
) -> SummaryView | None:
    """The current summary of (agent, channel) by their graph keys, or None."""
    with graph.session(write=False) as session:
        record = session.execute_read(
            lambda tx: tx.run(
                summary_cypher.CURRENT_SUMMARY,
                tenant=tenant,
                agent_key=agent_key,
                channel_key=channel_key,
            ).single()
        )
    return _view(record) if record is not None else None


def summary_history(
    graph: GraphStore, tenant: str, agent_key: str, channel_key: str
) -> list[SummaryView]:
    """Every version of an agent's summary of a channel, oldest first."""
    with graph.session(write=False) as session:
        records = session.execute_read(
            lambda tx: list(
                tx.run(
                    summary_cypher.SUMMARY_HISTORY,
                    tenant=tenant,
                    agent_key=agent_key,
                    channel_key=channel_key,
                )
            )
        )
    return [_view(r) for r in records]


def _read_episodes(
    tx: neo4j.ManagedTransaction,
    *,
    agent_key: str,
    channel_key: str,
    after: Position | None,
    until: Position | None,
    token_cap: int | None,
    newest_first: bool,
) -> list[EpisodeText]:
    result = tx.run(
        summary_cypher.CHANNEL_EPISODES_BACK if newest_first else summary_cypher.CHANNEL_EPISODES,
        agent_key=agent_key,
        channel_key=channel_key,
        from_time=after.created_at if after else _EPOCH,
        to_time=until.created_at if until else _END,
        after_time=after.created_at if after else None,
        after_key=after.key if after else None,
        until_time=until.created_at if until else None,
        until_key=until.key if until else None,
    )
    episodes: list[EpisodeText] = []
    tokens = 0
    for record in result:
        episode = EpisodeText(
            key=record["key"],
            speaker_label=record["speaker_label"] or "",
            content=record["content"] or "",
            created_at=instant(int(record["created_at"])),
        )
        episodes.append(episode)
        tokens += episode_tokens(episode)
        if token_cap is not None and tokens > token_cap:
            break  # the rest is never needed (pipeline.summarize.read_cap, or the horizon)
    if newest_first:
        episodes.reverse()
    return episodes


def channel_episodes(
    graph: GraphStore,
    agent_key: str,
    channel_key: str,
    *,
    after: Position | None = None,
    until: Position | None = None,
    token_cap: int | None = None,
    last_tokens: int | None = None,
) -> list[EpisodeText]:
    """The agent's episodes of a channel after `after` and up to `until`, in time order; with
    `token_cap`, reading stops once that many tokens are read (a long backlog stays cheap); with
    `last_tokens`, only the latest episodes up to `until` that hold that many tokens are read
    (a re-anchor's horizon: its cost does not grow with the channel)."""
    if token_cap is not None and last_tokens is not None:
        raise ValueError("token_cap reads from the oldest, last_tokens from the newest: not both")
    cap = last_tokens if last_tokens is not None else token_cap
    # A capped read stops after a few hundred episodes: pulled in small pages, the backlog
    # behind them is never sent (the driver's default page is 1,000 records).
    fetch = CAPPED_FETCH_SIZE if cap is not None else None
    with graph.session(write=False, fetch_size=fetch) as session:
        return session.execute_read(
            lambda tx: _read_episodes(
                tx,
                agent_key=agent_key,
                channel_key=channel_key,
                after=after,
                until=until,
                token_cap=cap,
                newest_first=last_tokens is not None,
            )
        )


def write_summary(graph: GraphStore, new: NewSummary) -> int | None:
    """Write `new` as the next version, in one transaction; its version, or None when the
    version it was folded from is no longer current (another fold won: nothing is written)."""
    version = new.expected_version + 1
    props = summary_props(new, version)
    # A retried transaction function reuses the token, so a retry of the winner still wins.
    token = uuid.uuid4().hex

    def work(tx: neo4j.ManagedTransaction) -> int | None:
        record = tx.run(
            summary_cypher.WRITE_SUMMARY,
            agent_key=new.agent_key,
            channel_key=new.channel_key,
            expected_version=new.expected_version,
            key=summary_key(new.agent_key, new.channel_key, version),
            props=props,
            token=token,
        ).single()
        return int(record["version"]) if record is not None else None

    with graph.session() as session:
        return session.execute_write(work)


def summary_props(new: NewSummary, version: int) -> dict[str, Any]:
    """The stored properties of `new` written as `version` (forgetting writes them too)."""
    return {
        "tenant": new.tenant,
        "agent_key": new.agent_key,
        "channel_key": new.channel_key,
        "scope": f"{scope_token('agent', new.agent_key)} {scope_token('channel', new.channel_key)}",
        "text": new.text,
        "version": version,
        "covers_until": new.covers_until.created_at,
        "covers_until_key": new.covers_until.key,
        "folds_since_anchor": new.folds_since_anchor,
        "anchored": new.anchored,
        "summarizer": new.summarizer,
        "written_at": datetime.now(UTC),
    }
