"""Messages that replace what was said shortly before them (pipeline/english/revisions.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.english.answers import asked_kinds
from pipeline.english.revisions import REACH, asks_current, revised_by, revises
from pipeline.rank import Passage
from pipeline.scores import score_messages

RETURN_LEG = [
    ("m0", "I need to change my return. Right now I'm flying back on March 3rd."),
    ("m1", "What date would you like instead?"),
    ("m2", "The conference got extended, so March 6th if there's an evening flight."),
    ("m3", "There's a 6:40 PM departure with a $75 change fee."),
    ("m4", "Let me check the programme with my office first."),
    ("m5", "They wrap up on the 5th. Put me on an evening flight on March 5th instead."),
    ("m6", "Done, your card ending 6612 was charged."),
]


def test_a_later_value_said_to_replace_one_replaces_every_earlier_value_of_its_kind() -> None:
    replaced = revised_by([RETURN_LEG], asked_kinds("Which day is she now flying back?"))
    # m1 asks and states no date; m5 replaces both dates before it; m3 states none.
    assert replaced == {"m0": ["m5"], "m2": ["m5"]}


def test_a_revision_of_another_kind_of_value_replaces_nothing_asked_for() -> None:
    stretch = [
        ("c0", "Put the deposit on my Visa ending 1184, and the pickup is on the 14th."),
        ("c1", "Can it go on my debit card ending 5530 instead?"),
    ]
    assert revised_by([stretch], asked_kinds("Which day is the pickup?")) == {}
    assert revised_by([stretch], asked_kinds("Which card holds the deposit?")) == {"c0": ["c1"]}


def test_without_a_kind_asked_any_value_kind_but_a_count_makes_one_slot() -> None:
    stretch = [
        ("d0", "Texts go to the mobile ending 88 on your profile, and 2 reminders a week."),
        ("d1", "That's my old phone. Use 555-0142 instead, and 3 reminders."),
    ]
    assert revised_by([stretch], frozenset()) == {"d0": ["d1"]}
    counts_only = [("e0", "Two bags, please."), ("e1", "Actually make it 3 bags instead.")]
    assert revised_by([counts_only], frozenset()) == {}


def test_a_message_without_revising_words_replaces_nothing() -> None:
    stretch = [("f0", "Flying back March 3rd."), ("f1", "Now it's March 6th, if possible.")]
    assert revised_by([stretch], asked_kinds("Which day is he back?")) == {}


def test_a_revision_reaches_back_only_so_far_and_only_within_its_stretch() -> None:
    far = [("g0", "Booked for March 3rd.")]
    far += [(f"g{n}", "Anything else?") for n in range(1, REACH + 1)]
    far += [("g-last", "Move it to March 9th instead.")]
    asked = asked_kinds("Which day is it booked for?")
    assert revised_by([far], asked) == {}
    assert revised_by([far[:1], far[-1:]], asked) == {}
    assert revised_by([far[:1] + far[-1:]], asked) == {"g0": ["g-last"]}


@pytest.mark.parametrize(
    ("question", "current"),
    [
        ("Which day is she now flying back?", True),
        ("What number should get the updates?", True),
        ("What date was the return originally booked for?", False),
        ("Which card did he use at first?", False),
        ("What was her old phone number?", False),
        ("Why did he turn down the waiver?", False),
        ("What was the reason for the change?", False),
    ],
)
def test_a_question_asks_for_the_value_as_it_stands_unless_it_says_otherwise(
    question: str, current: bool
) -> None:
    assert asks_current(question) is current


def test_scored_for_a_question_the_revision_leads_unless_a_reason_is_asked() -> None:
    start = datetime(2026, 3, 1, 9, tzinfo=UTC)
    passages = {
        key: Passage(key, key, "ch", start + timedelta(minutes=n), None, text)
        for n, (key, text) in enumerate(RETURN_LEG)
    }
    stretch = [[key for key, _ in RETURN_LEG]]
    # The first date matches the question best; m5 matches it a little.
    relevance = {"m0": 1.0, "m5": 0.2}

    def best(question: str) -> str:
        scores, _ = score_messages(
            question, passages, stretch, relevance, passed=relevance, radius=1, replaced_by={}
        )
        return max(scores, key=scores.__getitem__)

    assert best("Which day is she now flying back?") == "m5"
    assert best("Which day was she originally flying back?") == "m0"
    assert best("Why is she flying back?") == "m0"


@pytest.mark.parametrize(
    "text",
    [
        "Use 555-0142 instead.",
        "The aisle rather than the window.",
        "Not that one, the blue one.",
        "Scratch that, Tuesday.",
        "On second thought, make it 6.",
        "I've changed my mind: the 5th.",
        "Change of plans, we fly Friday.",
        "I no longer use that card.",
        "That's my old number.",
        "Use the new one ending 3056.",
        "Correction: it's 14:30.",
        "Sorry, I meant Thursday.",
        "Updated. You'll now return the car to Glasgow Central.",
        "Your freeze now runs from 1 May to 31 July.",
        "Completion has slipped. It'll be Monday 1 July now",
        "Your Monday slot has been cancelled and you're booked in for Friday.",
        "We've rescheduled the visit to the 9th.",
    ],
)
def test_every_form_of_revising_wording_is_found(text: str) -> None:
    assert revises(text)


@pytest.mark.parametrize(
    "text",
    [
        "Hold the room, please.",
        "Remind me on Friday.",
        "A new booking for two.",
        "",
        "Now, which day suits you?",
        "Can you do it now?",
        "I'm known as Sam.",
    ],
)
def test_words_that_only_contain_a_revising_word_are_not_revisions(text: str) -> None:
    assert not revises(text)
