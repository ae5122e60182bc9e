"""Recall ranking without services: fusion, neighbour windows, the message budget."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from pipeline.rank import Passage, Window, fuse, windows, within_budget

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def passage(n: int, channel: str = "c1", label: str | None = "Devon (@devon)") -> Passage:
    return Passage(
        key=f"k{n:02d}",
        id=f"m{n}",
        channel=channel,
        at=T0 + timedelta(minutes=n),
        speaker_label=label,
        text=f"text {n}",
    )


def window(numbers: Iterable[int], hits: set[str], score: float) -> Window:
    """A window over messages `numbers` (the first hit, by key, leads)."""
    ps = tuple(passage(n, channel=f"c{min(numbers)}") for n in numbers)
    return Window(passages=ps, hits=frozenset(hits), score=score, lead=min(hits))


def test_fusion_rewards_agreement_and_counts_a_repeat_once() -> None:
    scores = fuse([["a", "b", "c"], ["b", "d"], ["a", "a", "b"]])
    assert scores["b"] > scores["a"] > scores["d"] > scores["c"]
    assert scores["a"] == 2 / 61
    assert scores["c"] == 1 / 63


def test_fusion_weights_scale_each_list() -> None:
    scores = fuse([["a"], ["b"]], weights=[2.0, 1.0])
    assert scores["a"] == 2 * scores["b"]


def test_a_hit_and_its_neighbours_become_one_window_in_time_order() -> None:
    ps = {p.key: p for p in (passage(1), passage(2), passage(3))}
    (w,) = windows({"k02": 0.5}, ps, {"k02": ["k03", "k01"]})
    assert w.evidence == ("m1", "m2", "m3")
    assert w.text == "Devon (@devon): text 1\nDevon (@devon): text 2\nDevon (@devon): text 3"
    assert w.hits == {"k02"} and w.best.id == "m2" and w.score == 0.5


def test_a_single_message_window_shows_the_bare_text() -> None:
    (w,) = windows({"k01": 0.1}, {"k01": passage(1)}, {})
    assert w.text == "text 1"


def test_overlapping_and_adjacent_windows_merge_but_channels_never_do() -> None:
    ps = {p.key: p for p in [passage(n) for n in range(1, 8)] + [passage(9, channel="c2")]}
    hits = {"k02": 0.2, "k04": 0.4, "k07": 0.1, "k09": 0.3}
    around = {"k02": ["k01", "k03"], "k04": ["k03", "k05"], "k07": ["k06"], "k09": []}
    found = windows(hits, ps, around)
    assert [w.evidence for w in found] == [
        ("m1", "m2", "m3", "m4", "m5"),  # shares m3: merged, scored by its best hit
        ("m9",),
        ("m6", "m7"),  # starts after m5 without touching it
    ]
    assert found[0].score == 0.4 and found[0].hits == {"k02", "k04"}


def test_windows_that_only_follow_each_other_stay_apart() -> None:
    # Messages the agent never observed may sit between them.
    ps = {p.key: p for p in (passage(1), passage(2), passage(3), passage(4))}
    found = windows({"k01": 0.2, "k04": 0.1}, ps, {"k01": ["k02"], "k04": ["k03"]})
    assert [w.evidence for w in found] == [("m1", "m2"), ("m3", "m4")]


def test_shrinking_drops_the_farthest_neighbour_first_and_keeps_hits() -> None:
    ps = tuple(passage(n) for n in range(1, 6))
    w = Window(passages=ps, hits=frozenset({"k02"}), score=1.0, lead="k02")
    sizes = []
    current: Window | None = w
    while current is not None:
        sizes.append(current.evidence)
        current = current.shrink()
    assert sizes == [
        ("m1", "m2", "m3", "m4", "m5"),
        ("m1", "m2", "m3", "m4"),
        ("m1", "m2", "m3"),
        ("m2", "m3"),  # a tie: the earlier one goes (answers follow questions)
        ("m2",),
    ]


def test_a_window_of_hits_shrinks_towards_its_lead() -> None:
    ps = {p.key: p for p in (passage(1), passage(2), passage(3), passage(4))}
    scores = {"k01": 0.1, "k02": 0.2, "k03": 0.4, "k04": 0.3}
    around = {"k01": ["k02"], "k02": ["k01", "k03"], "k03": ["k02", "k04"], "k04": ["k03"]}
    (w,) = windows(scores, ps, around)  # four hits in a row: one window, led by the best
    assert w.lead == "k03" and w.score == 0.4
    (fitted,) = within_budget([w], 2, shrink=Window.shrink)
    assert fitted.evidence == ("m3", "m4") and fitted.hits == {"k03", "k04"}


def test_the_budget_counts_messages_not_items() -> None:
    big = window(range(1, 6), {"k03"}, 3)
    small = window([9], {"k09"}, 2)
    tiny = window([12], {"k12"}, 1)
    # Without shrinking, the 5-message window cannot fit 3 messages; the small ones still do.
    assert within_budget([big, small, tiny], 3) == [small, tiny]
    # With shrinking it keeps its hit and loses its farthest neighbours until it fits.
    chosen = within_budget([tiny, small, big], 4, shrink=Window.shrink)
    assert [c.evidence for c in chosen] == [("m2", "m3", "m4", "m5")]
    chosen = within_budget([tiny, small, big], 3, shrink=Window.shrink)
    assert [c.evidence for c in chosen] == [("m2", "m3", "m4")]


def test_messages_already_counted_cost_nothing_again() -> None:
    first = window([1, 2], {"k01"}, 2)
    same = window([2], {"k02"}, 1)
    other = window([5], {"k05"}, 0.5)
    # m2 is already shown: the second window costs nothing, so `other` still fits in 3.
    assert within_budget([first, same, other], 3) == [first, same, other]
    assert within_budget([first, other], 2) == [first]


def test_an_item_without_evidence_costs_one() -> None:
    empty = Window(passages=(), hits=frozenset(), score=1, lead="")
    assert within_budget([empty, empty, empty], 2) == [empty, empty]
