"""Forgetting a participant, an agent or a channel: what goes, in which order, in bounded batches.

Each run: (1) the erasure record is committed first (for a participant, the tombstone the sync
writer respects), (2) the run waits until every transaction that was running has ended, so no
sync that missed the tombstone is still writing, (3) memory is deleted in batches of at most
`batch` nodes, one `execute_write` each, with supersession and commitment status repaired in the
same transaction, (4) the summaries that held the subject's words are rebuilt from the raw
episodes left (the re-anchoring rebuild of the configured summarizer), each under its fold lock,
and the segments that held them are rebuilt from what is left, (5) the subject's node goes,
and (6) the record gets the run's counts. A second run deletes
nothing and says so; one cut short finishes what its record still lists as pending.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import neo4j
from pydantic import BaseModel, ConfigDict

from pipeline.errors import PermanentError
from pipeline.graph import erasure as records
from pipeline.graph.cypher import forget as forget_cypher
from pipeline.graph.pruning import delete_memory
from pipeline.graph.segments import repair_segments
from pipeline.graph.store import GraphStore
from pipeline.graph.summaries import (
    NewSummary,
    Position,
    channel_episodes,
    current_summary_by_key,
    summary_key,
    summary_props,
)
from pipeline.summarize import Summarizer
from schemas.keys import channel_key as make_channel_key
from schemas.keys import participant_key

DEFAULT_BATCH = 500
DEFAULT_BARRIER_SECONDS = 120.0
# A rebuild that keeps meeting a newer version (a fold that outlived its lock) is left pending.
REBUILD_ATTEMPTS = 3

# (agent key, channel key) -> a context manager holding that pair's fold lock; it yields
# whether the lock was taken.
PairLock = Callable[[str, str], AbstractContextManager[bool]]

KINDS: dict[records.Scope, tuple[str, ...]] = {
    "participant": (
        "episodes",
        "facts",
        "facts_reattributed",
        "commitments",
        "closures",
        "summary_versions",
        "summaries_rebuilt",
        "segments_repaired",
        "participants",
    ),
    "agent": (
        "observed",
        "episodes",
        "facts",
        "commitments",
        "closures",
        "summary_versions",
        "summaries_rebuilt",
        "segments_repaired",
        "agents",
    ),
    "channel": (
        "episodes",
        "facts",
        "commitments",
        "closures",
        "summary_versions",
        "summaries_rebuilt",
        "segments_repaired",
        "channels",
    ),
}


class UnknownSubject(PermanentError):
    """Nothing is known of the participant, agent or channel, and it was never forgotten."""


class WrongKind(PermanentError):
    """The id names another kind of subject (an agent given as --participant, say)."""


class ForgetReport(BaseModel):
    """What one run deleted, per kind, and whether it finished everything."""

    model_config = ConfigDict(frozen=True)

    scope: records.Scope
    tenant: str
    subject_hash: str
    run: int
    counts: dict[str, int]
    # False: some transaction running at the tombstone outlived the wait; run it again.
    barrier_ok: bool
    # Summary pairs not rebuilt (their fold lock was busy); a second run finishes them.
    pending_pairs: list[str]

    @property
    def complete(self) -> bool:
        return self.barrier_ok and not self.pending_pairs

    @property
    def deleted(self) -> int:
        return sum(v for k, v in self.counts.items() if k != "summaries_rebuilt")


@dataclass(frozen=True)
class Forgetter:
    """How forgetting runs: the summarizer for rebuilds, fold locks, batch size and the wait."""

    graph: GraphStore
    summarizer: Summarizer
    summarizer_name: str = "extractive"
    # A rebuilt summary reads the last this-many tokens of raw episodes (None: all), as a
    # re-anchor does (Settings.summary_reanchor_tokens).
    reanchor_tokens: int | None = None
    # None rebuilds summaries without fold locks (one process, nothing folding meanwhile).
    pair_lock: PairLock | None = None
    batch: int = DEFAULT_BATCH
    barrier_seconds: float = DEFAULT_BARRIER_SECONDS
    command: str = "memsync forget"

    def participant(self, tenant: str, participant_id: str) -> ForgetReport:
        """Forget what a person said and what is known about them, in every agent's memory."""
        key = participant_key(tenant, participant_id)
        found = self._one(forget_cypher.FIND_PARTICIPANT, key)
        if found is not None and found["agent"]:
            raise WrongKind(f"{participant_id!r} is an agent; forget it with --agent")
        return self._run(tenant, "participant", key, participant_id, found is not None)

    def agent(self, tenant: str, agent_id: str) -> ForgetReport:
        """Forget an agent's whole memory: what it observed, knows and summarised, and its node."""
        key = participant_key(tenant, agent_id)
        found = self._one(forget_cypher.FIND_PARTICIPANT, key)
        if found is not None and not found["agent"]:
            raise WrongKind(f"{agent_id!r} is not an agent; forget it with --participant")
        return self._run(tenant, "agent", key, agent_id, found is not None)

    def channel(self, tenant: str, channel_id: str) -> ForgetReport:
        """Forget a channel: its episodes, its summaries, memory learnt only there, its node."""
        key = make_channel_key(tenant, channel_id)
        found = self._one(forget_cypher.FIND_CHANNEL, key)
        return self._run(tenant, "channel", key, channel_id, found is not None)

    # -- the run ---------------------------------------------------------------------------------

    def _run(
        self, tenant: str, scope: records.Scope, key: str, shown: str, present: bool
    ) -> ForgetReport:
        if not present and not records.erasure_exists(self.graph, tenant, scope, key):
            raise UnknownSubject(f"no {scope} {shown!r} in tenant {tenant!r}: nothing to forget")
        previous = records.previous_totals(self.graph, tenant, scope, key)
        run = records.record_erasure(
            self.graph, tenant, scope, key, self.command, blocking=scope == "participant"
        )
        barrier_ok = records.wait_for_running_transactions(self.graph, self.barrier_seconds)
        pairs_query = {
            "participant": forget_cypher.PARTICIPANT_PAIRS,
            "agent": forget_cypher.AGENT_PAIRS,
            "channel": forget_cypher.CHANNEL_PAIRS,
        }[scope]
        pairs = [f"{r['agent_key']} {r['channel_key']}" for r in self._rows(pairs_query, key=key)]
        records.add_pending_pairs(self.graph, tenant, scope, key, pairs)
        counts: Counter[str] = Counter({kind: 0 for kind in KINDS[scope]})
        if scope == "participant":
            self._forget_participant_memory(tenant, key, counts)
        elif scope == "agent":
            self._forget_agent_memory(key, counts)
        else:
            self._drain(forget_cypher.CHANNEL_EPISODES, key, counts, cited=True)
        left = self._rebuild_pairs(
            tenant, records.pending_pairs(self.graph, tenant, scope, key), counts
        )
        # Segments held the erased words too (pipeline/graph/segments.py).
        counts["segments_repaired"] += repair_segments(self.graph, tenant)
        if scope == "participant":
            counts["participants"] += self._count(forget_cypher.DELETE_PARTICIPANT, key=key)
        elif scope == "agent":
            counts["agents"] += self._count(forget_cypher.DELETE_AGENT, key=key)
        else:
            counts["channels"] += self._count(forget_cypher.DELETE_CHANNEL, key=key)
        records.finish_erasure(
            self.graph,
            tenant,
            scope,
            key,
            command=self.command,
            counts=counts,
            pending=left,
            previous=previous,
        )
        return ForgetReport(
            scope=scope,
            tenant=tenant,
            subject_hash=records.subject_hash(scope, key),
            run=run,
            counts=dict(counts),
            barrier_ok=barrier_ok,
            pending_pairs=left,
        )

    def _forget_participant_memory(self, tenant: str, key: str, counts: Counter[str]) -> None:
        agents = [r["key"] for r in self._rows(forget_cypher.TENANT_AGENTS, tenant=tenant)]
        params = {"key": key, "agents": agents}
        self._select_and_delete(forget_cypher.FACTS_ABOUT, "facts", params, counts)
        self._select_and_delete(forget_cypher.COMMITMENTS_OF, "commitments", params, counts)
        self._select_and_delete(forget_cypher.CLOSURES_OF, "closures", params, counts)
        # Before their episodes go: the other evidence is what the credit moves to.
        counts["facts_reattributed"] += self._loop(
            lambda tx: int(
                tx.run(forget_cypher.REATTRIBUTE_FACTS, key=key, batch=self.batch).single(
                    strict=True
                )["changed"]
            )
        )
        self._drain(forget_cypher.PARTICIPANT_EPISODES, key, counts, cited=True)

    def _forget_agent_memory(self, key: str, counts: Counter[str]) -> None:
        params = {"key": key}
        self._select_and_delete(forget_cypher.AGENT_FACTS, "facts", params, counts)
        self._select_and_delete(forget_cypher.AGENT_COMMITMENTS, "commitments", params, counts)
        self._select_and_delete(forget_cypher.AGENT_CLOSURES, "closures", params, counts)

        def unobserve(tx: neo4j.ManagedTransaction) -> Counter[str]:
            record = tx.run(forget_cypher.AGENT_OBSERVED, key=key, batch=self.batch).single(
                strict=True
            )
            done: Counter[str] = Counter(observed=int(record["deleted"]))
            if record["episodes"]:
                orphans = tx.run(forget_cypher.ORPHAN_EPISODES, keys=record["episodes"])
                done["episodes"] += int(orphans.single(strict=True)["deleted"])
            return done

        self._loop_counts(unobserve, "observed", counts)

    # -- batches -------------------------------------------------------------------------------

    def _select_and_delete(
        self, select: str, kind: str, params: dict[str, Any], counts: Counter[str]
    ) -> None:
        """Select up to `batch` keys of one kind and delete them (with repairs), per transaction,
        until none is left."""

        def work(tx: neo4j.ManagedTransaction) -> Counter[str]:
            keys = list(tx.run(select, **params, batch=self.batch).single(strict=True)["keys"])
            if not keys:
                return Counter()
            done = delete_memory(
                tx,
                facts=keys if kind == "facts" else None,
                commitments=keys if kind == "commitments" else None,
                closures=keys if kind == "closures" else None,
                everything=True,
            )
            done["_selected"] = len(keys)
            return done

        self._loop_counts(work, "_selected", counts)

    def _drain(self, statement: str, key: str, counts: Counter[str], *, cited: bool) -> None:
        """Delete a subject's episodes batch by batch, with the memory left without evidence."""

        def work(tx: neo4j.ManagedTransaction) -> Counter[str]:
            record = tx.run(statement, key=key, batch=self.batch).single(strict=True)
            done: Counter[str] = Counter(episodes=int(record["deleted"]))
            if cited:
                done += delete_memory(
                    tx,
                    facts=list(record["facts"]),
                    commitments=list(record["commitments"]),
                    closures=list(record["closures"]),
                    everything=False,
                )
            return done

        self._loop_counts(work, "episodes", counts)

    def _loop_counts(
        self,
        work: Callable[[neo4j.ManagedTransaction], Counter[str]],
        progress: str,
        counts: Counter[str],
    ) -> None:
        with self.graph.session() as session:
            while True:
                done: Counter[str] = session.execute_write(work)
                moved = done.pop(progress, 0) if progress.startswith("_") else done[progress]
                counts.update(done)
                if not moved:
                    return

    def _loop(self, work: Callable[[neo4j.ManagedTransaction], int]) -> int:
        total = 0
        with self.graph.session() as session:
            while moved := session.execute_write(work):
                total += moved
        return total

    # -- summaries -----------------------------------------------------------------------------

    def _rebuild_pairs(self, tenant: str, pairs: Iterable[str], counts: Counter[str]) -> list[str]:
        """Rebuild each pair's summary under its fold lock; the pairs left (lock busy)."""
        left: list[str] = []
        for pair in sorted(set(pairs)):
            agent_key, channel_key = pair.split(" ", 1)
            if self.pair_lock is None:
                done = rebuild_summary(self, tenant, agent_key, channel_key)
            else:
                with self.pair_lock(agent_key, channel_key) as taken:
                    done = rebuild_summary(self, tenant, agent_key, channel_key) if taken else None
            if done is None:
                left.append(pair)
                continue
            counts["summary_versions"] += done[0]
            counts["summaries_rebuilt"] += done[1]
        return left

    # -- small helpers -------------------------------------------------------------------------

    def _rows(self, statement: str, **params: Any) -> list[dict[str, Any]]:
        with self.graph.session(write=False) as session:
            return session.execute_read(lambda tx: [dict(r) for r in tx.run(statement, **params)])

    def _one(self, statement: str, key: str) -> dict[str, Any] | None:
        rows = self._rows(statement, key=key)
        return rows[0] if rows else None

    def _count(self, statement: str, **params: Any) -> int:
        with self.graph.session() as session:
            record = session.execute_write(lambda tx: tx.run(statement, **params).single())
        return int(record["deleted"]) if record is not None else 0


def rebuild_summary(
    forgetter: Forgetter, tenant: str, agent_key: str, channel_key: str
) -> tuple[int, int] | None:
    """Replace every version of (agent, channel)'s summary by one rebuilt from the raw episodes
    still there (none left: no summary); (versions removed, versions written), or None if a
    newer version kept appearing."""
    graph = forgetter.graph
    summarizer = forgetter.summarizer
    for _ in range(REBUILD_ATTEMPTS):
        current = current_summary_by_key(graph, tenant, agent_key, channel_key)
        with graph.session(write=False) as session:
            versions = int(
                session.run(
                    forget_cypher.SUMMARY_VERSIONS, agent_key=agent_key, channel_key=channel_key
                ).single(strict=True)["versions"]
            )
        if current is None and versions == 0:
            return 0, 0
        raw = (
            channel_episodes(
                graph,
                agent_key,
                channel_key,
                until=current.position,
                last_tokens=forgetter.reanchor_tokens,
            )
            if current is not None
            else []
        )
        expected = current.version if current else 0
        props: dict[str, Any] | None = None
        key = None
        if raw:
            # The summarizer runs here, outside any transaction (it may call a model).
            new = NewSummary(
                tenant=tenant,
                agent_key=agent_key,
                channel_key=channel_key,
                expected_version=expected,
                text=summarizer.rebuild(raw),
                covers_until=Position(created_at=raw[-1].created_at, key=raw[-1].key),
                folds_since_anchor=0,
                anchored=True,
                summarizer=forgetter.summarizer_name,
            )
            props = summary_props(new, expected + 1)
            key = summary_key(agent_key, channel_key, expected + 1)
        params = {
            "agent_key": agent_key,
            "channel_key": channel_key,
            "expected_version": expected,
            "props": props,
            "key": key,
        }
        with graph.session() as session:
            record = session.execute_write(_replace_summary, params)
        if record is not None:
            return int(record["removed"]), int(record["written"])
    return None


def _replace_summary(tx: neo4j.ManagedTransaction, params: dict[str, Any]) -> neo4j.Record | None:
    return tx.run(forget_cypher.REPLACE_SUMMARY, **params).single()
