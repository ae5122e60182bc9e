"""A recall's answer from what its search found: the candidate messages scored for the question
(pipeline/scores.py), the budget filled (pipeline/rank.py) and the chosen shown as windows
(pipeline/windows.py), as RecallItems. Pure: graph/search.py does the reading.

The choice is kept apart from the scoring (`Scored.items`) so that a whole-memory recall can lead
with a window chosen by a second search held to one channel and fill the rest of its budget from
the first search, with the messages that window shows already spent (graph/search.py, `recall`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.graph.retrieval import Rows, asked_line, quoted_changes
from pipeline.rank import Passage, Unit, runs, select
from pipeline.scores import score_messages
from pipeline.windows import Window, follow_revisions, group
from schemas.recall import Change, RecallItem, RecallKind, RecallQuery


@dataclass(frozen=True)
class Scored:
    """Every candidate of one search scored for its question, not yet chosen."""

    query: RecallQuery
    rows: Rows
    units: list[Unit]
    stretches: list[list[str]]
    passages: dict[str, Passage]
    matched: list[str]
    later: dict[str, list[str]]
    changed: dict[str, list[Change]]

    def items(self, shown: Collection[str] = ()) -> list[RecallItem]:
        """The best candidates within the query's budget, as items, best first; `shown`: ids of
        messages already shown beside them, which count against the budget and are not shown
        again (they have lent their neighbours relevance already)."""
        taken = set(shown)
        units = [u for u in self.units if u.message is None or u.message.id not in taken]
        chosen = select(units, self.query.limit, self.stretches, shown=taken)
        excluded = set(self.query.exclude_ids) | taken
        windows = follow_revisions(
            group(chosen, self.stretches, self.matched),
            self.later,
            {key: p for key, p in self.passages.items() if p.id not in excluded},
            self.stretches,
        )
        return [_finish(item, self.rows, self.changed) for item in windows]


def score_candidates(
    query: RecallQuery,
    relevance: dict[str, float],
    rows: Rows,
    hits: Sequence[str],
    around: list[dict[str, Any]],
    *,
    passed: dict[str, float],
    changed: dict[str, list[Change]],
    replaced_by: dict[str, list[str]],
    replacing: Sequence[dict[str, Any]],
) -> Scored:
    """Score the hits, their neighbours and the messages of `replacing` (fetched for the values
    they replaced) for the question (pipeline/scores.py), ready to fill the budget."""
    passages = {key: _passage(rows[key][1]) for key in hits}
    sequences: dict[str, list[Passage]] = {key: [passages[key]] for key in hits}
    for row in around:
        passages.setdefault(row["key"], _passage(row))
        rows.setdefault(row["key"], ("episode", row))
        sequences[row["hit_key"]].append(passages[row["key"]])
    for row in replacing:
        passages.setdefault(row["key"], _passage(row))
        rows.setdefault(row["key"], ("episode", row))
        sequences.setdefault(row["key"], [passages[row["key"]]])
    stretches = runs(
        passages, ([p.key for p in sorted(seq, key=_order)] for seq in sequences.values())
    )
    scores, later = score_messages(
        query.query or "",
        passages,
        stretches,
        relevance,
        passed=passed,
        radius=query.neighbours,
        replaced_by=replaced_by,
    )
    excluded = set(query.exclude_ids)
    units = [
        Unit(key, scores[key], (p.id,), message=p, found=key in relevance)
        for key, p in passages.items()
        if p.id not in excluded
    ]
    units += [
        # A summary row has no evidence column (it rests on no single message).
        Unit(key, value, tuple(rows[key][1].get("evidence") or ()))
        for key, value in relevance.items()
        if rows[key][0] != "episode"
    ]
    matched = [key for key in passages if relevance.get(key, 0.0) > 0.0]
    return Scored(query, rows, units, stretches, passages, matched, later, changed)


def _order(p: Passage) -> tuple[str, Any, str]:
    return p.order


def _passage(row: dict[str, Any]) -> Passage:
    return Passage(
        key=row["key"],
        id=row["id"],
        channel=row["channel_key"] or "",
        at=row["created_at"],
        speaker_label=row["speaker_label"],
        text=row["text"] or "",
    )


def _memory_item(kind: RecallKind, row: dict[str, Any], score: float) -> RecallItem:
    return RecallItem(
        kind=kind,
        key=row["key"],
        text=row["text"] or "",
        score=score,
        evidence=list(row.get("evidence") or []),
        channel_id=row.get("channel_id"),
        speaker_label=row.get("speaker_label"),
        speaker_id=row.get("speaker_id"),
        created_at=row.get("created_at"),
        source=row.get("source"),
        status=row.get("status"),
        current=bool(row.get("current", True)),
        in_reply_to=asked_line(row.get("asked")),
        changed=quoted_changes(row),
    )


def _finish(shown: Unit | Window, rows: Rows, changed: dict[str, list[Change]]) -> RecallItem:
    if isinstance(shown, Unit):
        kind, row = rows[shown.key]
        return _memory_item(kind, row, shown.score)
    best = rows[shown.lead][1]
    changes: list[Change] = []
    for passage in shown.passages:
        changes.extend(c for c in changed.get(passage.key, []) if c not in changes)
    return RecallItem(
        kind="episode",
        key=shown.lead,
        text=shown.text,
        score=shown.score,
        evidence=list(shown.evidence),
        matched=[p.id for p in shown.passages if p.key in shown.hits],
        channel_id=best["channel_id"],
        speaker_label=best["speaker_label"],
        speaker_id=best["speaker_id"],
        created_at=best["created_at"],
        changed=changes,
    )
