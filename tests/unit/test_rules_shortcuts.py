"""The rules extractor's shortcuts change no output: each is checked against the plain form it
replaced, over the labelled set, the vendored chat slices and hand-made edge cases."""

from __future__ import annotations

import re
from functools import cache

from bench.extraction import load_lines
from pipeline.english.patterns import ADDRESS, FILLER, HEDGE, Candidate
from pipeline.english.rules import (
    _about_others,
    _sentence,
    candidates,
    is_question,
    normalise,
    sentences,
)
from tests.datasets import friends_raw_events, tau_raw_events

EDGE_CASES = [
    "",
    "   ",
    "I ca n't eat nuts , I 'm allergic .",
    "we 're gon na use Postgres  --  it 's fine",
    "wan na  try ?  no ... ok !",
    "tabs\tand\nnew lines\r\nand\u00a0no-break\u2003spaces\u3000too",
    "I\u2019m based in Lisbon. You\u2018re not ###STOP### right",
    "done - really -- done --- maybe. Next! Really? Yes.\n\nNew paragraph",
    "trailing space before mark ! and : colon ; semi",
    "Ok so I think I'll send the deck by Friday, maybe.",
    "Sarah likes aisle seats, I guess",
    "@marco prefers red-eye flights!",
    "Perhaps we agreed on net-30. I'm not sure.",
]


@cache
def texts() -> tuple[str, ...]:
    """Every distinct message text of the labelled lines, the chat slices and the edge cases."""
    found = [line["text"] for line in load_lines()]
    events = friends_raw_events() + tau_raw_events()
    found += [m["content"] for e in events for m in e["messages"] if m.get("content")]
    return tuple(dict.fromkeys([*found, *EDGE_CASES]))


def plain_normalise(text: str) -> str:
    """normalise() as it was: every substitution on every message."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("###STOP###", " ")
    text = re.sub(
        r"\b(ca|wo|do|does|did|is|are|was|were|could|should|would|have|has) n't\b", r"\1n't", text
    )
    text = re.sub(r"(\w) '(m|s|re|ve|ll|d)\b", r"\1'\2", text)
    text = re.sub(r"\b(gon|wan) na\b", r"\1na", text)
    text = re.sub(r"\s+([,.!?;:])(?=\s|$)", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def plain_sentences(text: str) -> list[str]:
    """sentences() as it was: the raw-text break pattern."""
    parts = re.split(r"(?<=[.!?])\s+|\n+|\s+-{1,2}\s+", plain_normalise(text))
    return [p.strip() for p in parts if p.strip()]


def plain_candidates(text: str) -> list[Candidate]:
    """candidates() as it was: the hedge looked up first, for every sentence."""
    found: list[Candidate] = []
    for raw in plain_sentences(text):
        if is_question(raw):
            continue
        hedged = bool(HEDGE.search(raw))
        body = ADDRESS.sub("", FILLER.sub("", raw)).strip()
        found.extend(_sentence(body, hedged))
        found.extend(_about_others(raw, hedged))
    return found


def test_backslash_s_is_exactly_what_str_split_splits_on() -> None:
    # normalise() collapses white space with str.split() where it used re's \s+.
    every = "".join(map(chr, range(0x110000)))
    assert set("".join(re.findall(r"\s", every))) == {c for c in every if c.isspace()}


def test_normalise_and_sentences_match_their_plain_forms() -> None:
    changed = 0
    for text in texts():
        assert normalise(text) == plain_normalise(text), text
        assert sentences(text) == plain_sentences(text), text
        changed += normalise(text) != " ".join(text.split())
    # The substitutions must have had work to do for the comparison to mean anything.
    assert changed > 50, changed


def test_candidates_match_the_eager_hedge_form() -> None:
    found = hedged = 0
    for text in texts():
        expected = plain_candidates(text)
        assert candidates(text) == expected, text
        found += len(expected)
        hedged += sum(c.hedged for c in expected)
    assert found > 150 and hedged > 5, (found, hedged)
