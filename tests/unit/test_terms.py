"""A question's content words and the share of them a message holds (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.english.terms import content_terms, coverage


def test_question_and_stop_words_say_nothing_about_the_answer() -> None:
    assert content_terms("What did Ross say when he was waiting for Emily?") == {
        "ross",
        "say",
        "wait",
        "emily",
    }
    assert content_terms("What is it?") == frozenset()


def test_endings_and_apostrophes_do_not_keep_words_apart() -> None:
    terms = content_terms("Which flights did Raj's sister book?")
    assert terms == {"flight", "raj", "sister", "book"}
    assert coverage(terms, "My sister booked two flights for Raj.") == 1.0


def test_coverage_is_the_share_held() -> None:
    terms = content_terms("seat preference on long flights")
    assert coverage(terms, "I always take a window seat") == 0.25
    assert coverage(frozenset(), "anything") == 0.0
    assert coverage(content_terms("bus 42"), "the 42 bus") == 1.0


def test_a_stop_word_that_stems_like_a_term_is_not_held() -> None:
    # "notes" stems to "not", which a text's "not" must not supply.
    terms = content_terms("What do the scene notes say?")
    assert coverage(terms, "It's not visually accessible") == 0.0


@given(
    question=st.text(alphabet="abcdefgs _'-9ü", max_size=40),
    text=st.text(alphabet="abcdefgs _'-9ü.", max_size=80),
)
def test_coverage_is_the_share_of_content_terms_in_the_text(question: str, text: str) -> None:
    terms = content_terms(question)
    expected = len(terms & content_terms(text)) / len(terms) if terms else 0.0
    assert coverage(terms, text) == expected
