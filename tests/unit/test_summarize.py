"""Rolling summaries, the pure part (pipeline/summarize.py) and the LLM summarizer against the
local fake model server: what is kept, the budget, the priority order, re-anchoring, and which
episodes a fold takes."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.summarize import (
    EpisodeText,
    ExtractiveSummarizer,
    classify,
    episode_lines,
    episode_tokens,
    estimate_tokens,
    fold_chunk,
    horizon,
    read_cap,
    sentences,
)
from tests.datasets import friends_raw_events, tau_raw_events
from tests.modelserver import chat_answer, serve
from workers.worker.llm import LLMError, RateLimit
from workers.worker.llm_summary import LLMSummarizer

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def ep(i: int, speaker: str, text: str) -> EpisodeText:
    return EpisodeText(
        key=f"k{i:04d}", speaker_label=speaker, content=text, created_at=T0 + timedelta(minutes=i)
    )


DEVON = "Devon (@devon)"
SARAH = "Sarah (@sarah)"
AGENT = "Travel Agent (@travel)"

TRIP = [
    ep(0, DEVON, "Morning all! How was everyone's weekend?"),
    ep(1, SARAH, "Great, thanks. Lovely weather."),
    ep(2, DEVON, "I'll send the Q3 forecast by Friday."),
    ep(3, SARAH, "We'll go with the Lisbon offsite then, agreed."),
    ep(4, AGENT, "Your booking reference is XK4R9T and the flight is TP 1351."),
    ep(5, DEVON, "Haha nice."),
    ep(6, SARAH, "The invoice is at https://acme.example/inv/2041, ping billing@acme.example."),
    ep(7, DEVON, "Who is bringing the projector?"),
    ep(8, SARAH, "Budget is $4,500 for 12 people."),
    ep(9, AGENT, "Release v2.3.1 ships on 2026-12-01."),
    ep(10, SARAH, "lol ok"),
]

COMMITMENTS = [
    "I'll send the Q3 forecast by Friday.",
    "We'll go with the Lisbon offsite then, agreed.",
]
IDENTIFIERS = [
    "Your booking reference is XK4R9T and the flight is TP 1351.",
    "The invoice is at https://acme.example/inv/2041, ping billing@acme.example.",
    "Release v2.3.1 ships on 2026-12-01.",
]
CHIT_CHAT = ["Morning all!", "Lovely weather.", "Haha nice.", "lol ok"]


def _labelled(raw: dict[str, Any]) -> list[EpisodeText]:
    people = {
        p["id"]: f"{p.get('display_name') or p['id']} (@{p.get('handle') or p['id']})"
        for p in raw["participants"]
    }
    return [
        EpisodeText(
            key=m["id"],
            speaker_label=people[m["sender_id"]],
            content=m["content"],
            created_at=datetime.fromisoformat(m["created_at"]),
        )
        for m in raw["messages"]
        if isinstance(m.get("content"), str)
        and m["content"].strip()
        and m["role"] in {"user", "assistant", "human", "ai"}
    ]


def real_conversations() -> list[list[EpisodeText]]:
    """The vendored tau-bench trajectories and FriendsQA scenes, as labelled episodes."""
    found = [_labelled(raw) for raw in [*tau_raw_events(), *friends_raw_events()]]
    return [episodes for episodes in found if episodes]


def must_keep(episodes: Sequence[EpisodeText]) -> list[str]:
    """Every sentence of these turns that carries a commitment or an identifier."""
    return [
        s
        for e in episodes
        for s in sentences(e.content)
        if {"commitment", "identifier"} & set(classify(s, open_question=False))
    ]


def test_keeps_commitments_decisions_identifiers_and_drops_chit_chat() -> None:
    summary = ExtractiveSummarizer(600).rebuild(TRIP)
    for sentence in [*COMMITMENTS, *IDENTIFIERS, "Budget is $4,500 for 12 people."]:
        assert sentence in summary
    for sentence in CHIT_CHAT:
        assert sentence not in summary
    # Speaker labels and dates, one line per sentence, in time order.
    lines = summary.splitlines()
    assert lines[0] == f"[2026-11-23] {DEVON}: I'll send the Q3 forecast by Friday."
    assert [line.split("] ", 1)[0] for line in lines] == ["[2026-11-23"] * len(lines)
    positions = [summary.index(s) for s in [*COMMITMENTS, IDENTIFIERS[0], IDENTIFIERS[2]]]
    assert positions == sorted(positions)


def test_open_questions_are_kept_and_answered_ones_dropped() -> None:
    episodes = [
        ep(0, DEVON, "Did everyone get home ok?"),
        ep(1, SARAH, "Yes, all good."),
        ep(2, DEVON, "Who is bringing the projector?"),
        ep(3, DEVON, "Anyone?"),
    ]
    summary = ExtractiveSummarizer(600).rebuild(episodes)
    assert "Did everyone get home ok?" not in summary
    assert "Who is bringing the projector?" in summary


@pytest.mark.parametrize("index", range(len(real_conversations())))
def test_real_turns_keep_every_commitment_and_identifier(index: int) -> None:
    episodes = real_conversations()[index]
    # Folded in the steps the worker takes (oldest half at a time, 300-token budget).
    summarizer = ExtractiveSummarizer(max_tokens=20_000)
    summary: str | None = None
    pending = list(episodes)
    while chunk := fold_chunk(pending, 300) or pending:
        summary = summarizer.fold(summary, chunk)
        pending = pending[len(chunk) :]
    assert summary is not None
    for sentence in must_keep(episodes):
        assert sentence[:300] in summary


def test_budget_is_respected_and_low_priority_lines_go_first() -> None:
    full = ExtractiveSummarizer(600).rebuild(TRIP)
    needed = [line for line in full.splitlines() if any(c in line for c in COMMITMENTS)]
    tight = estimate_tokens("\n".join(needed))
    summary = ExtractiveSummarizer(tight).rebuild(TRIP)
    assert estimate_tokens(summary) <= tight
    # Commitments and the decision survive; identifiers, questions and numbers do not.
    assert summary.splitlines() == needed
    # A little more room: identifiers come back before questions and bare numbers.
    more = tight + estimate_tokens("\n".join(IDENTIFIERS)) + 40
    roomier = ExtractiveSummarizer(more).rebuild(TRIP)
    assert all(s in roomier for s in IDENTIFIERS)
    assert "Who is bringing the projector?" not in roomier


def test_a_fold_keeps_every_commitment_and_identifier_it_folds_over_older_lines() -> None:
    old = [ep(i, DEVON, f"I'll call supplier number {i} tomorrow.") for i in range(30)]
    summarizer = ExtractiveSummarizer(200)
    previous = summarizer.rebuild(old)
    assert estimate_tokens(previous) > 150  # the summary is about full
    new = [
        ep(40, SARAH, "Your booking reference is XK4R9T and the flight is TP 1351."),
        ep(41, DEVON, "Lovely, thanks!"),
        ep(42, SARAH, "I'll send the Q3 forecast by Friday."),
    ]
    folded = summarizer.fold(previous, new)
    assert estimate_tokens(folded) <= 200
    assert "XK4R9T" in folded and "Q3 forecast" in folded
    # Room was made by forgetting the oldest of the previous summary's lines.
    assert "supplier number 0 " not in folded and "supplier number 29 " in folded


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=50, max_value=800), st.integers(min_value=0, max_value=10**6))
def test_real_summaries_never_exceed_the_budget(max_tokens: int, pick: int) -> None:
    conversations = real_conversations()
    episodes = conversations[pick % len(conversations)]
    summarizer = ExtractiveSummarizer(max_tokens)
    half = len(episodes) // 2
    once = summarizer.fold(summarizer.rebuild(episodes[:half]), episodes[half:])
    assert estimate_tokens(once) <= max_tokens
    assert estimate_tokens(summarizer.rebuild(episodes)) <= max_tokens


def test_within_one_priority_the_oldest_lines_go_first() -> None:
    episodes = [ep(i, DEVON, f"I'll call supplier number {i} tomorrow.") for i in range(20)]
    summary = ExtractiveSummarizer(60).rebuild(episodes)
    kept = [int(line.split("number ")[1].split()[0]) for line in summary.splitlines()]
    assert kept == list(range(20 - len(kept), 20)) and 0 < len(kept) < 20


def test_rebuild_from_raw_episodes_equals_a_fresh_summary_and_drops_drift() -> None:
    summarizer = ExtractiveSummarizer(600)
    folded = summarizer.fold(summarizer.rebuild(TRIP[:5]), TRIP[5:])
    assert summarizer.rebuild(TRIP) == summarizer.fold(None, TRIP)
    assert folded == summarizer.rebuild(TRIP)  # within budget, folding loses nothing
    # A drifted summary (a line no episode says) survives folds, not a rebuild.
    drifted = folded + "\n[2026-11-23] Mallory (@mallory): Code ZZ-999 was agreed."
    assert "ZZ-999" in summarizer.fold(drifted, [])
    assert "ZZ-999" not in summarizer.rebuild(TRIP)


def test_folding_twice_changes_nothing() -> None:
    summarizer = ExtractiveSummarizer(600)
    once = summarizer.rebuild(TRIP)
    assert summarizer.fold(once, []) == once
    assert summarizer.fold(once, TRIP) == once  # same sentences are not repeated


def test_identifiers() -> None:
    def kept(text: str) -> bool:
        return "identifier" in classify(text, open_question=False)

    for text in [
        "user id mia_li_3668",
        "flight HAT136",
        "booked UA 921",
        "see ticket #4521",
        "mail me at a.b@c.org",
        "ask @sarah",
        "version 1.2.3",
        "ref INV-2041",
    ]:
        assert kept(text), text
    for text in ["see you at 3pm", "the 2nd floor", "we need 5k", "just chatting"]:
        assert not kept(text), text


def test_fold_chunk_takes_the_oldest_half_within_the_budget() -> None:
    episodes = [ep(i, DEVON, "x" * 84) for i in range(10)]  # 100 chars labelled: 25 tokens
    assert {episode_tokens(e) for e in episodes} == {25}
    assert fold_chunk(episodes[:4], 100) == []
    assert fold_chunk(episodes[:5], 100) == episodes[:3]  # 125 tokens: half is 62
    # A long backlog folds at most the budget at once.
    assert fold_chunk(episodes, 100) == episodes[:4]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=400), min_size=0, max_size=60),
    st.integers(min_value=100, max_value=1000),
)
def test_reading_only_the_read_cap_gives_the_same_chunk(sizes: list[int], budget: int) -> None:
    episodes = [ep(i, "A", "y" * n) for i, n in enumerate(sizes)]
    seen: list[EpisodeText] = []
    tokens = 0
    for e in episodes:  # what pipeline.graph.summaries reads with token_cap=read_cap(budget)
        seen.append(e)
        tokens += episode_tokens(e)
        if tokens > read_cap(budget):
            break
    assert fold_chunk(seen, budget) == fold_chunk(episodes, budget)


def test_episode_lines_clip_long_sentences() -> None:
    [line] = episode_lines([ep(0, DEVON, "I'll paste it: " + "a1 " * 1000)])
    assert len(line.text) < 500 and line.text.endswith("\u2026")


# -- the LLM summarizer, against the local fake model server --------------------------------------


class FakeModel:
    def __init__(self) -> None:
        self.script: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []


@pytest.fixture()
def model() -> Iterator[tuple[FakeModel, str]]:
    fake = FakeModel()

    def respond(headers: dict[str, str], body: bytes) -> tuple[int, bytes, float]:
        fake.requests.append(json.loads(body))
        status, answer = fake.script.pop(0) if fake.script else (500, "empty")
        if status != 200:
            return status, str(answer).encode(), 0.0
        return status, chat_answer(answer), 0.0

    with serve(respond) as url:
        yield fake, url


def llm(url: str, max_tokens: int = 100, chunk_tokens: int = 60) -> LLMSummarizer:
    return LLMSummarizer(
        url,
        "tiny-model",
        "sk-test",
        max_tokens=max_tokens,
        chunk_tokens=chunk_tokens,
        rate_limit=RateLimit(1000),
    )


def test_llm_fold_sends_previous_and_labelled_messages(model: tuple[FakeModel, str]) -> None:
    fake, url = model
    fake.script.append((200, {"summary": "Devon (@devon): will send Q3 forecast by Friday"}))
    text = llm(url).fold("Sarah (@sarah): budget $4,500", TRIP[2:3])
    assert text == "Devon (@devon): will send Q3 forecast by Friday"
    [request] = fake.requests
    assert request["model"] == "tiny-model"
    assert request["response_format"] == {"type": "json_object"}
    assert "100 tokens" in request["messages"][0]["content"]
    context = json.loads(request["messages"][1]["content"])
    assert context["previous_summary"] == "Sarah (@sarah): budget $4,500"
    assert context["messages"] == [
        {"speaker": DEVON, "at": TRIP[2].created_at.isoformat(), "text": TRIP[2].content}
    ]


def test_llm_summary_is_cut_to_the_budget_and_bad_answers_retried(
    model: tuple[FakeModel, str],
) -> None:
    fake, url = model
    long_text = "\n".join(f"line {i}: " + "z" * 30 for i in range(40))
    fake.script += [(500, "boom"), (200, {"nope": 1}), (200, {"summary": long_text})]
    text = llm(url, max_tokens=50).fold(None, TRIP)
    assert len(fake.requests) == 3
    assert estimate_tokens(text) <= 50 and text.startswith("line 0: ")


def test_llm_rebuild_starts_from_nothing_in_chunks(model: tuple[FakeModel, str]) -> None:
    fake, url = model
    fake.script += [(200, {"summary": f"s{i}"}) for i in range(20)]
    assert llm(url, chunk_tokens=40).rebuild(TRIP) == f"s{len(fake.requests) - 1}"
    contexts = [json.loads(r["messages"][1]["content"]) for r in fake.requests]
    assert len(contexts) > 1
    assert contexts[0]["previous_summary"] is None  # never the old, possibly drifted, text
    assert [c["previous_summary"] for c in contexts[1:]] == [
        f"s{i}" for i in range(len(contexts) - 1)
    ]
    assert [m["text"] for c in contexts for m in c["messages"]] == [e.content for e in TRIP]


def test_llm_errors_surface_as_retryable_after_the_attempts(model: tuple[FakeModel, str]) -> None:
    fake, url = model
    fake.script += [(503, "busy")] * 4
    with pytest.raises(LLMError):
        llm(url).fold(None, TRIP)
    assert len(fake.requests) == 4


def test_a_horizon_holds_the_latest_episodes_up_to_its_tokens() -> None:
    sizes = [episode_tokens(e) for e in TRIP]
    assert horizon(TRIP, sum(sizes)) == TRIP  # all of it fits
    assert horizon(TRIP, 0) == TRIP[-1:]  # the one that crosses the cap is kept
    cut = horizon(TRIP, sizes[-1] + sizes[-2])
    assert cut == TRIP[-3:]  # two fit exactly; the third crosses
    assert horizon([], 100) == []
