"""Evidence recall against a budget of K messages, not K items (pure; see docs/benchmarks.md).

A ranking is a list of items, each the platform message ids it carries as evidence. A reader
shown the top of a ranking reads messages, so an item costs the messages it adds: a window of
three messages costs three, a message already shown costs nothing again, and an item that
carries none (a summary without evidence) still costs one. Items are read in order and reading
stops at the first item that does not fit in what is left of the budget, so a long evidence
list can never buy recall. A question is answered at K when an item carrying any of its gold
messages fits within K.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

Ranking = Sequence[Sequence[str]]
CUTOFFS = (1, 5, 10)


def item_costs(ranking: Ranking) -> list[int]:
    """What each item adds to the budget: its messages not shown before, at least one if empty."""
    shown: set[str] = set()
    costs: list[int] = []
    for evidence in ranking:
        new = {m for m in evidence if m not in shown}
        costs.append(len(new) if evidence else 1)
        shown |= new
    return costs


def messages_needed(ranking: Ranking, gold: Collection[str]) -> int | None:
    """The budget needed to reach the first item carrying a gold message; None if none does."""
    spent = 0
    for evidence, cost in zip(ranking, item_costs(ranking), strict=True):
        spent += cost
        if any(m in gold for m in evidence):
            return spent
    return None


def within_budget(ranking: Ranking, k: int) -> list[str]:
    """The distinct messages a reader sees with a budget of `k`, in reading order."""
    seen: list[str] = []
    spent = 0
    for evidence, cost in zip(ranking, item_costs(ranking), strict=True):
        if spent + cost > k:
            break
        spent += cost
        seen.extend(m for m in dict.fromkeys(evidence) if m not in seen)
    return seen


def hit(needed: int | None, k: int) -> bool:
    return needed is not None and needed <= k


@dataclass(frozen=True)
class Scores:
    """Recall at each cutoff and message-rank MRR over a set of questions."""

    questions: int
    recall: dict[int, float]
    mrr: float

    def as_json(self) -> dict[str, float | int]:
        return {
            "questions": self.questions,
            **{f"recall@{k}": round(v, 4) for k, v in self.recall.items()},
            "mrr": round(self.mrr, 4),
        }


def score(needed: Iterable[int | None], cutoffs: Sequence[int] = CUTOFFS) -> Scores:
    """Aggregate per-question budgets needed: recall@k is the share answered within k messages;
    MRR is the mean of 1/budget needed (0 when never answered), i.e. reciprocal message rank."""
    values = list(needed)
    n = len(values)
    if n == 0:
        return Scores(0, {k: 0.0 for k in cutoffs}, 0.0)
    recall = {k: sum(hit(v, k) for v in values) / n for k in cutoffs}
    mrr = sum(1.0 / v for v in values if v is not None) / n
    return Scores(n, recall, mrr)


def split_by_reference(
    reference: Sequence[bool], first: Sequence[bool]
) -> tuple[tuple[int, int], tuple[int, int]]:
    """How often a retriever's first item answers (hits, questions) on the questions a reference
    answers with its first item, and on the rest: which questions a retriever loses, the ones
    that share words with their answer or the ones that do not."""
    easy = [hit for hit, ref in zip(first, reference, strict=True) if ref]
    hard = [hit for hit, ref in zip(first, reference, strict=True) if not ref]
    return (sum(easy), len(easy)), (sum(hard), len(hard))
