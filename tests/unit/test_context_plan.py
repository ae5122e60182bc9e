"""How a batch of episodes in conversation is embedded: every message and every pair once,
each episode the sum of its own and its lending pairs, the earlier message extended by a pair
it could not hold when it was embedded."""

from __future__ import annotations

from pipeline.embedder import labelled
from pipeline.graph.contextvectors import (
    PAIR_SIDE_CHARS,
    Neighbour,
    PendingEpisode,
    pair_text,
    plan,
)
from pipeline.graph.embeddings import PendingNode


def _node(key: str, text: str) -> PendingNode:
    return PendingNode(key=key, text=text, speaker_label=f"{key.title()} (@{key})")


def _neighbour(node: PendingNode) -> Neighbour:
    return Neighbour(node.key, node.speaker_label, node.text)


A, B, C = (
    _node("a", "why is she packing?"),
    _node("b", "Because I'm going to London"),
    _node("c", "when?"),
)


def _texts(built: list[str], used: list[int]) -> list[str]:
    return [built[i] for i in used]


def test_a_pair_is_embedded_once_for_both_of_its_messages() -> None:
    episodes = [
        PendingEpisode(A, before=None, after=_neighbour(B), extends_before=None),
        PendingEpisode(B, before=_neighbour(A), after=_neighbour(C), extends_before=None),
        PendingEpisode(C, before=_neighbour(B), after=None, extends_before=None),
    ]
    built = plan(episodes)
    ab, bc = pair_text(A, B), pair_text(B, C)
    assert sorted(built.texts) == sorted([A.embed_text, B.embed_text, C.embed_text, ab, bc])
    assert _texts(built.texts, built.parts[0]) == [A.embed_text, ab]
    assert _texts(built.texts, built.parts[1]) == [B.embed_text, ab, bc]
    assert _texts(built.texts, built.parts[2]) == [C.embed_text, bc]
    assert built.extensions == []


def test_a_neighbour_that_may_not_lend_leaves_the_vector_alone() -> None:
    built = plan([PendingEpisode(B, before=None, after=None, extends_before=None)])
    assert built.texts == [B.embed_text]
    assert built.parts == [[0]]


def test_the_earlier_message_takes_the_pair_it_lacked() -> None:
    built = plan(
        [PendingEpisode(B, before=_neighbour(A), after=None, extends_before=_neighbour(A))]
    )
    ab = pair_text(A, B)
    assert built.texts == [B.embed_text, ab]
    assert built.extensions == [("a", "b", 1)]


def test_an_earlier_message_may_take_a_pair_it_cannot_lend() -> None:
    # The earlier message's observers all heard this one, but not the other way round: the pair
    # goes into the earlier vector only.
    built = plan([PendingEpisode(B, before=None, after=None, extends_before=_neighbour(A))])
    assert _texts(built.texts, built.parts[0]) == [B.embed_text]
    assert built.extensions == [("a", "b", 1)]
    assert built.texts[1] == pair_text(A, B)


def test_the_pair_is_read_as_two_labelled_lines() -> None:
    assert pair_text(A, B) == f"{A.embed_text}\n{B.embed_text}"
    assert B.embed_text == labelled("B (@b)", "Because I'm going to London")


def test_a_long_message_cannot_push_its_neighbour_out_of_the_pair() -> None:
    # The model reads 256 word pieces: a long earlier message keeps its end, a long later one
    # its start, so both are in what the model reads.
    long = PendingNode(key="l", text="x" * 2000 + " the end", speaker_label="L (@l)")
    first, second = pair_text(long, B).split("\n")
    assert first.startswith("L (@l): ...") and first.endswith(" the end")
    assert len(first) <= len("L (@l): ...") + PAIR_SIDE_CHARS
    assert second == B.embed_text
    first, second = pair_text(A, long).split("\n")
    assert first == A.embed_text
    assert second.startswith("L (@l): xxx") and second.endswith("...")
    assert "the end" not in second
