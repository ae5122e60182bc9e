"""Windows that show a replaced value also show what replaced it (pipeline/windows.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipeline.rank import MAX_WINDOW, Passage, Unit, select
from pipeline.windows import GAP_MARK, Window, follow_revisions, group

T0 = datetime(2026, 6, 3, 9, 0, tzinfo=UTC)
# One clinic chat: Monday is booked at m3, and m8 moves it to Friday.
TEXTS = [
    "Hi, I need to book a follow-up for my blood pressure review",
    "Dr Patel has Monday 10 June at 9:15am, Dr Greene Friday 14 June at 11:00am.",
    "Monday 9:15 with Dr Patel please",
    "Booked: Monday 10 June, 9:15am with Dr Patel.",
    "thank you",
    "Oh no, I'm away on Monday after all",
    "Shall I look for another slot?",
    "Friday at 11 would be best",
    "Done - your Monday appointment has been cancelled and you're booked in for Friday 11am.",
    "Great, thanks",
]
PASSAGES = {
    f"k{n}": Passage(f"k{n}", f"m{n}", "c1", T0 + timedelta(minutes=n), "Aisha (@aisha)", text)
    for n, text in enumerate(TEXTS)
}
STRETCH = [[f"k{n}" for n in range(len(TEXTS))]]
LATER = {"k3": ["k8"]}


def shown(scores: dict[str, float], budget: int) -> list[Unit | Window]:
    units = [Unit(k, v, (PASSAGES[k].id,), message=PASSAGES[k]) for k, v in scores.items()]
    windows = group(select(units, budget), STRETCH, scores)
    return follow_revisions(windows, LATER, PASSAGES, STRETCH)


def keys(item: Unit | Window) -> list[str]:
    assert isinstance(item, Window)
    return [p.key for p in item.passages]


def test_a_window_with_a_replaced_value_also_shows_the_replacement_after_a_gap() -> None:
    items = shown({"k0": 1.0, "k1": 0.6, "k2": 0.5, "k3": 0.7}, budget=5)
    first = items[0]
    assert keys(first) == ["k0", "k1", "k2", "k3", "k8"]
    assert isinstance(first, Window) and first.lead == "k0"
    assert first.text.splitlines()[-2:] == [GAP_MARK, f"Aisha (@aisha): {TEXTS[8]}"]
    assert first.evidence[-1] == "m8"


def test_the_budget_still_counts_every_message_shown() -> None:
    scores = {"k0": 1.0, "k1": 0.6, "k2": 0.5, "k3": 0.7, "k5": 0.2, "k6": 0.1}
    items = shown(scores, budget=6)
    assert sum(len(keys(item)) for item in items) == 6
    # The lowest-ranked window gave its last message up.
    assert [keys(item) for item in items] == [["k0", "k1", "k2", "k3", "k8"], ["k5"]]


def test_a_full_window_gives_up_the_message_farthest_from_its_lead() -> None:
    scores = {"k0": 0.3, "k1": 0.6, "k2": 1.0, "k3": 0.7, "k4": 0.5}
    items = shown(scores, budget=MAX_WINDOW)
    assert keys(items[0]) == ["k1", "k2", "k3", "k4", "k8"]
    assert sum(len(keys(item)) for item in items) == MAX_WINDOW


def test_a_replacement_shown_higher_up_is_left_where_it_is() -> None:
    items = shown({"k8": 1.0, "k3": 0.5}, budget=5)
    assert [keys(item) for item in items] == [["k8"], ["k3"]]


def test_a_replacement_in_a_lower_window_moves_up_and_is_not_shown_twice() -> None:
    items = shown({"k3": 1.0, "k7": 0.4, "k8": 0.3}, budget=5)
    assert [keys(item) for item in items] == [["k3", "k8"], ["k7"]]
    first, second = items
    assert isinstance(first, Window) and first.after_gap == frozenset({"k8"})
    assert isinstance(second, Window) and GAP_MARK not in second.text


def test_windows_without_replaced_values_are_unchanged() -> None:
    items = shown({"k0": 1.0, "k1": 0.5, "k5": 0.4}, budget=5)
    assert [keys(item) for item in items] == [["k0", "k1"], ["k5"]]
    assert all(isinstance(item, Window) and not item.after_gap for item in items)
