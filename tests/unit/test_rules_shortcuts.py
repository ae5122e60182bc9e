"""The rules extractor's shortcuts change no output: each is checked against the plain form it
replaced, over the labelled set, the vendored chat slices and hand-made edge cases."""

from __future__ import annotations

import re
import warnings
from dataclasses import replace
from functools import cache
from typing import Any

from bench.extraction import load_lines
from pipeline.english.patterns import ADDRESS, COMMIT, FILLER, HEDGE, NEEDS, TITLES, Candidate
from pipeline.english.rules import (
    _about_others,
    _lower_ascii,
    _ruled_out,
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
    """sentences() as it was: the raw-text break pattern (a title's period breaks nothing)."""
    titles = "".join(rf"(?<!\b{t}\.)" for t in TITLES)
    parts = re.split(
        rf"(?<=[.!?]){titles}\s+|\n+|\s+-{{1,2}}\s+", plain_normalise(text), flags=re.I
    )
    return [p.strip() for p in parts if p.strip()]


def plain_candidates(text: str) -> list[Candidate]:
    """candidates() as it was: the hedge looked up first, for every sentence."""
    found: list[Candidate] = []
    for raw in plain_sentences(text):
        if is_question(raw):
            continue
        hedged = bool(HEDGE.search(raw))
        body = ADDRESS.sub("", FILLER.sub("", raw)).strip()
        found.extend(replace(c, hedged=hedged) for c in _sentence(body) + _about_others(raw))
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


# --- literal prefilters (patterns.NEEDS) -----------------------------------------------------

# A run of the parse tree with more spellings than this is not expanded (none comes close).
MAX_SPELLINGS = 20_000


def _parse(pattern: re.Pattern[str]) -> Any:
    """The pattern's parse tree (sre_parse is deprecated, so its import warning is silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import sre_parse

    return sre_parse.parse(pattern.pattern, pattern.flags)


def _spellings(op: Any, av: Any) -> set[str] | None:
    """Every string one parse-tree item can match, lower-cased, when there are few; else None."""
    name = str(op)
    if name == "LITERAL":
        return {chr(av).lower()}
    if name in ("AT", "ASSERT", "ASSERT_NOT"):  # zero width
        return {""}
    if name == "IN" and all(str(o) == "LITERAL" for o, _ in av):
        return {chr(c).lower() for _, c in av}
    if name == "SUBPATTERN":
        return _sequence_spellings(av[-1])
    if name == "BRANCH":
        found: set[str] = set()
        for alternative in av[1]:
            spelt = _sequence_spellings(alternative)
            if spelt is None:
                return None
            found |= spelt
        return found
    if name in ("MAX_REPEAT", "MIN_REPEAT") and av[1] <= 3:
        body = _sequence_spellings(av[2])
        if body is None:
            return None
        found = set()
        for count in range(av[0], av[1] + 1):
            found |= _product([body] * count) or set()
        return found
    return None


def _sequence_spellings(items: Any) -> set[str] | None:
    parts = [_spellings(op, av) for op, av in items]
    if any(p is None for p in parts):
        return None
    return _product([p for p in parts if p is not None])


def _product(parts: list[set[str]]) -> set[str] | None:
    found = {""}
    for part in parts:
        found = {a + b for a in found for b in part}
        if len(found) > MAX_SPELLINGS:
            return None
    return found


def _always_contains(items: Any, needs: tuple[str, ...]) -> bool:
    """True when every string the parse-tree sequence matches contains one of `needs` (lower
    case): some run of items with few spellings has one in each spelling, or one item (a group,
    a required repeat, a branch in every alternative) always does."""
    run: list[set[str]] = []
    for op, av in [*items, (None, None)]:
        spelt = None if op is None else _spellings(op, av)
        if spelt is not None:
            run.append(spelt)
            continue
        whole = _product(run)
        if run and whole and all(any(n in s for n in needs) for s in whole):
            return True
        run = []
        name = str(op)
        if name == "SUBPATTERN" and _always_contains(av[-1], needs):
            return True
        if name in ("MAX_REPEAT", "MIN_REPEAT") and av[0] >= 1 and _always_contains(av[2], needs):
            return True
        if name == "BRANCH" and all(_always_contains(a, needs) for a in av[1]):
            return True
    return False


def test_every_prefilter_holds_for_every_match_by_the_parse_tree() -> None:
    assert len(NEEDS) >= 35
    for pattern, needs in NEEDS.items():
        assert needs and all(n == n.lower() for n in needs), pattern.pattern
        assert _always_contains(_parse(pattern).data, needs), (pattern.pattern, needs)


def test_the_parse_tree_check_rejects_a_literal_a_match_can_lack() -> None:
    # "i will" is one spelling of COMMIT's opening among eleven; "going to" is only inside words.
    assert not _always_contains(_parse(COMMIT).data, ("i will",))
    assert not _always_contains(_parse(re.compile(r"\bgo(?:ing)? to\b", re.I)).data, ("going",))
    assert _always_contains(_parse(re.compile(r"\bwe (?:settled|agreed) on", re.I)).data, ("ed o",))


def test_no_prefilter_rejects_a_sentence_its_pattern_matches() -> None:
    matched = ruled_out = 0
    for raw in {s for text in texts() for s in sentences(text)}:
        for s in (raw, ADDRESS.sub("", FILLER.sub("", raw)).strip()):
            low = _lower_ascii(s)
            for pattern, needs in NEEDS.items():
                if pattern.search(s):
                    assert not _ruled_out(low, needs), (pattern.pattern, s)
                    matched += 1
                else:
                    ruled_out += _ruled_out(low, needs)
    assert matched > 300 and ruled_out > 10_000, (matched, ruled_out)


def test_non_ascii_sentences_are_never_ruled_out() -> None:
    # re's case folding matches the long s for "s"; str.lower() keeps it, so "suits me" is not
    # in the lower-case form and a prefilter on it would lose the preference.
    s = "The window \u017fuits me"
    assert _lower_ascii(s) is None and "suits me" not in s.lower()
    assert _sentence(s) == [Candidate("preference", "prefers", "window", "speaker")]
