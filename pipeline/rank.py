"""Ranking for recall, without I/O: score fusion, context scores over neighbouring messages, and
a message budget.

Fusion (`combine`): every retriever (keyword, vector) yields one list across all kinds of
memory, merged by its own raw scores (BM25 from Lucene, cosine from the vector search), since
within one retriever those scores already say how well each candidate matches. Each list is
normalised onto [0, 1] against its own best candidate (`normalise`: BM25 from zero, cosine from
the weakest candidate fetched, which stands for "not retrieved"), then the lists are added with
a weight per retriever that says how far it is trusted. So a fact leads only when it matches as
well as the best message, a candidate found by both retrievers beats one found by either alone,
and a list's top item does not score like every other list's top item (as it did under
reciprocal rank fusion of one list per kind).

Context (`context_scores`): the message answering a question often sits next to the one that
matches it (measured BM25 recall@10 0.58 over single messages, 0.69 over +-1 windows). Each
message scores its own relevance plus a damped share of its neighbours' (`NEIGHBOUR_SHARE` per
step of distance), computed over the hits and their fetched neighbours, so an unmatched answer
right after a strong question ranks beside it, and a run of matching messages beats a lone one.
A neighbour passes on what it said, not who said it (`label_share`): a question naming a
customer matches every message of theirs on the speaker label, and passed on, that match lifts
whichever message has the most of them around it (the middle of their run), not the answer.

Segments (`segment_prior`): a question usually names several things said across a stretch of
conversation, while the answering message names few of them. Each stretch of an agent's channel
(pipeline/segment.py) is also scored as one document; a matched message adds its segment's
score, normalised against the best segment found, times SEGMENT_WEIGHT, so it ranks above an
equal match in a conversation that is not about the question.

Answer kinds (`prefer_stated`): a question about an arrangement ("which day of the month is the
loan debited?") shares more words with the message that raised the matter than with the one that
settled it ("Make it the 2nd"). When the question asks for a kind of value (a time, a date, an
amount, a duration, a count, an identifier: pipeline/english/answers.py), a message stating one
scores ANSWER_KIND_BOOST times its context score, so among messages about equally relevant the
one giving the value leads and its window is shown first.

Clear matches (`lead_clear_match`): the context score helps a question that does not share the
answer's words and costs some that do, where the neighbours of a weaker match in another
conversation add up to more than a message that says what was asked in so many words. When one
message holds most of the question's content words (CLEAR_MATCH_COVERAGE, pipeline/english/
terms.py) and no other holds as many, the question is a lexical one and that message leads.
Paraphrased questions rarely have such a message, so they keep the context ranking.

Current values (`prefer_current`): memory that shows an old value first misleads ("what is the
budget?" answered by "my budget is 2000 EUR" when "update: it is 2500 EUR" came later). When a
candidate message backs a fact that a later message of its channel replaced, the later one
(a candidate too, or fetched for it: graph/search.py) is raised just above it, so the current
value is shown first and the old one, marked as replaced, after it. The same raise lets a
message that says it replaces a value ("... instead") lead the values of its kind before it,
where no fact was stored (pipeline/english/revisions.py, applied in pipeline/scores.py).

Budget (`select`): `limit` counts messages, not items. Messages and distilled items (facts,
commitments, summaries, which cost the evidence they add, at least one) are taken best first
while they fit, and a message taken one step from another taken message brings the one between
them (a reply between two lines of a customer who is named); chosen messages that follow each
other in their channel are then shown together
as one window in time order, ranked by its best message (pipeline/windows.py), so the budget
counts exactly what is shown and no message is shown twice. A window holds at most MAX_WINDOW
messages: a longer run is cut around its best message, so a first item never stands for a whole
conversation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from pipeline.segment import SITTING_GAP

# A neighbour's relevance counts this much towards a message one step away (squared for two
# steps): less than the message's own, so a match still outranks the context around it.
NEIGHBOUR_SHARE: Final = 0.5
# The most messages one window shows. A run of chosen messages longer than this (a whole short
# conversation that matched on its speaker's name, say) is shown as several windows, the one
# around its best message first, so the first item points at the answer instead of holding
# most of the budget. Half the default budget of 10, fixed before measuring.
MAX_WINDOW: Final = 5
# How much a matched message's segment adds, at most (the best segment found): half a keyword
# match. Chosen on the FriendsQA dev half against 1.0 added and 1.0 multiplied; checked again
# with equal fusion weights, where 1.0 cost the long conversations' dev half (docs/benchmarks.md).
SEGMENT_WEIGHT: Final = 0.5
# How much more a message counts when it states a value of the kind the question asks for: a
# quarter, so it leads only among messages about as relevant, never over a clearly better one.
# Fixed before measuring; 1.5 was tried beside it on the dev sets (docs/benchmarks.md).
ANSWER_KIND_BOOST: Final = 1.25
# The share of a question's content words that one message must hold, and no other as much, to
# lead as the question's clear match. Fixed before measuring; 0.5 and 0.75 were measured beside
# it on the dev sets (docs/benchmarks.md).
CLEAR_MATCH_COVERAGE: Final = 0.6


def normalise(scores: Mapping[str, float], *, floor: float = 0.0) -> dict[str, float]:
    """Scores mapped onto [0, 1]: `floor` (what a candidate not retrieved would score) to 0, the
    best to 1. A list whose scores all sit at the floor maps to 1 (nothing tells them apart)."""
    if not scores:
        return {}
    top = max(scores.values())
    if top <= floor:
        return dict.fromkeys(scores, 1.0)
    return {key: max(0.0, (value - floor) / (top - floor)) for key, value in scores.items()}


def combine(lists: Iterable[tuple[Mapping[str, float], float]]) -> dict[str, float]:
    """The weighted sum of normalised score lists: each (scores on [0, 1], weight) pair adds
    weight * score to its keys; a key absent from a list gets nothing from it."""
    fused: dict[str, float] = {}
    for scores, weight in lists:
        for key, value in scores.items():
            fused[key] = fused.get(key, 0.0) + weight * value
    return fused


def label_share(
    keyword: Mapping[str, float], content: Mapping[str, float], weight: float
) -> dict[str, float]:
    """What each keyword hit's speaker label earned of its fused relevance: its raw keyword score
    less its content's (0 when the content search did not reach it), normalised as the keyword
    list is (against its best) and weighted alike."""
    top = max(keyword.values(), default=0.0)
    if top <= 0:
        return {}
    return {
        key: weight * max(0.0, value - content.get(key, 0.0)) / top
        for key, value in keyword.items()
    }


def segment_prior(
    relevance: Mapping[str, float],
    segments: Mapping[str, tuple[float, Sequence[str]]],
    weight: float = SEGMENT_WEIGHT,
) -> dict[str, float]:
    """`relevance` with each matched message (relevance above 0) raised by `weight` times its
    segment's score on [0, 1] (segment key to (score, covered message keys)); the rest as is."""
    if not segments:
        return dict(relevance)
    top = max(score for score, _ in segments.values())
    prior: dict[str, float] = {}
    for score, covers in segments.values():
        share = score / top if top > 0 else 0.0
        for key in covers:
            prior[key] = max(prior.get(key, 0.0), share)
    return {
        key: value + weight * prior.get(key, 0.0) if value > 0 else value
        for key, value in relevance.items()
    }


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
    def order(self) -> tuple[str, datetime, str]:
        return (self.channel, self.at, self.key)


def runs(
    passages: Mapping[str, Passage],
    around: Iterable[Sequence[str]],
    gap: timedelta = SITTING_GAP,
) -> list[list[str]]:
    """Stretches of consecutive messages of one sitting, each in time order.

    `around` gives sequences known to be consecutive (a hit with its neighbours, in time order,
    with no message the agent observed between them); sequences sharing a message join. A
    pause longer than `gap` between two of them ends a stretch: the last message of one chat
    and the first of the next, days later, are not each other's context. Keys of `passages` in
    no sequence stand alone.
    """
    after: dict[str, str] = {}
    for sequence in around:
        keys = [k for k in sequence if k in passages]
        for left, right in itertools.pairwise(keys):
            if passages[right].at - passages[left].at <= gap:
                after[left] = right
    before = {right: left for left, right in after.items()}
    found: list[list[str]] = []
    for key in sorted(passages, key=lambda k: passages[k].order):
        if key in before:
            continue
        run = [key]
        while run[-1] in after and after[run[-1]] not in run:
            run.append(after[run[-1]])
        found.append(run)
    return found


def context_scores(
    relevance: Mapping[str, float],
    stretches: Iterable[Sequence[str]],
    radius: int,
    *,
    shared: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each message's own relevance plus NEIGHBOUR_SHARE**d of each neighbour's at distance d
    (up to `radius`) along its stretch; messages without relevance get 0 of their own. A
    neighbour passes on its `shared` relevance when given (what it said, not who said it)."""
    passed = relevance if shared is None else shared
    scores: dict[str, float] = {}
    for stretch in stretches:
        mine = [relevance.get(key, 0.0) for key in stretch]
        own = [passed.get(key, 0.0) for key in stretch]
        for i, key in enumerate(stretch):
            total = mine[i]
            for d in range(1, radius + 1):
                share = NEIGHBOUR_SHARE**d
                if i - d >= 0:
                    total += share * own[i - d]
                if i + d < len(own):
                    total += share * own[i + d]
            scores[key] = total
    return scores


def prefer_stated(
    scores: Mapping[str, float], stating: Iterable[str], boost: float = ANSWER_KIND_BOOST
) -> dict[str, float]:
    """`scores` with each message in `stating` (it states a value of the kind the question asks
    for) multiplied by `boost`. Applied to context scores, so it lends nothing to neighbours."""
    raised = set(stating)
    return {key: value * boost if key in raised else value for key, value in scores.items()}


def lead_clear_match(
    scores: Mapping[str, float],
    coverage: Mapping[str, float],
    least: float = CLEAR_MATCH_COVERAGE,
) -> dict[str, float]:
    """`scores` with the question's clear match raised just above the best of them: the message
    whose `coverage` (the share of the question's content words it holds) is at least `least`
    and higher than every other's. Unchanged when there is no such message."""
    ranked = sorted(
        ((share, key) for key, share in coverage.items() if key in scores), reverse=True
    )
    if not ranked or ranked[0][0] < least or (len(ranked) > 1 and ranked[1][0] == ranked[0][0]):
        return dict(scores)
    lead = ranked[0][1]
    best = max(value for key, value in scores.items() if key != lead) if len(scores) > 1 else 0.0
    return {**scores, lead: max(scores[lead], math.nextafter(best, math.inf))}


def prefer_current(
    scores: Mapping[str, float], replaced_by: Mapping[str, Iterable[str]]
) -> dict[str, float]:
    """`scores` with every message in `replaced_by[key]` (the messages that replaced a value
    message `key` stated, in its channel) raised just above message `key`. Both must be scored;
    the rest is unchanged."""
    raised = dict(scores)
    for key, later_keys in replaced_by.items():
        if key not in scores:
            continue
        for later in set(later_keys) - {key}:
            if later in raised:
                raised[later] = max(raised[later], math.nextafter(scores[key], math.inf))
    return raised


@dataclass(frozen=True)
class Unit:
    """A candidate for the budget: one message (`message` set) or a distilled item, with the
    platform message ids it costs. `found`: a retriever returned it (False for a message
    fetched only as a neighbour)."""

    key: str
    score: float
    evidence: tuple[str, ...]
    message: Passage | None = None
    found: bool = True


def places(stretches: Iterable[Sequence[str]]) -> dict[str, tuple[int, int]]:
    """Each message key's place: (its stretch's index, its index within the stretch)."""
    return {key: (n, i) for n, stretch in enumerate(stretches) for i, key in enumerate(stretch)}


def best_first(unit: Unit) -> tuple[float, str]:
    """Sort key: the higher score first, ties by key."""
    return (-unit.score, unit.key)


def select(
    units: Iterable[Unit], budget: int, stretches: Iterable[Sequence[str]] = ()
) -> list[Unit]:
    """The best units whose messages fit in `budget`, best first (ties by key, for stability).

    A unit costs its evidence not already counted, at least one message when it rests on none;
    one that does not fit is skipped for smaller ones. A neighbour that scores nothing (past a
    pause from every match) is not taken on its own, however much budget is left; a retriever's own
    weakest candidate may score nothing too (it stands for "not retrieved") and is still taken.

    A message taken one step from another taken message of its stretch (`stretches`) brings
    the one between them along, right after it, when it fits: two lines of a speaker without
    the reply between them read as a monologue, and the reply is often what was asked (a
    question naming a customer matches each of their lines on the name, not the agent's).
    """
    pool = sorted(units, key=best_first)
    by_key = {unit.key: unit for unit in pool}
    place = places(stretches)
    at = {spot: key for key, spot in place.items()}
    chosen: list[Unit] = []
    taken: set[str] = set()
    used: set[str] = set()
    left = budget

    def take(unit: Unit) -> bool:
        nonlocal left
        cost = len(set(unit.evidence) - used) if unit.evidence else 1
        if cost > left:
            return False
        left -= cost
        used.update(unit.evidence)
        chosen.append(unit)
        taken.add(unit.key)
        return True

    for unit in pool:
        if left <= 0:
            break
        if unit.key in taken or (unit.score <= 0 and not unit.found) or not take(unit):
            continue
        if unit.key not in place:
            continue
        n, i = place[unit.key]
        for step in (-1, 1):
            between, beyond = at.get((n, i + step)), at.get((n, i + 2 * step))
            if between in by_key and between not in taken and beyond in taken:
                take(by_key[between])
    return chosen
