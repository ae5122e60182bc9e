"""Context assembly: everything an agent should be told before it answers in a channel, read
from the graph within what that channel's audience may hear, then fitted to a token budget.

- Participants present: whoever said, or (agents) observed, one of the channel's latest
  `PRESENCE_SCAN` episodes that this agent observed (SAID and OBSERVED edges of episodes IN the
  channel); the agent itself always counts. Nobody else is known to be there.
- Summary: the agent's current rolling summary of this channel (thread memory stays in it).
- Facts: current only (not superseded, not expired), about the participants present or the
  channel, under recall's audience rule (pipeline/graph/cypher/search.py `audience_filter`): a
  fact learnt elsewhere appears only when everyone here heard it there (every member here, the
  agent aside, is a member of a channel of its evidence), or it was said in public; a DM counts
  only with `dm_policy="same_people"`.
  `learnt_in` lists the channels of its evidence. Trust is as stored: an untrusted conversation
  wrote nothing for the agent, so nothing of it can appear.
- Commitments: open ones owed by or to the participants present, or to the channel; same rule.
- Memories: `recall` of `query`, scoped to this channel (none without a query: the platform has
  the recent window already), as many messages as the budget affords (`recall_limit_for`: a
  bigger budget holds more of what was said); items already shown in another section are left
  out, and so are
  the messages of the platform's recent window when it names them (`recent_ids`): the budget
  goes to what the prompt does not already hold.

The budget and its priority order are pipeline/context.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Final

from pipeline.context import DEFAULT_BUDGET_TOKENS, STALE_AFTER_DAYS, fit, is_stale
from pipeline.embedder import Embedder
from pipeline.english.reference import POINTS_BACK_MATCH
from pipeline.errors import ConfigurationError
from pipeline.graph.cypher import context as context_cypher
from pipeline.graph.retrieval import asked_line, quoted_changes
from pipeline.graph.search import DM_POLICIES, recall
from pipeline.graph.store import GraphStore, instant
from schemas.context import (
    Context,
    ContextChannel,
    ContextCommitment,
    ContextFact,
    ContextParty,
    ContextSummary,
)
from schemas.keys import channel_key, participant_key
from schemas.recall import RecallKind, RecallQuery

# Presence looks this many of the channel's latest episodes back: bounded work per call (each
# episode costs its SAID and OBSERVED edges), and who spoke further back is not "present".
PRESENCE_SCAN: Final = 200
# At most this many facts and commitments are read; the budget cuts them further.
MAX_READ: Final = 500
# Recalled memory is asked for in messages: one per RECALL_TOKENS_PER_MESSAGE tokens of the
# budget, within [MIN_RECALL_LIMIT, MAX_RECALL_LIMIT] (20 at the default 2,000). A labelled
# message takes 25-40 tokens, so memories may fill about a third of the budget, and fit() cuts
# them first when the summary, commitments and facts need the room.
RECALL_TOKENS_PER_MESSAGE: Final = 100
MIN_RECALL_LIMIT: Final = 10
MAX_RECALL_LIMIT: Final = 50
_RECALL_KINDS: Final[tuple[RecallKind, ...]] = ("episode", "fact", "commitment")


def recall_limit_for(budget_tokens: int) -> int:
    """How many messages of recalled memory a context of `budget_tokens` asks for."""
    return max(MIN_RECALL_LIMIT, min(MAX_RECALL_LIMIT, budget_tokens // RECALL_TOKENS_PER_MESSAGE))


def build_context(
    graph: GraphStore,
    tenant: str,
    agent_id: str,
    channel_id: str,
    *,
    query: str | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    embedder: Embedder | None = None,
    dm_policy: str = "never",
    recall_limit: int | None = None,
    stale_after_days: int = STALE_AFTER_DAYS,
    now: datetime | None = None,
    recent_ids: Sequence[str] = (),
) -> Context:
    """The agent's context for the channel, fitted to `budget_tokens` (see the module doc);
    `recall_limit`: messages of recalled memory to ask for (default: by the budget).
    `recent_ids`: the platform's recent window, which the rendering goes in front of; memories
    never repeat those messages."""
    if dm_policy not in DM_POLICIES:
        raise ConfigurationError(
            f"dm_memory_policy must be one of {', '.join(DM_POLICIES)} (got {dm_policy!r})"
        )
    if budget_tokens < 0:
        raise ConfigurationError(f"budget_tokens must be at least 0 (got {budget_tokens})")
    now = now or datetime.now(UTC)
    recall_query = (
        RecallQuery(
            tenant=tenant,
            agent_id=agent_id,
            channel_id=channel_id,
            query=query,
            limit=recall_limit if recall_limit is not None else recall_limit_for(budget_tokens),
            # This channel's summary is its own section already; recall never adds another.
            kinds=_RECALL_KINDS,
            exclude_ids=tuple(recent_ids),
        )
        if query and query.strip()
        else None
    )
    agent_key = participant_key(tenant, agent_id)
    chan_key = channel_key(tenant, channel_id)
    params: dict[str, Any] = {
        "tenant": tenant,
        "agent_key": agent_key,
        "channel_key": chan_key,
        "dm_policy": dm_policy,
        "now": now,
        "scan": PRESENCE_SCAN,
        "limit": MAX_READ,
        "points_back": POINTS_BACK_MATCH,
    }
    # Recall is independent of the rest: it runs in a thread of its own (with its own
    # sessions) while the channel, its people, facts, commitments and summary are read here in
    # one statement.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsync-context") as pool:
        recalled = (
            pool.submit(recall, graph, recall_query, embedder=embedder, dm_policy=dm_policy)
            if recall_query is not None
            else None
        )
        structure = _structure(
            graph, params, agent_id, channel_id, now=now, stale_after_days=stale_after_days
        )
        found = recalled.result() if recalled is not None else []
    agent, parties, channel, facts, commitments, summary = structure
    shown = {f.key for f in facts} | {c.key for c in commitments}
    if summary is not None:
        shown.add(summary.key)
    memories = [item for item in found if item.key not in shown]
    return fit(
        Context(
            tenant=tenant,
            agent=agent,
            channel=channel,
            query=query if recall_query is not None else None,
            summary=summary,
            participants=list(parties.values()),
            commitments=commitments,
            facts=facts,
            memories=memories,
            stale_after_days=stale_after_days,
            budget_tokens=budget_tokens,
        )
    )


def _structure(
    graph: GraphStore,
    params: dict[str, Any],
    agent_id: str,
    channel_id: str,
    *,
    now: datetime,
    stale_after_days: int,
) -> tuple[
    ContextParty,
    dict[str, ContextParty],
    ContextChannel,
    list[ContextFact],
    list[ContextCommitment],
    ContextSummary | None,
]:
    """The agent, who is present, the channel, the current facts and open commitments about
    them (and the channel) that its audience may hear, and the agent's summary of it."""
    agent_key, chan_key = params["agent_key"], params["channel_key"]
    with graph.session(write=False) as session:
        # No temporal values come back (cypher/instant.py): the rows are used as read.
        info = dict(session.run(context_cypher.STRUCTURE, params).single(strict=True))
    parties = {row["key"]: _party(row) for row in info["present"]}
    agent = parties.get(agent_key) or ContextParty(
        id=agent_id, label=info["agent_label"] or agent_id, is_agent=True
    )
    parties.setdefault(agent_key, agent)
    channel = ContextChannel(id=channel_id, kind=info["kind"], title=info["title"])
    fact_rows, commitment_rows = info["facts"], info["commitments"]
    here = ContextParty(id=channel_id, label=f"everyone in {channel.name}")
    facts = [
        _fact(row, parties, chan_key, here, now=now, stale_after_days=stale_after_days)
        for row in fact_rows
    ]
    commitments = [_commitment(row) for row in commitment_rows]
    return agent, parties, channel, facts, commitments, _summary(info["summary"])


def _summary(rows: list[dict[str, Any]]) -> ContextSummary | None:
    """The summary row (at most one), unless nothing was folded yet or it says nothing."""
    if not rows or not (rows[0]["text"] or "").strip():
        return None
    row = rows[0]
    return ContextSummary(
        key=row["key"],
        text=row["text"],
        version=row["version"],
        covers_until=instant(row["covers_until"]),
    )


def _party(row: dict[str, Any]) -> ContextParty:
    return ContextParty(
        id=row["id"], label=row["label"] or row["id"], is_agent=bool(row["is_agent"])
    )


def _fact(
    row: dict[str, Any],
    subjects: dict[str, ContextParty],
    chan_key: str,
    here: ContextParty,
    *,
    now: datetime,
    stale_after_days: int,
) -> ContextFact:
    subject = here if row["subject_key"] == chan_key else subjects[row["subject_key"]]
    last_confirmed = instant(row["last_confirmed"])
    return ContextFact(
        key=row["key"],
        subject_id=subject.id,
        subject_label=subject.label,
        text=row["text"] or "",
        source=row["source"],
        stated_by_id=row["stated_by_id"],
        stated_by_label=row["stated_by_label"],
        stated_at=instant(row["stated_at"]),
        last_confirmed=last_confirmed,
        stale=is_stale(last_confirmed, now, stale_after_days),
        learnt_in=list(row["learnt_in"]),
        evidence=list(row["evidence"]),
    )


def _commitment(row: dict[str, Any]) -> ContextCommitment:
    owed_to = None
    if row["to_id"] is not None:
        label = f"everyone in #{row['to_id']}" if row["to_channel"] else row["to_label"]
        owed_to = ContextParty(id=row["to_id"], label=label or row["to_id"])
    return ContextCommitment(
        key=row["key"],
        text=row["text"] or "",
        owed_by=ContextParty(
            id=row["by_id"], label=row["by_label"] or row["by_id"], is_agent=bool(row["by_agent"])
        ),
        owed_to=owed_to,
        due=instant(row["due"]),
        opened_at=instant(row["opened_at"]),
        source=row["source"],
        learnt_in=list(row["learnt_in"]),
        evidence=list(row["evidence"]),
        in_reply_to=asked_line(row["asked"]),
        changed=quoted_changes(row),
    )
