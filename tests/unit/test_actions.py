"""What a tool's name says it did: the word stems a promise must hold to be kept by the call."""

from __future__ import annotations

import pytest

from pipeline.english.actions import action_stems, failed_result, verb_stem


@pytest.mark.parametrize(
    ("name", "holds", "lacks"),
    [
        ("cancel_reservation", {"cancel"}, {"reserv"}),
        ("update_reservation_flights", {"updat", "chang", "modif", "upgrad"}, {"flight"}),
        ("updateBooking", {"updat", "chang"}, {"book"}),
        ("book-table", {"book"}, set()),
        ("sendEmail", {"send", "email"}, set()),
        # "get" matches too many promises ("get back to you") to stand for itself.
        ("get_user_details", {"fetch", "retriev", "look"}, {"get"}),
        ("transfer_to_human_agents", {"transfer"}, {"human"}),
    ],
)
def test_a_call_names_its_act_by_its_leading_verb(
    name: str, holds: set[str], lacks: set[str]
) -> None:
    stems = action_stems(name)
    assert holds <= stems and not lacks & stems


@pytest.mark.parametrize("name", ["think", "x", "42", "add_note", "", "__"])
def test_a_call_with_no_verb_to_match_on_names_no_act(name: str) -> None:
    assert action_stems(name) == frozenset()


def test_a_stem_holds_the_verbs_forms() -> None:
    for verb, forms in {
        "update": ("updating", "updated", "updates"),
        "modify": ("modification", "modifying"),
        "cancel": ("cancelling", "cancellation"),
    }.items():
        assert all(form.startswith(verb_stem(verb)) for form in forms)


@pytest.mark.parametrize(
    ("content", "failed"),
    [
        ("Error: flight HAT030 not available on date 2024-05-13", True),
        ('{"error": "payment method not found"}', True),
        ('{"ok": false, "reason": "no seats"}', True),
        ('{"status": "FAILED"}', True),
        ('{"status": "cancelled", "refund": 240}', False),
        ('{"error": null, "id": "HAT069"}', False),
        ("The error rate is 2 %", False),
        ("[1, 2]", False),
        ("", False),
    ],
)
def test_a_result_says_whether_its_call_failed(content: str, failed: bool) -> None:
    assert failed_result(content) is failed
