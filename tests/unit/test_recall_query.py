"""Recall queries: validation that names the field, and user text made safe for Lucene; recalled
items shown with who said them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.graph.cypher.search import (
    KEYWORD_SEARCH,
    MAX_TERMS,
    combined,
    lucene_query,
    per_label,
    scoped_query,
)
from schemas.recall import MAX_LIMIT, RecallItem, RecallQuery


def test_defaults_and_kinds_in_canonical_order() -> None:
    q = RecallQuery(agent_id="a-travel", kinds=("summary", "episode"))
    assert (q.tenant, q.limit, q.mode, q.neighbours) == ("default", 10, "hybrid", 1)
    assert q.kinds == ("episode", "summary")
    assert RecallQuery(agent_id="a", include_neighbours=False, window=2).neighbours == 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"agent_id": ""}, "agent_id"),
        ({"tenant": "no spaces"}, "tenant"),
        ({"limit": 0}, "limit"),
        ({"limit": MAX_LIMIT + 1}, "limit"),
        ({"kinds": ()}, "kinds"),
        ({"kinds": ("episode", "rumour")}, "kinds"),
        ({"mode": "psychic"}, "mode"),
        ({"window": 3}, "window"),
        ({"since": "2026-01-01T00:00:00"}, "since"),  # no zone: refused, not guessed
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
        ({"sources": ()}, "sources"),
        ({"sources": ("gossip",)}, "sources"),
        ({"query": "x" * 5000}, "query"),
        ({"channel_id": " "}, "channel_id"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_validation_names_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        RecallQuery.model_validate({"agent_id": "a-travel", **fields})
    assert info.value.errors()[0]["loc"][0] == field


def test_an_item_dumps_the_documented_fields() -> None:
    item = RecallItem(kind="fact", key="k", text="t", score=0.5, evidence=["m-1"])
    dumped = item.model_dump(mode="json")
    assert {"kind", "key", "text", "score", "evidence"} <= set(dumped)
    assert dumped["current"] is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("seat preference", 'seat preference "seat preference"'),
        ("C++ (x) AND y", r'C\+\+ \(x\) and y "C\+\+ \(x\)"'),
        ('title:foo "bar" a/b', r'title\:foo \"bar\" a\/b "title\:foo \"bar\"" "\"bar\" a\/b"'),
        ("x~2^3 [a TO b] {c}", r'x\~2\^3 \[a to b\] \{c\} "b\] \{c\}"'),
        ("a* b? !c -d +e", r'a\* b\? \!c \-d \+e "b\? \!c" "\!c \-d" "\-d \+e"'),
        (r"back\slash", r"back\\slash"),
        ("NOT this || that && other", "not this that other"),
        ("  spaced\tout\nwords ", 'spaced out words "spaced out" "out words"'),
    ],
)
def test_lucene_terms_are_escaped(text: str, expected: str) -> None:
    assert lucene_query(text) == expected


def test_question_words_go() -> None:
    # Interrogatives, auxiliaries and pronouns match most messages and say nothing of the answer.
    assert lucene_query("What did Ross say to Rachel?") == r'Ross say to Rachel\? "Ross say"'
    assert lucene_query("Where is my order") == "order"


def test_no_phrase_spans_a_stop_word() -> None:
    # The analyser drops "of" and "the": a phrase over them would demand a gap, so none is built.
    assert lucene_query("price of the hotel") == "price of the hotel"


@pytest.mark.parametrize(
    "text", [None, "", "   ", "?? !! ...", "&& || -", "what is it?", "Who did THAT to them"]
)
def test_nothing_searchable_means_no_query(text: str | None) -> None:
    assert lucene_query(text) is None


def test_long_questions_are_capped() -> None:
    built = lucene_query(" ".join(f"w{i}" for i in range(500)))
    assert built is not None
    terms = [t for t in built.split() if not t.startswith('"') and not t.endswith('"')]
    assert len(terms) == MAX_TERMS
    assert built.count('"') == 2 * (MAX_TERMS - 1)  # a phrase per adjacent pair, no more


def test_a_scoped_query_requires_every_term_at_no_weight_and_the_words_too() -> None:
    words = lucene_query("aisle seat")
    assert words is not None
    scoped = scoped_query(words, ["01234567890123456789", "98765432109876543210"])
    assert scoped == (
        '+scope:01234567890123456789^0 +scope:98765432109876543210^0 +(aisle seat "aisle seat")'
    )


def test_combined_search_names_each_parameter_per_label_and_tags_rows() -> None:
    parts = (("Episode", KEYWORD_SEARCH["Episode"]), ("Fact", KEYWORD_SEARCH["Fact"]))
    statement = combined(parts)
    assert statement.count("UNION ALL") == 1
    assert "RETURN 'Episode' AS label" in statement and "RETURN 'Fact' AS label" in statement
    # One record a part, its rows as a list: the driver's cost is per record.
    assert statement.count("collect({key: key") == 2 and "AS rows" in statement
    for name in ("index", "lucene", "k"):
        assert f"${per_label(name, 'Episode')}" in statement
        assert f"${per_label(name, 'Fact')}" in statement
        # No bare per-label parameter is left for two parts to share by mistake.
        assert not re.search(rf"\${name}\b", statement)
    assert "$limit" in statement and "$agent_key" in statement
    with pytest.raises(ValueError, match="at least one part"):
        combined(())


def test_a_recalled_message_is_attributed_however_many_lines_it_has() -> None:
    def item(kind: Any, text: str, evidence: list[str]) -> RecallItem:
        return RecallItem(
            kind=kind, key="k", text=text, score=1.0, evidence=evidence, speaker_label="Ana (@ana)"
        )

    assert item("episode", "one line", ["m1"]).attributed() == "Ana (@ana): one line"
    assert item("episode", "first\nsecond", ["m1"]).attributed() == "Ana (@ana): first\nsecond"
    window = "Ana (@ana): first\nBo (@bo): second"
    assert item("episode", window, ["m1", "m2"]).attributed() == window
    assert item("fact", "Ana (@ana) prefers tea", ["m1"]).attributed() == "Ana (@ana) prefers tea"
    unlabelled = RecallItem(kind="episode", key="k", text="hi", score=1.0, evidence=["m1"])
    assert unlabelled.attributed() == "someone: hi"
