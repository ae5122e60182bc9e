"""The blind recall sets load as bench/recall.py asks them: every case its own channel, its
gold messages among the messages written, an agent speaking as `ai`; the long conversations as
one channel each, a turn event a sitting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import recallsets, taucustomer
from bench.recallsets import (
    CUSTOMER_B_TENANT,
    CUSTOMER_C_AGENT_SPEAKERS,
    CUSTOMER_C_TENANT,
    CUSTOMER_D_AGENT_SPEAKERS,
    CUSTOMER_D_TENANT,
    CUSTOMER_E_TENANT,
    CUSTOMER_F_AGENT_SPEAKERS,
    CUSTOMER_F_TENANT,
    CUSTOMER_G_AGENT_SPEAKERS,
    CUSTOMER_G_TENANT,
    CUSTOMER_H_AGENT_SUFFIX,
    CUSTOMER_H_TENANT,
    CUSTOMER_MEMORY,
    CUSTOMER_MEMORY_B,
    CUSTOMER_MEMORY_C,
    CUSTOMER_MEMORY_D,
    CUSTOMER_MEMORY_E,
    CUSTOMER_MEMORY_F,
    CUSTOMER_MEMORY_G,
    CUSTOMER_MEMORY_H,
    CUSTOMER_TENANT,
    PARA_AGENT_SPEAKERS,
    PARA_TENANT,
    PARAPHRASES,
    long_corpus,
    paraphrase_corpus,
    speakers_ending,
    tau_corpus,
)
from pipeline.validate import validate_event
from tests.datasets import TESTS_DATA_DIR


@pytest.mark.parametrize(
    ("path", "tenant", "agents", "cases"),
    [
        (PARAPHRASES, PARA_TENANT, PARA_AGENT_SPEAKERS, 40),
        (CUSTOMER_MEMORY, CUSTOMER_TENANT, PARA_AGENT_SPEAKERS, 40),
        (CUSTOMER_MEMORY_B, CUSTOMER_B_TENANT, PARA_AGENT_SPEAKERS, 40),
        (CUSTOMER_MEMORY_C, CUSTOMER_C_TENANT, CUSTOMER_C_AGENT_SPEAKERS, 40),
        (CUSTOMER_MEMORY_D, CUSTOMER_D_TENANT, CUSTOMER_D_AGENT_SPEAKERS, 40),
        (CUSTOMER_MEMORY_E, CUSTOMER_E_TENANT, PARA_AGENT_SPEAKERS, 40),
        (CUSTOMER_MEMORY_F, CUSTOMER_F_TENANT, CUSTOMER_F_AGENT_SPEAKERS, 40),
        (CUSTOMER_MEMORY_G, CUSTOMER_G_TENANT, CUSTOMER_G_AGENT_SPEAKERS, 40),
        (
            CUSTOMER_MEMORY_H,
            CUSTOMER_H_TENANT,
            speakers_ending(CUSTOMER_MEMORY_H, CUSTOMER_H_AGENT_SUFFIX),
            40,
        ),
    ],
)
def test_a_blind_set_loads_with_its_gold_among_its_messages(
    path: Path, tenant: str, agents: frozenset[str], cases: int
) -> None:
    corpus = paraphrase_corpus(path, path.stem, tenant, agents)
    assert corpus.name == path.stem
    assert len(corpus.cases) == cases
    assert len({event["channel"]["id"] for event in corpus.events}) == cases
    written = {m["id"] for event in corpus.events for m in event["messages"]}
    for case in corpus.cases:
        assert case.gold and case.gold <= written
    for event in corpus.events:
        assert event["tenant"] == tenant
        assert any(m["role"] == "ai" for m in event["messages"]) or tenant == PARA_TENANT


def test_the_long_set_loads_as_sittings_of_one_channel_per_conversation() -> None:
    corpus = long_corpus()
    channels = {event["channel"]["id"] for event in corpus.events}
    assert len(channels) == 6
    assert len(corpus.events) == 6 * 12  # a turn event a sitting
    written = [m["id"] for event in corpus.events for m in event["messages"]]
    assert len(written) == len(set(written)) > 1200
    for case in corpus.cases:
        assert case.gold and case.gold <= set(written)
        assert case.kind in {"single", "when", "multi", "paraphrase"}
    for event in corpus.events:
        people = [p for p in event["participants"] if p["kind"] == "human"]
        assert len(people) == 2
        assert all(m["sender_id"] in {p["id"] for p in people} for m in event["messages"])
    # Sittings of one conversation follow each other, days apart.
    first = [e for e in corpus.events if e["channel"]["id"] == "LA1"]
    starts = [e["messages"][0]["created_at"] for e in first]
    assert starts == sorted(starts)


def test_the_long_sets_halves_split_by_conversation() -> None:
    dev, test = long_corpus("dev"), long_corpus("test")
    assert len(dev.events) == len(test.events) == 72  # memory holds every conversation
    assert len(dev.cases) == len(test.cases) == 75
    assert not {c.gold for c in dev.cases} & {c.gold for c in test.cases}
    asked = {next(iter(c.gold)).split("-")[0] for c in dev.cases}
    assert asked == {"LA1", "LB1", "LC1"}


def test_tau_conversations_keep_what_was_said_and_drop_the_rest() -> None:
    said = taucustomer.conversations(TESTS_DATA_DIR)  # the vendored slice: trial 0 of tasks 0, 40
    assert sorted(said) == [0, 40]
    assert said[0].customer == "Mia Li" == taucustomer.customer_name("mia_li_3668")
    for conversation in said.values():
        speakers = {speaker for speaker, _ in conversation.messages}
        assert speakers == {conversation.customer, taucustomer.AGENT_SPEAKER}
        for _, text in conversation.messages:
            assert text and text == text.strip()
            assert taucustomer.STOP_TOKEN not in text
    # A message that said something and called a tool keeps its calls, as a platform sends it.
    acted = said[40]
    assert list(acted.calls) == [3] and acted.messages[3][0] == taucustomer.AGENT_SPEAKER
    event = recallsets.case_event("t", "c", 0, acted.messages, frozenset(), acted.calls)
    assert [m["id"] for m in event["messages"] if m.get("tool_calls")] == ["c-m3"]
    validate_event(event)


def test_the_tau_questions_point_into_their_conversations() -> None:
    questions = taucustomer.questions()
    assert len(questions) >= 50
    assert len({q["id"] for q in questions}) == len(questions)
    for question in questions:
        assert question["answer"] and question["question"].strip()
    corpus = tau_corpus(TESTS_DATA_DIR)
    written = {m["id"] for event in corpus.events for m in event["messages"]}
    on_slice = [case for case in corpus.cases if case.gold <= written]
    # Every question about a vendored conversation indexes messages it has.
    asked = {q["task_id"] for q in questions} & {0, 40}
    assert asked and len(on_slice) == sum(q["task_id"] in asked for q in questions)
    for event in corpus.events:
        assert any(m["role"] == "ai" for m in event["messages"])


def test_a_question_held_to_its_channel_is_answered_from_that_channel_alone() -> None:
    from bench.recall import answer_channels, evaluate, reference_rankers
    from bench.recallsets import sync_jobs

    corpus = paraphrase_corpus(CUSTOMER_MEMORY, "customer memory", CUSTOMER_TENANT)
    jobs = sync_jobs(corpus)
    held = answer_channels(corpus)
    rank = reference_rankers(jobs)["bm25 raw"]
    answered = spans = 0
    for case in corpus.cases:
        channel = held[min(case.gold)]
        ranking = rank(case.agent, case.question, channel)
        assert all(held[m] == channel for item in ranking for m in item)
        answered += bool(ranking)
        # Unheld, the same question may reach into the other conversations.
        everywhere = {held[m] for item in rank(case.agent, case.question, None) for m in item}
        spans += len(everywhere) > 1
    assert answered > len(corpus.cases) // 2 and spans > 0
    assert len({held[m] for m in held}) == len(corpus.cases)
    assert len(evaluate(corpus.cases, rank, held).in_order) == len(corpus.cases)


def test_the_context_row_counts_an_answer_anywhere_in_what_the_agent_is_told(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.recall import CONTEXT, Result, told

    # Three questions: answered by the context's third message, not at all, by its first; the
    # contexts show 4, 2 and 10 messages of channels of 8, 8 and 10.
    figures: dict[str, Any] = {CONTEXT: {}}
    told(Result(in_order=[3, None, 1], shown=[4, 2, 10]), [300, 100, 200], [8, 8, 10], figures)
    assert figures[CONTEXT] == {
        "answer_in_context": 0.6667,
        "tokens_used_mean": 200.0,
        "messages_shown_mean": 5.33,
        "share_of_channel_shown": 0.5833,
    }
    assert "2/3 = 0.667" in capsys.readouterr().out
    figures = {CONTEXT: {}}
    told(Result(error="Neo4j away"), [], [], figures)
    assert figures[CONTEXT] == {}
