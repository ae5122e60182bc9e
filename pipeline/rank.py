"""Ranking for recall, without I/O: reciprocal rank fusion, neighbour windows, a message budget.

Windows: a hit and its neighbours (the messages just before and after it in its channel) become
one item whose evidence lists every message id and whose text shows them in order. Measured on
long conversations, the message answering a question often sits next to the one that matches
it (BM25 recall@10 0.58 over single messages, 0.69 over ±1 windows). Keeping the neighbours
inside the hit's item, rather than as separate items, lets overlapping windows merge and lets
the budget count each message once.

Budget: `limit` counts messages, not items. An item costs the messages it brings that earlier
items did not (at least one if it rests on none), so a long evidence list never buys recall;
a window that does not fit loses its farthest neighbours first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, TypeVar

# The constant of reciprocal rank fusion (Cormack et al. 2009): damps the weight of top ranks so
# one list cannot dominate.
RRF_K = 60


def fuse(
    rankings: Iterable[Sequence[str]], *, k: int = RRF_K, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Reciprocal rank fusion: each key scores the sum of weight / (k + rank) over the lists.

    Ranks start at 1; a key repeated within one list counts at its best rank only.
    """
    scores: dict[str, float] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        seen: set[str] = set()
        for rank, key in enumerate(ranking, start=1):
            if key in seen:
                continue
            seen.add(key)
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return scores


@dataclass(frozen=True)
class Passage:
    """One remembered message as ranking sees it."""

    key: str
    id: str
    channel: str
    at: datetime
    speaker_label: str | None
    text: str

    @property
    def line(self) -> str:
        """The message with its speaker, as a window shows it."""
        return f"{self.speaker_label}: {self.text}" if self.speaker_label else self.text

    @property
    def order(self) -> tuple[datetime, str]:
        return (self.at, self.key)


@dataclass(frozen=True)
class Window:
    """Hits from one channel with their neighbours, in time order, scored by its lead (best) hit."""

    passages: tuple[Passage, ...]
    hits: frozenset[str]
    score: float
    lead: str

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.passages)

    @property
    def best(self) -> Passage:
        """The best-scoring hit, which the window is named after."""
        return next(p for p in self.passages if p.key == self.lead)

    @property
    def text(self) -> str:
        if len(self.passages) == 1:
            return self.passages[0].text
        return "\n".join(p.line for p in self.passages)

    def shrink(self) -> Window | None:
        """This window less one message: the neighbour farthest from any hit, then (only hits
        left) the hit farthest from the lead. None once the lead stands alone."""
        if len(self.passages) <= 1:
            return None
        keys = [p.key for p in self.passages]
        others = [i for i, key in enumerate(keys) if key not in self.hits]
        if others:
            anchors = [i for i, key in enumerate(keys) if key in self.hits]
        else:
            others = [i for i, key in enumerate(keys) if key != self.lead]
            anchors = [keys.index(self.lead)]
        # On a tie the earlier message goes: an answer tends to follow what it answers.
        farthest = max(others, key=lambda i: (min(abs(i - a) for a in anchors), -i))
        kept = self.passages[:farthest] + self.passages[farthest + 1 :]
        return replace(self, passages=kept, hits=self.hits - {keys[farthest]})


@dataclass
class _Group:
    run: list[Passage]
    hits: set[str]
    score: float
    lead: str

    def absorb(self, other: _Group) -> None:
        keys = {p.key for p in self.run}
        self.run = sorted(self.run + [p for p in other.run if p.key not in keys], key=_order)
        self.hits |= other.hits
        if other.score > self.score:
            self.score, self.lead = other.score, other.lead

    def window(self) -> Window:
        return Window(tuple(self.run), frozenset(self.hits), self.score, self.lead)


def _order(p: Passage) -> tuple[datetime, str]:
    return p.order


def windows(
    hits: Mapping[str, float],
    passages: Mapping[str, Passage],
    neighbours: Mapping[str, Sequence[str]],
) -> list[Window]:
    """Group each hit with its neighbours; windows of one channel that overlap merge into one
    (so no message is shown twice). Best first.

    `hits` maps passage keys to fused scores, `neighbours` maps a hit to its neighbours' keys
    (both sides), `passages` holds every passage named.
    """
    by_channel: dict[str, list[_Group]] = {}
    for hit, score in hits.items():
        if hit not in passages:
            continue
        members = {hit, *neighbours.get(hit, ())}
        run = sorted((passages[k] for k in members if k in passages), key=_order)
        by_channel.setdefault(run[0].channel, []).append(_Group(run, {hit}, score, hit))
    merged: list[Window] = []
    for groups in by_channel.values():
        groups.sort(key=lambda g: (g.run[0].order, -g.score))
        current: _Group | None = None
        for group in groups:
            if current is not None and _overlap(current.run, group.run):
                current.absorb(group)
                continue
            if current is not None:
                merged.append(current.window())
            current = group
        if current is not None:
            merged.append(current.window())
    merged.sort(key=lambda w: (-w.score, w.best.order))
    return merged


def _overlap(left: Sequence[Passage], right: Sequence[Passage]) -> bool:
    """Whether two time-sorted groups of one channel share a stretch of time (and so messages).

    Groups that merely follow each other stay apart: messages the agent never observed may lie
    between them.
    """
    return right[0].order <= left[-1].order


class Budgeted(Protocol):
    """A ranked candidate the budget can count and, if it allows, shrink."""

    @property
    def score(self) -> float: ...

    @property
    def evidence(self) -> tuple[str, ...]: ...


C = TypeVar("C", bound=Budgeted)


def within_budget(
    candidates: Sequence[C], budget: int, *, shrink: Callable[[C], C | None] | None = None
) -> list[C]:
    """The best candidates whose messages fit in `budget`, best first.

    A candidate costs its evidence not already counted (at least one message when it rests on
    none); one that does not fit is shrunk while `shrink` allows, else skipped for smaller ones.
    """
    chosen: list[C] = []
    used: set[str] = set()
    left = budget
    for candidate in sorted(candidates, key=lambda c: -c.score):
        if left <= 0:
            break
        current: C | None = candidate
        while current is not None and _cost(current, used) > left:
            current = shrink(current) if shrink is not None else None
        if current is None:
            continue
        left -= _cost(current, used)
        used.update(current.evidence)
        chosen.append(current)
    return chosen


def _cost(candidate: Budgeted, used: set[str]) -> int:
    if not candidate.evidence:
        return 1
    return len(set(candidate.evidence) - used)
