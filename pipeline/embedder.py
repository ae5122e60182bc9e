"""Embedders: text to unit vectors for the vector index. Recall works without one (keyword only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed size; one instance per process."""

    @property
    def model(self) -> str:
        """A stable name of the model and its version, stored beside each embedding."""
        ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; batches are the caller's to size."""
        ...


def labelled(speaker_label: str | None, text: str) -> str:
    """What is indexed: who said it together with what was said ("Name (@handle): text")."""
    return f"{speaker_label}: {text}" if speaker_label else text
