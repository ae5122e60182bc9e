"""Segments without services: how new messages are cut into stretches, and how a segment's
score raises the messages it covers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.rank import SEGMENT_WEIGHT, segment_prior
from pipeline.segment import SITTING_GAP, OpenSegment, segment, segment_key
from pipeline.summarize import EpisodeText

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def episodes(first: int, count: int) -> list[EpisodeText]:
    return [
        EpisodeText(
            key=f"e{n:03d}",
            speaker_label="Ana (@ana)",
            content=f"message {n}",
            created_at=T0 + timedelta(seconds=n),
        )
        for n in range(first, first + count)
    ]


def test_a_first_pass_cuts_segments_of_the_size() -> None:
    plan = segment("a", "c", None, episodes(0, 10), size=4)
    assert [p.seq for p in plan] == [1, 2, 3]
    assert [len(p.episode_keys) for p in plan] == [4, 4, 2]
    assert plan[0].key == segment_key("a", "c", 1)
    assert plan[0].lines[0] == "Ana (@ana): message 0"
    assert (plan[-1].last_key, plan[-1].last_at) == ("e009", T0 + timedelta(seconds=9))


def test_new_messages_fill_the_open_segment_first() -> None:
    plan = segment("a", "c", OpenSegment(seq=3, count=2), episodes(10, 5), size=4)
    assert [(p.seq, p.episode_keys) for p in plan] == [
        (3, ["e010", "e011"]),
        (4, ["e012", "e013", "e014"]),
    ]


def test_a_full_last_segment_is_closed() -> None:
    plan = segment("a", "c", OpenSegment(seq=2, count=4), episodes(0, 1), size=4)
    assert [(p.seq, p.key) for p in plan] == [(3, segment_key("a", "c", 3))]


def test_a_pause_longer_than_a_sitting_opens_a_new_segment() -> None:
    later = T0 + SITTING_GAP + timedelta(seconds=10)
    moved = [
        e.model_copy(update={"created_at": later + timedelta(seconds=i)})
        for i, e in enumerate(episodes(3, 2))
    ]
    plan = segment("a", "c", None, [*episodes(0, 3), *moved], size=16)
    assert [(p.seq, p.episode_keys) for p in plan] == [
        (1, ["e000", "e001", "e002"]),
        (2, ["e003", "e004"]),
    ]
    # A pause of exactly the gap is still one sitting.
    edge = episodes(3, 1)[0].model_copy(
        update={"created_at": T0 + timedelta(seconds=2) + SITTING_GAP}
    )
    assert [p.seq for p in segment("a", "c", None, [*episodes(0, 3), edge], size=16)] == [1]


def test_the_pause_is_measured_from_the_open_segments_last_message() -> None:
    last = OpenSegment(seq=5, count=2, last_at=T0 - SITTING_GAP - timedelta(minutes=1))
    assert [p.seq for p in segment("a", "c", last, episodes(0, 2), size=16)] == [6]
    recent = OpenSegment(seq=5, count=2, last_at=T0 - timedelta(minutes=1))
    assert [p.seq for p in segment("a", "c", recent, episodes(0, 2), size=16)] == [5]
    # Not knowing when the open segment ended (stored before sittings were kept): no cut.
    assert [p.seq for p in segment("a", "c", OpenSegment(seq=5, count=2), episodes(0, 2))] == [5]


def test_a_late_message_joins_the_open_segment_whatever_its_time() -> None:
    last = OpenSegment(seq=2, count=3, last_at=T0 + timedelta(days=3))
    assert [p.seq for p in segment("a", "c", last, episodes(0, 1), size=16)] == [2]


def test_nothing_new_plans_nothing_and_a_bad_size_is_refused() -> None:
    assert segment("a", "c", OpenSegment(seq=1, count=1), []) == []
    with pytest.raises(ValueError, match="segment size"):
        segment("a", "c", None, episodes(0, 1), size=0)


def test_segment_keys_differ_by_agent_channel_and_number() -> None:
    keys = {segment_key(a, c, n) for a in ("a1", "a2") for c in ("c1", "c2") for n in (1, 2)}
    assert len(keys) == 8


def test_a_segment_raises_the_matched_messages_it_covers() -> None:
    relevance = {"m1": 0.5, "m2": 0.5, "m3": 0.0, "fact": 0.9}
    segments = {"s1": (8.0, ["m1", "m3"]), "s2": (2.0, ["m2"])}
    scored = segment_prior(relevance, segments)
    assert scored["m1"] == pytest.approx(0.5 + SEGMENT_WEIGHT)
    assert scored["m2"] == pytest.approx(0.5 + SEGMENT_WEIGHT * 0.25)
    # Unmatched messages and distilled items keep their score: a segment only reorders matches.
    assert scored["m3"] == 0.0
    assert scored["fact"] == 0.9
    assert scored["m1"] > scored["m2"]


def test_no_segments_leave_relevance_as_it_is() -> None:
    relevance = {"m1": 0.3}
    assert segment_prior(relevance, {}) == relevance
