"""Recall ranking without services: score fusion, context scores, the message budget, windows."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.rank import (
    ANSWER_KIND_BOOST,
    CLEAR_MATCH_COVERAGE,
    MAX_WINDOW,
    NEIGHBOUR_SHARE,
    Passage,
    Unit,
    combine,
    context_scores,
    label_share,
    lead_clear_match,
    normalise,
    prefer_current,
    prefer_stated,
    runs,
    select,
)
from pipeline.windows import Window, group, split_run

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


def message(n: int, score: float, channel: str = "c1") -> Unit:
    p = passage(n, channel)
    return Unit(p.key, score, (p.id,), message=p)


def test_normalise_maps_the_floor_to_zero_and_the_best_to_one() -> None:
    assert normalise({"a": 4.0, "b": 1.0}) == {"a": 1.0, "b": 0.25}
    assert normalise({"a": 0.9, "b": 0.8, "c": 0.7}, floor=0.7) == pytest.approx(
        {"a": 1.0, "b": 0.5, "c": 0.0}
    )
    assert normalise({"a": 0.5, "b": 0.5}, floor=0.5) == {"a": 1.0, "b": 1.0}
    assert normalise({}) == {}


def test_agreeing_retrievers_add_up_and_weights_scale_each() -> None:
    keyword = {"both": 0.6, "keyword": 1.0}
    vector = {"both": 1.0, "vector": 0.9}
    fused = combine([(keyword, 1.0), (vector, 0.5)])
    assert fused == pytest.approx({"both": 1.1, "keyword": 1.0, "vector": 0.45})
    assert max(fused, key=fused.__getitem__) == "both"


def test_kinds_compete_on_their_scores_not_on_their_list() -> None:
    # One merged list per retriever: a weak fact stays below a strong message (under fusion of
    # one list per kind, each kind's top scored the same and the fact won the tie).
    keyword = normalise({"episode": 8.0, "fact": 2.0})
    vector = normalise({"episode": 0.9, "fact": 0.6, "other": 0.5}, floor=0.5)
    fused = combine([(keyword, 1.0), (vector, 0.5)])
    assert fused["episode"] > fused["fact"] > fused["other"]


def test_runs_join_sequences_that_share_messages() -> None:
    ps = {p.key: p for p in [passage(n) for n in range(1, 8)] + [passage(9, channel="c2")]}
    found = runs(ps, [["k01", "k02", "k03"], ["k03", "k04"], ["k06", "k07"], ["k09"]])
    assert found == [["k01", "k02", "k03", "k04"], ["k05"], ["k06", "k07"], ["k09"]]


def test_runs_end_where_the_conversation_paused() -> None:
    ps = {p.key: p for p in [passage(n) for n in range(1, 4)]}
    days_later = Passage("k04", "m4", "c1", T0 + timedelta(days=2), "Devon (@devon)", "text 4")
    ps[days_later.key] = days_later
    found = runs(ps, [["k01", "k02", "k03", "k04"]])
    assert found == [["k01", "k02", "k03"], ["k04"]]
    # A pause of the gap itself is one sitting; a wider gap joins the days-apart messages.
    assert runs(ps, [["k03", "k04"]], gap=timedelta(days=3)) == [["k01"], ["k02"], ["k03", "k04"]]


def test_an_unmatched_answer_next_to_a_strong_match_outranks_a_weak_lone_match() -> None:
    stretches = [["k01", "k02", "k03"], ["k07"]]
    scores = context_scores({"k02": 1.0, "k07": 0.3}, stretches, radius=1)
    assert scores["k02"] == 1.0
    assert scores["k01"] == scores["k03"] == NEIGHBOUR_SHARE
    assert scores["k03"] > scores["k07"] == 0.3


def test_a_run_of_matches_beats_a_lone_match_and_the_share_decays_with_distance() -> None:
    stretches = [["k01", "k02", "k03", "k04", "k05"], ["k09"]]
    scores = context_scores({"k02": 0.5, "k03": 0.5, "k09": 0.5}, stretches, radius=2)
    assert scores["k02"] > scores["k09"]
    assert scores["k05"] == pytest.approx(NEIGHBOUR_SHARE**2 * 0.5)
    assert context_scores({"k02": 1.0}, stretches, radius=0)["k01"] == 0.0


def test_a_neighbour_passes_on_what_it_said_not_who_said_it() -> None:
    # Five messages all match the question on their speaker's name (1.0 each); only the last
    # also says what was asked about (0.2 more). Passing the name on, its neighbour wins.
    stretch = [["k01", "k02", "k03", "k04", "k05"]]
    relevance = {"k01": 1.0, "k02": 1.0, "k03": 1.0, "k04": 1.0, "k05": 1.2}
    named = context_scores(relevance, stretch, radius=1)
    assert max(named, key=named.__getitem__) == "k04"
    said = {"k01": 0.0, "k02": 0.0, "k03": 0.0, "k04": 0.0, "k05": 0.2}
    passed = context_scores(relevance, stretch, radius=1, shared=said)
    assert max(passed, key=passed.__getitem__) == "k05"
    # A message's own score is its whole relevance still, name and all.
    assert passed["k01"] == 1.0
    assert passed["k04"] == pytest.approx(1.0 + NEIGHBOUR_SHARE * 0.2)


def test_the_message_stating_the_value_asked_for_leads_its_window() -> None:
    # The opening raised the matter (k01, the best match); the value comes five messages later
    # (k06, a weaker match). Windows hold at most MAX_WINDOW, so only the boost shows k06 first.
    stretch = [[f"k{n:02d}" for n in range(1, 9)]]
    relevance = {"k01": 1.0, "k02": 0.6, "k03": 0.3, "k05": 0.3, "k06": 0.8, "k07": 0.3}
    plain = context_scores(relevance, stretch, radius=1)
    stated = prefer_stated(plain, ["k06"])
    assert max(plain, key=plain.__getitem__) == "k01"
    assert max(stated, key=stated.__getitem__) == "k06"
    assert stated["k06"] == pytest.approx(plain["k06"] * ANSWER_KIND_BOOST)
    # Nothing else moves: the boost lends nothing to neighbours.
    assert {k: v for k, v in stated.items() if k != "k06"} == {
        k: v for k, v in plain.items() if k != "k06"
    }
    units = [message(n, stated[f"k{n:02d}"]) for n in range(1, 9)]
    first = group(select(units, 8), stretch, relevance)[0]
    assert isinstance(first, Window) and first.lead == "k06"
    assert "m6" in first.evidence and len(first.evidence) <= MAX_WINDOW


def test_a_clearly_better_match_keeps_the_lead_over_a_stated_value() -> None:
    scores = {"k01": 2.0, "k06": 1.0}
    assert max(prefer_stated(scores, ["k06"]).values()) == 2.0
    assert prefer_stated(scores, []) == scores


def test_the_label_share_is_the_keyword_score_less_the_contents_normalised_and_weighted() -> None:
    keyword = {"a": 4.0, "b": 3.0, "c": 1.0}
    content = {"a": 4.0, "b": 1.0}  # c's content was not reached: all of it is the label's
    assert label_share(keyword, content, 0.5) == {"a": 0.0, "b": 0.25, "c": 0.125}
    # A content score above the keyword score (rounding) never makes a negative share.
    assert label_share({"a": 1.0}, {"a": 1.0000001}, 1.0) == {"a": 0.0}
    assert label_share({}, {"a": 1.0}, 1.0) == {}


def test_the_budget_counts_messages_and_skips_what_does_not_fit() -> None:
    fact = Unit("f", 0.9, ("m1", "m2", "m3"))
    units = [message(1, 1.0), fact, message(5, 0.5), message(6, 0.4)]
    # m1 is counted already: the fact costs two more; m5 then fills the budget.
    assert [u.key for u in select(units, 4)] == ["k01", "f", "k05"]
    # Too big for what is left: skipped for smaller ones.
    assert [u.key for u in select(units, 2)] == ["k01", "k05"]


def test_a_neighbour_that_scores_nothing_is_not_taken_to_fill_the_budget() -> None:
    # k09 was fetched as a neighbour of k01, but a pause parts them: nothing points to it. k05
    # is a retriever's weakest candidate, which scores 0 but was found.
    lone = dataclasses.replace(message(9, 0.0), found=False)
    weakest = message(5, 0.0)
    assert [u.key for u in select([message(1, 1.0), lone, weakest], 10)] == ["k01", "k05"]


def test_an_item_without_evidence_costs_one() -> None:
    empty = [Unit(f"s{i}", 1.0, ()) for i in range(3)]
    assert len(select(empty, 2)) == 2


def test_consecutive_chosen_messages_show_as_one_window_where_the_best_was() -> None:
    stretches = [["k01", "k02", "k03", "k04"], ["k09"]]
    fact = Unit("f", 0.7, ("m9",))
    chosen = select(
        [message(2, 0.5), message(3, 1.0), message(4, 0.2), fact, message(9, 0.6, "c2")], 10
    )
    shown = group(chosen, stretches, hits=["k03", "k09"])
    assert [s.evidence for s in shown] == [("m2", "m3", "m4"), ("m9",), ("m9",)]
    first = shown[0]
    assert isinstance(first, Window)
    assert first.lead == "k03" and first.score == 1.0 and first.hits == {"k03"}
    assert first.text.splitlines() == [
        "Devon (@devon): text 2",
        "Devon (@devon): text 3",
        "Devon (@devon): text 4",
    ]
    assert shown[1] is fact  # a fact and a message citing the same message, each once
    assert isinstance(shown[2], Window) and shown[2].text == "text 9"


def test_messages_with_a_gap_between_them_stay_apart() -> None:
    stretches = [["k01", "k02", "k03"]]
    shown = group(select([message(1, 0.4), message(3, 0.9)], 5), stretches, hits=["k01", "k03"])
    assert [s.evidence for s in shown] == [("m3",), ("m1",)]


def test_every_message_shown_fits_the_budget() -> None:
    stretches = [[f"k{n:02d}" for n in range(1, 21)]]
    scores = context_scores({"k05": 1.0, "k12": 0.8, "k18": 0.3}, stretches, radius=2)
    units = [message(n, scores[f"k{n:02d}"]) for n in range(1, 21)]
    shown = group(select(units, 7), stretches, hits=["k05", "k12", "k18"])
    assert sum(len(s.evidence) for s in shown) <= 7
    assert [s.score for s in shown] == sorted((s.score for s in shown), reverse=True)
    assert shown[0].evidence == ("m4", "m5", "m6")


def test_a_long_run_is_cut_around_its_best_message() -> None:
    # Ten chosen messages in a row: shown as windows of at most MAX_WINDOW, the best message's
    # own window first: the five around it that score most together.
    stretches = [[f"k{n:02d}" for n in range(1, 11)]]
    scores = [0.1, 0.2, 0.3, 0.2, 0.4, 0.9, 0.5, 0.45, 0.1, 0.05]
    units = [message(n, score) for n, score in enumerate(scores, start=1)]
    shown = group(select(units, 10), stretches, hits=["k06"])
    assert MAX_WINDOW == 5
    assert [s.evidence for s in shown] == [
        ("m4", "m5", "m6", "m7", "m8"),
        ("m1", "m2", "m3"),
        ("m9", "m10"),
    ]
    assert [s.score for s in shown] == [0.9, 0.3, 0.1]
    assert sorted(m for s in shown for m in s.evidence) == sorted(f"m{n}" for n in range(1, 11))


def test_the_best_messages_window_is_the_five_around_it_that_score_most_together() -> None:
    # Each neighbour before it outscores the one after, so growing a neighbour at a time would
    # take the four before it; but a message three after it scores twice any of those.
    scores = [0.3, 0.35, 0.4, 0.9, 0.1, 0.2, 0.8, 0.05]
    run = [message(n, score) for n, score in enumerate(scores, start=1)]
    pieces = split_run(run, 5)
    assert [[u.key for u in piece] for piece in pieces] == [
        ["k01", "k02"],
        ["k03", "k04", "k05", "k06", "k07"],
        ["k08"],
    ]
    # Equal sums: the earlier window (what led to the best message).
    even = [message(n, score) for n, score in enumerate([0.5, 0.1, 0.9, 0.1, 0.5], start=1)]
    assert [[u.key for u in p] for p in split_run([*even, message(6, 0.0)], 5)] == [
        ["k01", "k02", "k03", "k04", "k05"],
        ["k06"],
    ]


@pytest.mark.parametrize("length", range(0, 13))
def test_cut_pieces_keep_every_message_once_in_order(length: int) -> None:
    run = [message(n, ((n * 7) % 5) / 5) for n in range(length)]
    pieces = split_run(run, 5)
    assert [u for piece in pieces for u in piece] == run
    assert all(0 < len(piece) <= 5 for piece in pieces)


def test_a_clear_match_leads_over_a_message_its_neighbours_lifted() -> None:
    scores = {"lifted": 2.5, "clear": 1.2, "other": 0.4}
    led = lead_clear_match(scores, {"lifted": 0.25, "clear": 0.75, "other": 0.0})
    assert max(led, key=led.__getitem__) == "clear"
    assert led["lifted"] == 2.5 and led["other"] == 0.4


def test_no_clear_match_below_the_share_or_on_a_tie() -> None:
    scores = {"a": 2.0, "b": 1.0, "c": 0.5}
    below = CLEAR_MATCH_COVERAGE - 0.01
    assert lead_clear_match(scores, {"b": below, "a": 0.1}) == scores
    assert lead_clear_match(scores, {"b": 0.8, "c": 0.8}) == scores
    assert lead_clear_match(scores, {}) == scores


def test_a_clear_match_already_first_keeps_its_score() -> None:
    scores = {"a": 2.0, "b": 1.0}
    assert lead_clear_match(scores, {"a": 1.0, "b": 0.5}) == scores


def test_a_replacing_value_is_raised_just_above_the_value_it_replaced() -> None:
    scores = {"k01": 2.0, "k05": 0.5, "k07": 3.0, "k08": 0.1}
    # k05 replaced what k01 said (k09 did too, but is not a candidate).
    raised = prefer_current(scores, {"k01": ["k05", "k09"]})
    assert raised["k05"] > scores["k01"] and raised["k05"] < scores["k07"]
    assert raised["k08"] == 0.1 and raised["k01"] == 2.0 and raised["k07"] == 3.0
    # Already above: unchanged; no replacement among the candidates: nothing moves.
    assert prefer_current(scores, {"k01": ["k07"]}) == scores
    assert prefer_current(scores, {"k01": ["k09"], "k99": ["k05"]}) == scores


def test_a_message_between_two_chosen_ones_comes_along() -> None:
    # A question naming Devon matches each of his lines on the name, and the reply between two
    # of them less: taking k01 and k03 brings k02, so the three show as one window.
    stretches = [["k01", "k02", "k03", "k04", "k05", "k06"]]
    units = [message(1, 1.0), message(2, 0.3), message(3, 0.9), message(5, 0.8), message(6, 0.1)]
    chosen = select(units, 4, stretches)
    assert [u.key for u in chosen] == ["k01", "k03", "k02", "k05"]
    shown = group(chosen, stretches, hits=["k01", "k03", "k05"])
    assert [s.evidence for s in shown] == [("m1", "m2", "m3"), ("m5",)]
    # Without the stretches nothing tells that k02 lies between them.
    assert [u.key for u in select(units, 4)] == ["k01", "k03", "k05", "k02"]


def test_a_message_between_comes_along_only_when_it_fits() -> None:
    stretches = [["k01", "k02", "k03"]]
    units = [message(1, 1.0), message(2, 0.1), message(3, 0.9)]
    assert [u.key for u in select(units, 2, stretches)] == ["k01", "k03"]
