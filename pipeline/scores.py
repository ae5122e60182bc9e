"""How well each candidate message answers a question, from what the retrievers found and what
the messages say (pure; pipeline/rank.py holds the parts, pipeline/graph/search.py the I/O).

In order: context scores over the neighbours; the kind of value asked for; a clear lexical
match; a later value that replaced a fact; and a later message that says it replaces an earlier
value of the kind asked for (pipeline/english/revisions.py), unless the question asks for a
reason or for the value as first said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.english.answers import asked_kinds, stated_kinds
from pipeline.english.revisions import asks_current, revised_by
from pipeline.english.terms import content_terms, coverage
from pipeline.rank import (
    Passage,
    context_scores,
    lead_clear_match,
    prefer_current,
    prefer_stated,
)


def score_messages(
    question: str,
    passages: Mapping[str, Passage],
    stretches: Sequence[Sequence[str]],
    relevance: Mapping[str, float],
    *,
    passed: Mapping[str, float],
    radius: int,
    replaced_by: Mapping[str, Sequence[str]],
) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each passage's score for `question`: its `relevance` (a neighbour passing on its
    `passed`) over its stretch of `radius` either side, then the preferences above;
    `replaced_by` maps a message to the later ones that replaced a fact it backs. Also returns
    which later messages replace each message's value as the question reads it (`replaced_by`
    and the revisions), for the windows that show the old value (windows.follow_revisions)."""
    asked = asked_kinds(question)
    stated = {key: stated_kinds(p.text, asked) for key, p in passages.items()} if asked else {}
    stating = [key for key, kinds in stated.items() if kinds]
    scores = prefer_stated(context_scores(relevance, stretches, radius, shared=passed), stating)
    if terms := content_terms(question):
        scores = lead_clear_match(
            scores, {key: coverage(terms, p.text) for key, p in passages.items()}
        )
    scores = prefer_current(scores, replaced_by)
    later = {key: list(keys) for key, keys in replaced_by.items()}
    if asks_current(question):
        said = [[(key, passages[key].text) for key in stretch] for stretch in stretches]
        revisions = revised_by(said, asked, stated)
        scores = prefer_current(scores, revisions)
        for key, keys in revisions.items():
            later.setdefault(key, []).extend(k for k in keys if k not in later[key])
    return scores, later
