"""Whether a commitment's words point back at a message before it (pure)."""

from __future__ import annotations

import re

import pytest

from pipeline.english.reference import POINTS_BACK_MATCH, refers_back


@pytest.mark.parametrize(
    "text",
    [
        "do that for you",
        "check it",
        "get those IDs and contact you again soon",
        "take care of this first thing tomorrow",
        "send them over",
    ],
)
def test_a_pronoun_for_something_said_before_points_back(text: str) -> None:
    assert refers_back(text)


@pytest.mark.parametrize(
    "text",
    [
        "send the hotel list",
        "check entry rules against the March expiry",
        "make sure that the refund goes through",  # "that" opens a clause here
        "book the flight so that you can board early",
    ],
)
def test_words_that_name_what_is_owed_do_not(text: str) -> None:
    assert not refers_back(text)


def test_the_graph_pattern_is_the_same_test_on_a_whole_string() -> None:
    pattern = re.compile(POINTS_BACK_MATCH)
    for text in ["Devon (@devon) committed to Sarah (@sarah): do that\nfor you", "Check IT"]:
        assert pattern.fullmatch(text) and refers_back(text)
    for text in ["Devon (@devon) committed: send the list", "make sure that the refund is done"]:
        assert not pattern.fullmatch(text) and not refers_back(text)
