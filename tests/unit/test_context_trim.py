"""Fitting a Context to its budget: never over it, cut by the stated priority, and rendered
with provenance and staleness marked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memsync import reading
from pipeline import context as trimming
from pipeline.context import fit, is_stale, message_tokens
from schemas.context import (
    Context,
    ContextChannel,
    ContextCommitment,
    ContextFact,
    ContextParty,
    ContextSummary,
    Dropped,
    Section,
)
from schemas.recall import RecallItem, reply_note

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DEVON = ContextParty(id="u-devon", label="Devon (@devon)")
SARAH = ContextParty(id="u-sarah", label="Sarah (@sarah)")
AGENT = ContextParty(id="a-travel", label="Travel Agent (@travel)", is_agent=True)


def fact(
    key: str,
    source: str = "self_stated",
    *,
    stale: bool = False,
    subject: ContextParty = SARAH,
    by: ContextParty | None = None,
    days_ago: int = 1,
    text: str | None = None,
) -> ContextFact:
    stated_by = by or subject
    return ContextFact.model_validate(
        {
            "key": key,
            "subject_id": subject.id,
            "subject_label": subject.label,
            "text": text or f"{subject.label} fact {key}",
            "source": source,
            "stated_by_id": stated_by.id,
            "stated_by_label": stated_by.label,
            "stated_at": NOW - timedelta(days=days_ago),
            "last_confirmed": NOW - timedelta(days=days_ago),
            "stale": stale,
            "learnt_in": ["ch-a"],
            "evidence": ["m-1"],
        }
    )


def commitment(
    key: str, due_days: int | None = None, text: str = "send the forecast"
) -> ContextCommitment:
    return ContextCommitment(
        key=key,
        text=text,
        owed_by=DEVON,
        owed_to=SARAH,
        due=NOW + timedelta(days=due_days) if due_days is not None else None,
        opened_at=NOW - timedelta(days=2),
        source="self_stated",
    )


def memory(key: str, score: float, text: str = "we talked about the hotel") -> RecallItem:
    return RecallItem(
        kind="episode",
        key=key,
        text=text,
        score=score,
        evidence=[key],
        channel_id="ch-a",
        speaker_label="Devon (@devon)",
        created_at=NOW,
    )


def summary(lines: int = 3) -> ContextSummary:
    text = "\n".join(
        f"[2026-11-{10 + i:02d}] Devon (@devon): decision number {i}" for i in range(lines)
    )
    return ContextSummary(key="sum-1", text=text, version=2, covers_until=NOW)


def full(budget: int = 10_000, **fields: object) -> Context:
    base: dict[str, object] = {
        "tenant": "acme",
        "agent": AGENT,
        "channel": ContextChannel(id="ch-a", kind="group", title="Trip"),
        "query": "hotel",
        "summary": summary(),
        "participants": [DEVON, SARAH, AGENT],
        "commitments": [commitment("c-late", 9), commitment("c-soon", 1), commitment("c-open")],
        "facts": [
            fact("f-peer", "peer_stated", by=DEVON),
            fact("f-stale", stale=True, days_ago=200),
            fact("f-self"),
            fact("f-verified", "verified", days_ago=5),
        ],
        "memories": [memory("m-low", 0.1), memory("m-high", 0.9)],
        "budget_tokens": budget,
    }
    base.update(fields)
    return Context.model_validate(base)


def kept_order(context: Context) -> list[tuple[Section, str]]:
    kept: list[tuple[Section, str]] = [("header", "header")] if context.header else []
    if context.summary is not None:
        kept.append(("summary", context.summary.key))
    kept += [("commitments", c.key) for c in context.commitments]
    kept += [("facts", f.key) for f in context.facts]
    kept += [("memories", m.key) for m in context.memories]
    return kept


PRIORITY = [
    ("header", "header"),
    ("summary", "sum-1"),
    ("commitments", "c-soon"),
    ("commitments", "c-late"),
    ("commitments", "c-open"),
    # verified and self-stated share a rank: the more recently confirmed comes first
    ("facts", "f-self"),
    ("facts", "f-verified"),
    ("facts", "f-stale"),
    ("facts", "f-peer"),
    ("memories", "m-high"),
    ("memories", "m-low"),
]


def test_everything_fits_a_large_budget_in_priority_order() -> None:
    fitted = fit(full())
    assert kept_order(fitted) == PRIORITY
    assert fitted.dropped == []
    assert fitted.used_tokens == message_tokens(fitted.render()) <= fitted.budget_tokens


def test_the_lowest_priority_goes_first_and_nothing_is_kept_below_a_cut() -> None:
    whole = fit(full()).used_tokens
    seen_lengths = set()
    for budget in range(whole, -1, -7):
        fitted = fit(full(budget))
        kept = kept_order(fitted)
        assert fitted.used_tokens <= budget
        partial = [d for d in fitted.dropped if d.partial]
        cut = [(d.section, d.key) for d in fitted.dropped if not d.partial]
        # Kept entries are a prefix of the priority order, and what is cut is the rest.
        assert kept == PRIORITY[: len(kept)]
        assert [(d.section, d.key) for d in fitted.dropped] == PRIORITY[len(kept) - len(partial) :]
        assert cut == PRIORITY[len(kept) :]
        seen_lengths.add(len(kept))
    assert len(seen_lengths) > 5  # the sweep really walked down the order


def test_a_too_long_summary_loses_its_oldest_lines_first() -> None:
    context = full(summary=summary(lines=40), commitments=[], facts=[], memories=[])
    header_only = fit(full(summary=None, commitments=[], facts=[], memories=[]))
    budget = header_only.used_tokens + 60
    fitted = fit(context.model_copy(update={"budget_tokens": budget}))
    assert fitted.summary is not None
    lines = fitted.summary.text.splitlines()
    assert 0 < len(lines) < 40
    assert lines[-1].endswith("decision number 39")  # the newest line stays
    assert fitted.dropped == [Dropped(section="summary", key="sum-1", partial=True)]
    assert fitted.used_tokens <= budget


def test_a_budget_too_small_for_the_header_renders_nothing() -> None:
    fitted = fit(full(5))
    assert fitted.render() == []
    assert fitted.used_tokens == 0
    assert [(d.section, d.key) for d in fitted.dropped] == PRIORITY


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(min_value=0, max_value=1500),
    texts=st.lists(st.text(min_size=0, max_size=300), min_size=0, max_size=12),
    scores=st.lists(st.floats(min_value=0, max_value=1), min_size=0, max_size=8),
    summary_lines=st.integers(min_value=0, max_value=30),
)
def test_the_budget_is_never_exceeded(
    budget: int, texts: list[str], scores: list[float], summary_lines: int
) -> None:
    facts = [
        fact(f"f{i}", ("peer_stated", "self_stated", "verified")[i % 3], text=t or "x", by=DEVON)
        for i, t in enumerate(texts)
    ]
    memories = [memory(f"m{i}", s, text="words " * (i * 13)) for i, s in enumerate(scores)]
    context = full(
        budget,
        summary=summary(summary_lines) if summary_lines else None,
        facts=facts,
        memories=memories,
    )
    fitted = fit(context)
    assert fitted.used_tokens == message_tokens(fitted.render()) <= budget
    total = 1 + (1 if summary_lines else 0) + 3 + len(facts) + len(memories)
    kept = kept_order(fitted)
    assert len(kept) + sum(not d.partial for d in fitted.dropped) == total


def test_facts_rank_trusted_sources_then_fresh_then_recent() -> None:
    ordered = sorted(
        [
            fact("peer-fresh", "peer_stated", by=DEVON),
            fact("self-stale", stale=True, days_ago=300),
            fact("self-old", days_ago=30),
            fact("verified-new", "verified", days_ago=1),
            fact("peer-stale", "peer_stated", by=DEVON, stale=True, days_ago=400),
        ],
        key=trimming.fact_order,
    )
    assert [f.key for f in ordered] == [
        "verified-new",
        "self-old",
        "self-stale",
        "peer-fresh",
        "peer-stale",
    ]


def test_staleness_is_the_age_of_the_last_confirmation() -> None:
    assert not is_stale(NOW - timedelta(days=90), NOW, 90)
    assert is_stale(NOW - timedelta(days=90, seconds=1), NOW, 90)
    assert not is_stale(NOW, NOW, 0)


def test_provenance_and_staleness_are_marked_in_the_rendering() -> None:
    context = fit(
        full(
            facts=[
                fact("f-peer", "peer_stated", by=DEVON, text="Sarah is vegetarian"),
                fact("f-ver", "verified", text="Sarah's passport is valid"),
                fact("f-self", text="Sarah prefers aisle seats"),
                fact("f-old", stale=True, days_ago=200, text="Sarah lives in Leeds"),
            ]
        )
    )
    text = "\n".join(m["content"] for m in context.render())
    assert all(m["role"] == "system" for m in context.render())
    lines = {line for line in text.splitlines() if line.startswith("- Sarah")}
    assert "- Sarah is vegetarian (said by Devon (@devon), unverified)" in lines
    assert "- Sarah's passport is valid (verified)" in lines
    assert "- Sarah prefers aisle seats (self-stated)" in lines
    stale_day = (NOW - timedelta(days=200)).strftime("%Y-%m-%d")
    assert f"- Sarah lives in Leeds (self-stated; stale: last confirmed {stale_day})" in lines
    # A peer's claim never reads as verified.
    peer = next(line for line in lines if "vegetarian" in line)
    assert "(verified" not in peer and "; verified" not in peer
    for heading in (
        "# Memory for Travel Agent (@travel) in #ch-a (Trip)",
        "## Summary of this channel so far",
        "## Open commitments",
        "## What you know about the people here",
        "### Sarah (@sarah)",
        "## Memories that may be relevant: hotel",
    ):
        assert heading in text
    assert "- Devon (@devon) owes Sarah (@sarah): send the forecast" in text


def test_the_platform_default_budget_matches_the_pipeline() -> None:
    assert reading.DEFAULT_BUDGET_TOKENS == trimming.DEFAULT_BUDGET_TOKENS


def test_an_extracted_commitment_names_who_owes_it_once() -> None:
    sentence = "Devon (@devon) committed to Sarah (@sarah): send the forecast by 2026-12-05"
    line = commitment("c-1", due_days=3, text=sentence).line()
    assert line.startswith(f"- {sentence} (since ")
    assert line.count("Devon (@devon)") == 1 and line.count("Sarah (@sarah)") == 1
    assert ", due " in line
    # A bare value still says who owes whom.
    assert commitment("c-2").line().startswith("- Devon (@devon) owes Sarah (@sarah): send the")


def test_a_commitment_that_answers_a_message_quotes_it_in_short() -> None:
    sentence = "Devon (@devon) committed to Sarah (@sarah): do that for you"
    asked = "Sarah (@sarah): Can you look up the Lisbon hotel prices for May? " + "x" * 300
    owed = commitment("c-1", text=sentence).model_copy(update={"in_reply_to": asked})
    line = owed.line()
    assert line.startswith(f'- {sentence} (in reply to "Sarah (@sarah): Can you look up')
    quoted = line.split('"')[1]
    assert quoted.endswith(" ...") and len(quoted) <= 164
    assert line.endswith(")") and "(since " in line


def test_a_recalled_commitment_that_answers_a_message_quotes_it_too() -> None:
    asked = "Sarah (@sarah): Can you look up the Lisbon hotel prices for May?"
    owed = memory("c-9", 0.8, text="Devon (@devon) committed to Sarah (@sarah): do that for you")
    owed = owed.model_copy(update={"kind": "commitment", "in_reply_to": asked})
    text = "\n".join(m["content"] for m in fit(full(memories=[owed])).render())
    [line] = [line for line in text.splitlines() if "do that for you" in line]
    assert line.endswith(f'commitment: {owed.text} (in reply to "{asked}")')
    assert reply_note(None) == ""


def test_recalled_memory_grows_with_the_budget_within_bounds() -> None:
    from pipeline.graph.context import (
        MAX_RECALL_LIMIT,
        MIN_RECALL_LIMIT,
        recall_limit_for,
    )

    assert recall_limit_for(0) == recall_limit_for(600) == MIN_RECALL_LIMIT == 10
    assert recall_limit_for(trimming.DEFAULT_BUDGET_TOKENS) == 20
    assert recall_limit_for(3_000) == 30
    assert recall_limit_for(100_000) == MAX_RECALL_LIMIT
    limits = [recall_limit_for(budget) for budget in range(0, 10_000, 250)]
    assert limits == sorted(limits)


def test_a_commitment_quotes_a_value_only_as_whole_words() -> None:
    assert trimming.quotes("I will track the 2000 EUR budget.", "2000 eur")
    assert trimming.quotes("2000 EUR it is", "2000 EUR")
    assert not trimming.quotes("I will track the 20000 EUR budget.", "2000 EUR")
    assert not trimming.quotes("Booked seat 12A", "12")
    assert not trimming.quotes("anything", " ")
    assert trimming.quotes("I will track the 2000 EUR budget.", "2,000 EUR")
    assert trimming.quotes("I will track the 2,000 EUR budget.", "2000 EUR")
    assert not trimming.quotes("I will track the 2,0000 EUR budget.", "2000 EUR")


def test_every_remembered_message_is_rendered_with_its_speaker() -> None:
    listing = "Here are the flights:\n1. HAT069 at 06:00\n2. HAT083 at 01:00"
    window = RecallItem(
        kind="episode",
        key="m-2",
        text="Devon (@devon): which one?\nSarah (@sarah): the later one",
        score=1.0,
        evidence=["m-2", "m-3"],
        channel_id="ch-a",
        speaker_label="Devon (@devon)",
        created_at=NOW,
    )
    context = fit(
        full(memories=[memory("m-1", 3.0, listing), window, memory("m-4", 1.0, "on my way")])
    )
    text = "\n".join(m["content"] for m in context.render())
    # A single message of several lines still says who wrote it, on its first line.
    assert "\n  Devon (@devon): Here are the flights:\n  1. HAT069 at 06:00\n" in text
    # A window's lines carry their own speakers, once each.
    assert "\n  Devon (@devon): which one?\n  Sarah (@sarah): the later one" in text
    assert "Devon (@devon): Devon (@devon)" not in text
    assert f"- [{NOW:%Y-%m-%d} #ch-a] Devon (@devon): on my way" in text
