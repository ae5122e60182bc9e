"""Reference retriever: plain Okapi BM25 over raw message text, in pure Python.

It is the yardstick the graph retrievers must beat, so it is deliberately plain: lowercase
alphanumeric tokens, no stemming, no stop words, k1=1.2, b=0.75, Lucene's non-negative IDF.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


@dataclass(frozen=True)
class Document:
    """One retrievable unit: its text and the platform message ids it carries."""

    text: str
    evidence: tuple[str, ...]


class BM25:
    """An Okapi BM25 index over a fixed list of documents."""

    def __init__(self, documents: Sequence[Document], k1: float = 1.2, b: float = 0.75) -> None:
        self.documents = list(documents)
        self.k1, self.b = k1, b
        self.freqs = [Counter(tokens(d.text)) for d in self.documents]
        self.lengths = [sum(f.values()) for f in self.freqs]
        n = len(self.documents)
        self.average = (sum(self.lengths) / n) if n else 0.0
        df: Counter[str] = Counter()
        for f in self.freqs:
            df.update(f.keys())
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, f in enumerate(self.freqs):
            for t in f:
                self.postings.setdefault(t, []).append(i)

    def scores(self, query: str) -> dict[int, float]:
        """Document index to score, for documents sharing at least one term with the query."""
        result: dict[int, float] = {}
        for term in set(tokens(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i in self.postings[term]:
                tf = self.freqs[i][term]
                norm = 1 - self.b + self.b * self.lengths[i] / self.average
                result[i] = result.get(i, 0.0) + idf * tf * (self.k1 + 1) / (tf + self.k1 * norm)
        return result

    def search(self, query: str, limit: int = 10) -> list[Document]:
        """The best `limit` documents, ties broken by position (earlier first) for stability."""
        ranked = sorted(self.scores(query).items(), key=lambda kv: (-kv[1], kv[0]))
        return [self.documents[i] for i, _ in ranked[:limit]]


def windows(messages: Sequence[tuple[str, str]], radius: int = 1) -> list[Document]:
    """One document per message: it with its `radius` neighbours on each side, in order.

    `messages` is one channel's (message id, text) in time order.
    """
    docs: list[Document] = []
    for i in range(len(messages)):
        part = messages[max(0, i - radius) : i + radius + 1]
        docs.append(Document(" ".join(t for _, t in part), tuple(m for m, _ in part)))
    return docs
