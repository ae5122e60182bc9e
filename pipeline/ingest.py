"""Stages 1-4 composed: events in, sync jobs and an account of what was dropped and why out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from pipeline.activity import Activity, LastSpoke, find_idle
from pipeline.fanout import fan_out
from pipeline.filter import filter_turns
from pipeline.resolve import resolve_speakers
from pipeline.trust import TrustPolicy, check_trust
from schemas.event import TurnEvent
from schemas.records import (
    DroppedMessage,
    KnownParticipant,
    LabelKey,
    ResolvedTurn,
    SyncJob,
    TrustDecision,
)


class TurnAccount(BaseModel):
    """What happened to one turn: dropped messages and each agent's trust decision."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    event_id: str
    kept: int
    dropped: list[DroppedMessage]
    decisions: list[TrustDecision]
    # Trusted agents left out because they were idle in the channel (pipeline/activity.py).
    idle: list[str] = []

    @property
    def expected(self) -> int:
        """How many agents' memory of this turn will be written."""
        return sum(1 for d in self.decisions if d.trusted and d.agent_key not in self.idle)


class IngestOutcome(BaseModel):
    """The sync jobs to send, and one account per turn for operators and progress tracking."""

    model_config = ConfigDict(frozen=True)

    jobs: list[SyncJob]
    accounts: list[TurnAccount]
    # Turns no agent will remember (every agent left out): only who was there is recorded. Not
    # public ones: a public channel admits no memory from elsewhere whoever is listed in it.
    unheard: list[ResolvedTurn] = []
    # Latest message times of agents that spoke, to record for the next idle check.
    spoke: LastSpoke = {}

    def counts(self) -> Counter[str]:
        """Counters by outcome, e.g. `dropped.tool_message` or `trust.public_channel`."""
        counts: Counter[str] = Counter()
        for account in self.accounts:
            counts["events"] += 1
            counts["messages.kept"] += account.kept
            for dropped in account.dropped:
                counts[f"dropped.{dropped.reason}"] += 1
            for decision in account.decisions:
                counts[f"trust.{decision.reason}"] += 1
            if account.idle:
                counts["fanout.idle"] += len(account.idle)
        counts["sync_jobs"] += len(self.jobs)
        return counts


def ingest_turns(
    events: Sequence[TurnEvent],
    known: Mapping[str, KnownParticipant],
    policy: TrustPolicy,
    taken: Mapping[LabelKey, str] | None = None,
    activity: Activity | None = None,
) -> IngestOutcome:
    """Filter, resolve, check trust and fan out a batch of validated events.

    `taken` says who already carries each label in the graph (see `resolve.labels_needed`);
    with `activity`, agents idle in the channel past its window are left out.
    """
    trusted = check_trust(resolve_speakers(filter_turns(events), known, taken), policy)
    check = find_idle([t.turn for t in trusted], activity) if activity is not None else None
    idle = check.idle if check is not None else {}
    accounts = [
        TurnAccount(
            tenant=t.turn.tenant,
            event_id=t.turn.event_id,
            kept=len(t.turn.messages),
            dropped=t.turn.dropped,
            decisions=t.decisions,
            idle=sorted(
                d.agent_key
                for d in t.decisions
                if d.trusted and d.agent_key in idle.get((t.turn.tenant, t.turn.event_id), ())
            ),
        )
        for t in trusted
    ]
    jobs = fan_out(trusted, idle)
    heard = {(job.tenant, job.event_id) for job in jobs}
    return IngestOutcome(
        jobs=jobs,
        accounts=accounts,
        unheard=[
            t.turn
            for t in trusted
            if (t.turn.tenant, t.turn.event_id) not in heard and t.turn.channel.kind != "public"
        ],
        spoke=check.spoke if check is not None else {},
    )
