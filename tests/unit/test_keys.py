"""Graph keys: unambiguous whatever the ids, and never too long for Neo4j's key index."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.keys import MAX_KEY_CHARS, compose_key, scope_token

parts = st.lists(st.text(max_size=3000), min_size=1, max_size=4)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(parts, parts)
def test_distinct_parts_give_distinct_keys_within_the_bound(a: list[str], b: list[str]) -> None:
    assert len(compose_key(*a)) <= MAX_KEY_CHARS
    assert (compose_key(*a) == compose_key(*b)) == (a == b)


def test_long_keys_keep_a_prefix_and_end_in_a_digest() -> None:
    long = compose_key("acme", "fact", "😀" * 3000)
    assert len(long) == MAX_KEY_CHARS
    assert long.startswith("acme:fact:%F0%9F%98%80")
    assert compose_key("acme", "fact", "😀" * 3000 + "x") != long


def test_keys_that_fit_are_unchanged() -> None:
    assert compose_key("acme", "slack:U1", "a b") == "acme:slack%3AU1:a%20b"


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.text(max_size=300))
def test_a_scope_term_is_twenty_digits_and_differs_by_role(key: str) -> None:
    terms = {scope_token(role, key) for role in ("agent", "channel", "speaker")}
    # Digits only: Lucene's English analyser keeps such a token whole and unstemmed.
    assert all(len(t) == 20 and t.isdigit() for t in terms)
    assert len(terms) == 3  # an agent observing and the same agent speaking are different terms
    assert scope_token("agent", key) == scope_token("agent", key)


@settings(max_examples=500, derandomize=True, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.from_regex(r"[\w@.~/:%-]*"))
def test_a_part_left_unquoted_is_what_quoting_gives(part: str) -> None:
    # The fast path keeps a part as it is only where quoting would have kept it too.
    assert compose_key(part) == quote(part, safe="@-_.~/")


def test_every_character_below_0x300_escapes_as_quoting_does() -> None:
    for code in range(0x300):
        part = f"a{chr(code)}b"
        assert compose_key(part) == quote(part, safe="@-_.~/"), hex(code)
