"""The words a question asks about, and what share of them a message holds.

A question that shares most of its content words with one message, and with no other as much,
is a lexical match: plain BM25 puts that message first, and recall should not let the
neighbours of a weaker match lift another conversation above it (pipeline/rank.py,
`lead_clear_match`). The same word lists tell the Lucene query builder which words to drop.
"""

from __future__ import annotations

import functools
import re
from typing import Final

# Words that shape a question but say nothing about its answer, beyond the English analyser's
# own stop words: interrogatives, auxiliaries and personal pronouns. They occur in most
# messages, so they only add noise to BM25.
_QUESTION_WORDS_TEXT = """
what whats who whom whose which when where why how
do does did done doing is are was were am be been being has have had having
can could would should shall will may might must
i me my mine you your yours he him his she her hers it its we us our ours they them their theirs
"""
QUESTION_WORDS: Final = frozenset(_QUESTION_WORDS_TEXT.split())
# The English analyser's stop words (Lucene's EnglishAnalyzer).
_ANALYSER_STOP_TEXT = """
a an and are as at be but by for if in into is it no not of on or such that the their
then there these they this to was will with
"""
ANALYSER_STOP_WORDS: Final = frozenset(_ANALYSER_STOP_TEXT.split())
_UNASKED: Final = QUESTION_WORDS | ANALYSER_STOP_WORDS

_WORD: Final = re.compile(r"[a-z0-9]+")
# Endings stripped so that "waiting" meets "wait" and "flights" meets "flight"; a stem keeps
# at least three characters, so "bus" and "red" stay whole, and "ss" is no plural ("Ross").
_SUFFIXES: Final = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def _words(text: str) -> set[str]:
    return {
        _stem(word)
        for word in _WORD.findall(text.lower())
        # A lone letter is what an apostrophe leaves ("Ross's", "don't"), not a word.
        if (len(word) > 1 or word.isdigit()) and word not in _UNASKED
    }


def content_terms(text: str) -> frozenset[str]:
    """The words `text` asks about: lower case, question and stop words dropped, endings
    stripped."""
    return frozenset(_words(text))


def coverage(terms: frozenset[str], text: str) -> float:
    """The share of `terms` that `text` holds, on [0, 1]; 0 when there are no terms."""
    if not terms:
        return 0.0
    # Only words that open with a term can stem to one: one scan in C finds them, so a recall
    # pays a fraction of a millisecond for its hundred-odd candidate messages.
    held = {
        _stem(word) for word in _opening_with(terms).findall(text.lower()) if word not in _UNASKED
    }
    return len(terms & held) / len(terms)


@functools.lru_cache(maxsize=64)
def _opening_with(terms: frozenset[str]) -> re.Pattern[str]:
    """Whole words (as _WORD cuts them) that begin with one of `terms`."""
    openings = "|".join(re.escape(term) for term in sorted(terms, key=len, reverse=True))
    return re.compile(rf"(?<![a-z0-9])(?:{openings})[a-z0-9]*")
