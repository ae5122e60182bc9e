"""The recall benchmark's metric and reference BM25 on hand-made rankings: the K-message budget,
recall@k and message-rank MRR."""

from __future__ import annotations

import pytest

from bench.bm25 import BM25, Document, windows
from bench.recall_metric import (
    item_costs,
    messages_needed,
    score,
    split_by_reference,
    within_budget,
)


def test_an_item_costs_the_messages_it_adds() -> None:
    # A window of three, then one overlapping it by two, then a repeat, then an empty summary.
    ranking = [["m1", "m2", "m3"], ["m2", "m3", "m4"], ["m1"], []]
    assert item_costs(ranking) == [3, 1, 0, 1]


def test_a_long_evidence_list_does_not_buy_recall() -> None:
    # Item-counted, the gold message is at rank 1; message-counted it needs a budget of 12.
    long_item = [f"x{i}" for i in range(11)] + ["gold"]
    assert messages_needed([long_item], {"gold"}) == 12
    assert within_budget([long_item], 10) == []  # it does not fit, and reading stops there
    # Reading stops at the first item that does not fit: a smaller later item is not read.
    filler = [f"y{i}" for i in range(12)]
    assert within_budget([["a"], filler, ["gold"]], 10) == ["a"]
    assert messages_needed([["a"], filler, ["gold"]], {"gold"}) == 14


def test_any_gold_message_answers_and_duplicates_are_free() -> None:
    ranking = [["a"], ["b", "c"], ["a"], ["g2"], ["g1"]]
    assert messages_needed(ranking, {"g1", "g2"}) == 4
    assert messages_needed(ranking, {"nowhere"}) is None
    assert within_budget(ranking, 4) == ["a", "b", "c", "g2"]


def test_recall_at_k_and_mrr() -> None:
    needed = [1, 2, 5, 10, 11, None]
    scores = score(needed)
    assert scores.questions == 6
    assert scores.recall == {1: pytest.approx(1 / 6), 5: pytest.approx(3 / 6), 10: 4 / 6}
    assert scores.mrr == pytest.approx((1 + 1 / 2 + 1 / 5 + 1 / 10 + 1 / 11) / 6)
    assert score([]).recall == {1: 0.0, 5: 0.0, 10: 0.0}


def test_bm25_ranks_the_rarer_matching_term_first() -> None:
    docs = [
        Document("the cat sat on the mat", ("m1",)),
        Document("the dog ate the homework", ("m2",)),
        Document("a dog and a cat", ("m3",)),
    ]
    index = BM25(docs)
    assert [d.evidence for d in index.search("homework dog")] == [("m2",), ("m3",)]
    assert index.search("nothing matches") == []


def test_windows_carry_their_neighbours() -> None:
    docs = windows([("m1", "one"), ("m2", "two"), ("m3", "three")])
    assert [d.evidence for d in docs] == [("m1", "m2"), ("m1", "m2", "m3"), ("m2", "m3")]
    assert docs[1].text == "one two three"


def test_a_retrievers_first_items_split_by_what_the_reference_answers_first() -> None:
    reference = [True, True, False, False, False]
    first = [True, False, True, False, False]
    assert split_by_reference(reference, first) == ((1, 2), (1, 3))
    with pytest.raises(ValueError):
        split_by_reference(reference, first[:-1])
