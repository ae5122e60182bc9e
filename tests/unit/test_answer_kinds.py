"""The kinds of value a question asks for and a message states (pipeline/english/answers.py)."""

from __future__ import annotations

import pytest

from pipeline.english.answers import ValueKind, asked_kinds, stated_kinds

ALL: frozenset[ValueKind] = frozenset({"time", "date", "money", "duration", "count", "identifier"})


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("What time does her train leave?", {"time"}),
        ("What's the latest she can check out?", {"time"}),
        ("When is the follow-up call?", {"time", "date"}),
        ("Can you tell me when she lands?", {"time", "date"}),
        ("By what time must he check in?", {"time", "date"}),
        ("Which day of the month is rent taken?", {"date"}),
        ("What date did they move the launch to?", {"date"}),
        ("How much did the repair cost?", {"money"}),
        ("What's the nightly rate he agreed to?", {"money"}),
        ("How long is the warranty?", {"duration"}),
        ("How many nights is the stay?", {"duration"}),
        ("How many bags is he checking?", {"count"}),
        ("Which card should the deposit go on?", {"identifier"}),
        ("What's the confirmation code?", {"identifier"}),
        # Asking for no value of these kinds: reasons, people, preferences, events.
        ("Why did she cancel?", set()),
        ("Who is picking up the keys?", set()),
        # "when" in a clause of a question asking for something else.
        ("Who is meeting her son when he lands?", set()),
        ("Where should the truck stop when delivering?", set()),
        ("When he moved the flight, which airport did he connect through?", set()),
        ("What kind of seat does he like?", set()),
        ("", set()),
    ],
)
def test_asked_kinds(question: str, kinds: set[str]) -> None:
    assert asked_kinds(question) == kinds


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("The flight lands at 4:45 PM.", {"time", "count"}),
        ("Nothing after 9 at night, please.", {"time", "count"}),
        ("Let's meet at noon.", {"time"}),
        ("Move it to June 14th.", {"date"}),
        ("Make it the 2nd.", {"date"}),
        ("Any Tuesday works.", {"date"}),
        ("We fly out in May.", {"date"}),
        ("It comes to $214 with the bag.", {"money", "count"}),
        ("That's 80 euros a night.", {"money", "count", "duration"}),
        ("I need at least three hours between flights.", {"duration", "count"}),
        ("Keep it to a 45-minute layover.", {"duration", "count"}),
        ("Booked, confirmation QK7R2M.", {"identifier"}),
        ("Use the card ending in 3390.", {"identifier", "count"}),
        ("My user ID is daniel_whitford_4821.", {"identifier"}),
        ("Send it to g.papas@example.com.", {"identifier"}),
        ("Use 555-0142 instead.", {"identifier", "count"}),
        ("Colorado licence 09-231-7745.", {"identifier", "count"}),
        ("The new card is 8820 5517 64.", {"identifier", "count"}),
        # Groups of digits too few to be a number to call, or a date written as one.
        ("From 14 to 18 March, 10 30 each day.", {"date", "count"}),
        ("Flying on 2024-05-17.", {"date", "count"}),
        # None of them: no number, no code, and "may" or "march" as common words.
        ("You may want to march over there and ask.", set()),
        ("Thanks, that sounds great.", set()),
    ],
)
def test_stated_kinds(text: str, kinds: set[str]) -> None:
    assert stated_kinds(text, ALL) == kinds


def test_stated_kinds_only_looks_for_what_is_asked() -> None:
    text = "The 4:45 PM flight is $214."
    assert stated_kinds(text, frozenset({"money"})) == {"money"}
    assert stated_kinds(text, frozenset({"duration"})) == frozenset()
    assert stated_kinds(text, frozenset()) == frozenset()
