"""What kind of value a question asks for, and which kinds a message states: a time, a date, an
amount of money, a duration, a count or an identifier.

A question about an arrangement ("which day of the month should the loan be debited?") matches
the message that opened the matter more than the one that settled it ("Make it the 2nd"): the
opening repeats its words, the answer states its value. Knowing the kind of value asked for lets
recall prefer, among comparably relevant messages, those that state one (pipeline/rank.py,
`prefer_stated`). A question asking for no such kind (why, who, what happened) gets none.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from pipeline.english.cues import DAYS, MONTHS

ValueKind = Literal["time", "date", "money", "duration", "count", "identifier"]

_SMALL_NUMBERS: Final = r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_NUMBER_WORDS: Final = (
    rf"(?:a|an|{_SMALL_NUMBERS}|"
    r"fifteen|twenty|thirty|forty|fifty|sixty|ninety|half an?|a couple of|a few)"
)
_UNITS: Final = r"(?:seconds?|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|years?)"
# Months that are also common words ("you may", "march over", "mar") count only capitalised.
_COMMON_WORD_MONTHS: Final = frozenset({"may", "march", "mar"})
_MONTHS: Final = (
    "(?:" + "|".join(m for m in MONTHS.split("|") if m not in _COMMON_WORD_MONTHS) + ")"
)
_WEEKDAYS: Final = rf"(?:{DAYS})s?"

# What a message states. Case-insensitive, except the months that are also common words.
_STATED: Final[dict[ValueKind, re.Pattern[str]]] = {
    "time": re.compile(
        r"\b\d{1,2}(?::\d{2})?\s*(?:a\.?m\b\.?|p\.?m\b\.?)"
        r"|\b\d{1,2}:\d{2}\b"
        r"|\b(?:noon|midnight|midday)\b"
        rf"|\b(?:\d{{1,2}}|{_NUMBER_WORDS})\s+"
        r"(?:o'clock|at night|in the (?:morning|afternoon|evening))",
        re.IGNORECASE,
    ),
    "date": re.compile(
        rf"\b{_MONTHS}\b\.?|\b{_WEEKDAYS}\b|\b\d{{1,2}}(?:st|nd|rd|th)\b"
        r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b\d{4}-\d{2}-\d{2}\b|\b(?:19|20)\d{2}\b"
        r"|\b(?:today|tomorrow|yesterday|tonight|weekend)\b"
        r"|\b(?:next|last|this) (?:week|month|year)\b"
        r"|(?-i:\b(?:May|March)\b)",
        re.IGNORECASE,
    ),
    "money": re.compile(
        r"[$€£¥]\s?\d|\b\d[\d,.]*\s?(?:dollars|euros|pounds|bucks|cents|usd|eur|gbp)\b",
        re.IGNORECASE,
    ),
    "duration": re.compile(rf"\b(?:\d+(?:\.\d+)?|{_NUMBER_WORDS})[\s-]+{_UNITS}\b", re.IGNORECASE),
    "count": re.compile(
        rf"\b\d+\b|\b(?:{_SMALL_NUMBERS}|dozen)\b",
        re.IGNORECASE,
    ),
    "identifier": re.compile(
        # A code mixing letters and digits (not an ordinal, not "45-minute"), a long number,
        # "ending (in) 3390", an email address.
        r"\b(?!\d{1,2}(?:st|nd|rd|th)\b|\d+(?:\.\d+)?-[A-Za-z]+\b)"
        r"(?=[\w-]*\d)(?=[\w-]*[A-Za-z])\w+(?:-\w+)*\b"
        r"|\b\d{5,}\b|\bending(?: in)? \d{2,}\b|\b[\w.+-]+@[\w-]+\.[\w.]+\b"
        # Digits in groups, six or more in all: a phone, card or licence number.
        r"|\b(?!\d{4}-\d{2}-\d{2}\b)(?=(?:\d[-. ]?){6,})\d{2,}(?:[-. ]\d{2,})+\b",
        re.IGNORECASE,
    ),
}

_NOUNS_OF_IDENTIFIERS: Final = (
    r"(?:card|account|number|code|id|reference|confirmation|booking|order|ticket|"
    r"email|e-mail|address|phone|policy|plan|license|licence|plate)"
)

# What a question asks for, by its wording: the cue, and the kinds of value that answer it.
_ASKED: Final[tuple[tuple[re.Pattern[str], frozenset[ValueKind]], ...]] = (
    (
        re.compile(r"\bwhat time\b|\bhow (?:early|late)\b|\b(?:latest|earliest)\b", re.I),
        frozenset({"time"}),
    ),
    (
        # "when" asks for a time only when no other question word leads: "Who is meeting him
        # when he lands?" asks for a person, "Where should the truck stop when delivering?" a
        # place.
        re.compile(
            r"^(?!.*\b(?:who|whom|whose|what|which|where|why|how)\b).*\bwhen\b"
            r"|\bby what time\b",
            re.I | re.S,
        ),
        frozenset({"time", "date"}),
    ),
    (
        re.compile(
            r"\b(?:what|which)(?:'s| is| was)? (?:the )?(?:day|date|month|year|weekday|night)\b"
            r"|\bday of the (?:month|week)\b|\bhow soon\b",
            re.I,
        ),
        frozenset({"date"}),
    ),
    (
        re.compile(
            r"\bhow much\b|\bhow expensive\b"
            r"|\bwhat(?:'s| is| was| were)? (?:the |their |his |her |my |our )?"
            r"(?:\w+ )?(?:price|cost|fee|fare|budget|total|amount|rate|limit)\b",
            re.I,
        ),
        frozenset({"money"}),
    ),
    (
        re.compile(rf"\bhow long\b|\bhow many {_UNITS}|\b(?:shortest|longest)\b", re.I),
        frozenset({"duration"}),
    ),
    (re.compile(rf"\bhow many\b(?! {_UNITS})", re.I), frozenset({"count"})),
    (
        re.compile(
            rf"\b(?:what|which)(?:'s| is| was)? (?:the |their |his |her |my |our )?"
            rf"(?:\w+ )?{_NOUNS_OF_IDENTIFIERS}\b",
            re.I,
        ),
        frozenset({"identifier"}),
    ),
)


def asked_kinds(question: str) -> frozenset[ValueKind]:
    """The kinds of value `question` asks for; empty when it asks for none of them."""
    kinds: set[ValueKind] = set()
    for cue, answered_by in _ASKED:
        if cue.search(question):
            kinds |= answered_by
    return frozenset(kinds)


def stated_kinds(text: str, among: frozenset[ValueKind]) -> frozenset[ValueKind]:
    """Which of the kinds in `among` `text` states a value of."""
    return frozenset(kind for kind in among if _STATED[kind].search(text))
