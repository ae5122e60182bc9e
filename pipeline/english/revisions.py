"""Which messages take back what was said shortly before them, and which questions ask for what
was said first.

A conversation often states a value more than once before it settles: "flying back March 3rd",
then "March 6th", then "put me on March 5th instead". A question about the value as it stands
matches the first statement as well as the last, often better, since the first repeats the
question's words. The last one says that it replaces something ("instead", "not that one", "my
old phone"); recall lets it lead what it replaced (pipeline/rank.py, `prefer_current`), as the
graph lets a new fact supersede an old one, unless the question asks for the earlier value
("originally", "at first").
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

from pipeline.english.answers import ValueKind, stated_kinds

# Wording by which a message replaces something said before it.
REVISING: Final = re.compile(
    r"\binstead\b|\brather than\b|\bnot that one\b|\bscratch that\b|\bon second thoughts?\b"
    r"|\bchanged? (?:my|our) minds?\b|\bchange of plans?\b|\bno longer\b"
    r"|\bthat(?:'s| is| was) (?:my|our|the) old\b|\b(?:my|our|the) new one\b"
    r"|\bcorrection\b|\bi meant\b"
    # A value said to have been changed, or to hold from now on: "Updated. You'll now return the
    # car to Glasgow Central", "your freeze now runs to 31 July", "completion has slipped, it'll
    # be Monday 1 July now", "your Monday appointment has been cancelled and you're booked in
    # for Friday".
    r"|\b(?:updated|changed|moved|switched|rescheduled|amended|rebooked|re-booked|postponed"
    r"|slipped|pushed back|brought forward)\b"
    r"|(?:\b(?:will|is|are|has|have)|'ll|'s|'re|'ve)\s+now\b"
    r"|\bnow\s+(?:runs?|reads?|shows?|starts?|ends?|falls?|lands?|leaves?|departs?|arrives?"
    r"|returns?|goes|comes|be|booked|set|scheduled|due)\b"
    r"|\bnow\s*[.!]?\s*$|\bcancell?ed and\b",
    re.IGNORECASE | re.MULTILINE,
)
# Words one of REVISING's forms holds: a plain substring test rules out most messages for a
# fraction of the pattern's cost.
_REVISING_WORDS: Final = (
    "instead",
    "rather",
    "that one",
    "scratch",
    "second thought",
    "mind",
    "change of plan",
    "longer",
    "old",
    "new one",
    "correction",
    "meant",
    "updated",
    "changed",
    "moved",
    "switched",
    "rescheduled",
    "amended",
    "booked",
    "postponed",
    "slipped",
    "pushed back",
    "brought forward",
    "now",
    "led and",
)
# A question about what was said first, not about what holds now.
ASKING_EARLIER: Final = re.compile(
    r"\b(?:original(?:ly)?|initial(?:ly)?|at first|first (?:asked|wanted|chose|picked|booked|said)"
    r"|before (?:changing|switching|moving)|previous(?:ly)?|used to|former(?:ly)?|old)\b",
    re.IGNORECASE,
)
# A question about a reason or an event, not about a value that may have changed.
ASKING_WHY: Final = re.compile(r"\bwhy\b|\bhow come\b|\bwhat made\b|\breasons?\b", re.IGNORECASE)
# How far back a revision reaches: the exchange it closes, not the conversation's start.
REACH: Final = 8
# Kinds of value two messages can both state and so be about one slot; every number is a
# count, so sharing a count says nothing.
_SLOT_KINDS: Final[frozenset[ValueKind]] = frozenset(
    {"time", "date", "money", "duration", "identifier"}
)


def revised_by(
    stretches: Sequence[Sequence[tuple[str, str]]],
    asked: frozenset[ValueKind],
    stated: Mapping[str, frozenset[ValueKind]] | None = None,
) -> dict[str, list[str]]:
    """For each message that a later one in its stretch replaces, the keys of those later ones.

    `stretches` are runs of consecutive messages as (key, text), in time order; `asked` the kinds
    of value the question asks for. A message replaces an earlier one up to REACH messages back
    when it says it replaces something and both are about one slot: they state a value of a kind
    the question asks for, or, when it asks for none, of one kind but a count. `stated` may
    give, by key, the asked kinds a message states, when they were read already.
    """
    replaced: dict[str, list[str]] = {}
    for stretch in stretches:
        for earlier, later in _revisions(stretch, asked or _SLOT_KINDS, stated if asked else None):
            replaced.setdefault(earlier, []).append(later)
    return replaced


def _revisions(
    stretch: Sequence[tuple[str, str]],
    among: frozenset[ValueKind],
    stated: Mapping[str, frozenset[ValueKind]] | None,
) -> Iterator[tuple[str, str]]:
    """(earlier, later) key pairs of one stretch, as `revised_by` defines them."""
    # Few messages revise: kinds are read only around those that do (a scan of the five
    # kinds costs about 50 us a message).
    kinds: dict[int, frozenset[ValueKind]] = {}

    def kinds_of(i: int) -> frozenset[ValueKind]:
        if i not in kinds:
            key, text = stretch[i]
            known = stated.get(key) if stated is not None else None
            kinds[i] = known if known is not None else stated_kinds(text, among)
        return kinds[i]

    for i, (later, text) in enumerate(stretch):
        if not revises(text) or not kinds_of(i):
            continue
        for j in range(max(0, i - REACH), i):
            if kinds_of(i) & kinds_of(j):
                yield stretch[j][0], later


def revises(text: str) -> bool:
    """Whether `text` says that it replaces something said before it."""
    lowered = text.lower()
    return any(word in lowered for word in _REVISING_WORDS) and REVISING.search(text) is not None


def asks_current(question: str) -> bool:
    """Whether `question` asks for a value as it stands: not for a reason, nor for the value as
    it was first said."""
    return ASKING_EARLIER.search(question) is None and ASKING_WHY.search(question) is None
