"""Whether a commitment's words point back at a message before it (pure): the pattern the
context's statement matches in Neo4j, here under Python's `re`, whose syntax agrees."""

from __future__ import annotations

import re

import pytest

from pipeline.english.reference import POINTS_BACK_MATCH


def points_back(text: str) -> bool:
    return re.fullmatch(POINTS_BACK_MATCH, text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "do that for you",
        "check it",
        "get those IDs and contact you again soon",
        "take care of this first thing tomorrow",
        "send them over",
        "Devon (@devon) committed to Sarah (@sarah): do that\nfor you",  # across lines
        "Check IT",
    ],
)
def test_a_pronoun_for_something_said_before_points_back(text: str) -> None:
    assert points_back(text)


@pytest.mark.parametrize(
    "text",
    [
        "send the hotel list",
        "check entry rules against the March expiry",
        "make sure that the refund goes through",  # "that" opens a clause here
        "book the flight so that you can board early",
        "Devon (@devon) committed: send the list",
    ],
)
def test_words_that_name_what_is_owed_do_not(text: str) -> None:
    assert not points_back(text)
