"""The blind recall sets load as bench/recall.py asks them: every case its own channel, its
gold messages among the messages written, an agent speaking as `ai`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.recall import (
    CUSTOMER_MEMORY,
    CUSTOMER_TENANT,
    PARA_TENANT,
    PARAPHRASES,
    paraphrase_corpus,
)


@pytest.mark.parametrize(
    ("path", "tenant", "cases"),
    [(PARAPHRASES, PARA_TENANT, 40), (CUSTOMER_MEMORY, CUSTOMER_TENANT, 40)],
)
def test_a_blind_set_loads_with_its_gold_among_its_messages(
    path: Path, tenant: str, cases: int
) -> None:
    corpus = paraphrase_corpus(path, path.stem, tenant)
    assert corpus.name == path.stem
    assert len(corpus.cases) == cases
    assert len({event["channel"]["id"] for event in corpus.events}) == cases
    written = {m["id"] for event in corpus.events for m in event["messages"]}
    for case in corpus.cases:
        assert case.gold and case.gold <= written
    for event in corpus.events:
        assert event["tenant"] == tenant
        assert any(m["role"] == "ai" for m in event["messages"]) or tenant == PARA_TENANT
