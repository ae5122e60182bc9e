"""Rolling channel summaries, the pure part: the Summarizer interface, the offline extractive
summarizer, the token estimate and which episodes a fold takes.

A summary is plain text, one line per kept sentence, in time order:
``[2026-11-29] Devon (@devon): I'll send the Q3 forecast by Friday.``
The extractive summarizer keeps the sentences that carry decisions, identifiers, numbers and
dates, commitments and open questions, and drops chit-chat. Over budget it drops the
lowest-priority lines first, oldest first within a priority:

    commitment (5) > decision (4) > identifier (3) > open question (2) > number/date (1)

Commitments and decisions are what an agent is held to; identifiers cannot be guessed back;
questions may be answered later; a bare number is the least useful out of context. The
commitments, decisions and identifiers of the turns being folded go last of all: a fold keeps
every one of them unless they alone exceed the budget, and the summary forgets its older lines
instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pipeline.english.cues import COMMITMENT, DECISION, NUMBER, QUANTITY

LineKind = Literal["commitment", "decision", "identifier", "question", "number"]

PRIORITY: Final[dict[LineKind, int]] = {
    "commitment": 5,
    "decision": 4,
    "identifier": 3,
    "question": 2,
    "number": 1,
}

# What a fold keeps of the turns it folds, before any older line of the summary.
KEPT_WHEN_FOLDED: Final[frozenset[LineKind]] = frozenset({"commitment", "decision", "identifier"})

# A pasted document is one "sentence": each line is cut here so one line never eats the budget.
MAX_LINE_CHARS: Final = 400


class EpisodeText(BaseModel):
    """One kept message as a summarizer reads it: who said what, when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    speaker_label: str
    content: str
    created_at: datetime


class SummaryLine(BaseModel):
    """One sentence the extractive summarizer kept, with why (its kinds) and its priority."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    kinds: tuple[LineKind, ...] = Field(min_length=1)
    order: int

    @property
    def priority(self) -> int:
        return max(PRIORITY[k] for k in self.kinds)


class Summarizer(Protocol):
    """Folds episodes into a summary of at most `max_tokens` estimated tokens."""

    max_tokens: int

    def fold(self, previous: str | None, episodes: Sequence[EpisodeText]) -> str:
        """The previous summary with these (later) episodes folded in."""
        ...

    def rebuild(self, episodes: Sequence[EpisodeText]) -> str:
        """A summary made from raw episodes alone (re-anchoring: no drift carried over)."""
        ...


def estimate_tokens(text: str) -> int:
    """A cheap, deterministic token estimate (about four characters a token in English)."""
    return (len(text) + 3) // 4


def episode_tokens(episode: EpisodeText) -> int:
    """Tokens of an episode as a summarizer sees it: its labelled text."""
    return estimate_tokens(f"{episode.speaker_label}: {episode.content}")


def fold_chunk(pending: Sequence[EpisodeText], fold_tokens: int) -> list[EpisodeText]:
    """The oldest episodes to fold, or [] while the unsummarised ones fit the budget.

    Past `fold_tokens`, the oldest half (by tokens, at least one episode) folds, but never more
    than `fold_tokens` at once, so a long backlog (a history import) folds in bounded steps and
    an LLM never sees more than the budget. `pending` must be in time order; reading only the
    first 2 * fold_tokens of a longer backlog gives the same answer (see `read_cap`).
    """
    sizes = [episode_tokens(e) for e in pending]
    total = sum(sizes)
    if total <= fold_tokens:
        return []
    target = min(total // 2, fold_tokens)
    taken = 0
    for count, size in enumerate(sizes, start=1):
        taken += size
        if taken >= target:
            return list(pending[:count])
    return list(pending)


def horizon(episodes: Sequence[EpisodeText], tokens: int) -> Sequence[EpisodeText]:
    """The latest of `episodes` (in time order) that hold `tokens`, the one that crosses it
    included: what a re-anchor reads back (pipeline.graph.summaries.channel_episodes)."""
    total = 0
    for start in range(len(episodes) - 1, -1, -1):
        total += episode_tokens(episodes[start])
        if total > tokens:
            return episodes[start:]
    return episodes


def read_cap(fold_tokens: int) -> int:
    """How many tokens of a backlog `fold_chunk` needs to see: past this it always takes the
    first `fold_tokens`."""
    return 2 * fold_tokens


# -- classification ----------------------------------------------------------------------------

_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(\.[\w-]+)+\b")
_HANDLE = re.compile(r"(?<![\w@])@\w{2,}")
_TICKET = re.compile(r"(?<!\w)#\d+\b")
_FLIGHT = re.compile(r"\b[A-Z]{2}\s\d{2,4}\b")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]*[A-Za-z0-9]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_LINE = re.compile(r"^\[(?P<date>\d{4}-\d{2}-\d{2})\] (?P<speaker>.*?): (?P<text>.*)$")


def _normalise(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def _is_identifier_token(token: str) -> bool:
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    if "_" in token and has_alpha:
        return True  # snake_case ids: user_id, mia_li_3668
    if not (has_digit and has_alpha):
        # Dotted versions (1.2.3) carry no letter.
        return token.count(".") >= 2 and all(p.isdigit() for p in token.split("."))
    return not QUANTITY.fullmatch(token)


def has_identifier(text: str) -> bool:
    """Ids, codes, URLs, emails, handles, flight numbers, ticket numbers and versions."""
    if any(p.search(text) for p in (_URL, _EMAIL, _HANDLE, _TICKET, _FLIGHT)):
        return True
    return any(_is_identifier_token(t) for t in _TOKEN.findall(text))


def classify(sentence: str, *, open_question: bool) -> tuple[LineKind, ...]:
    """Why a sentence is worth keeping (empty: chit-chat). A question counts only if open."""
    text = _normalise(sentence)
    kinds: list[LineKind] = []
    if COMMITMENT.search(text):
        kinds.append("commitment")
    if DECISION.search(text):
        kinds.append("decision")
    if has_identifier(text):
        kinds.append("identifier")
    if open_question and text.rstrip().endswith("?"):
        kinds.append("question")
    if NUMBER.search(text):
        kinds.append("number")
    return tuple(kinds)


def sentences(content: str) -> list[str]:
    """A message's sentences, stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(content) if s.strip()]


def _answered(episodes: Sequence[EpisodeText], index: int) -> bool:
    """Whether someone else's next message (in this window) answers, i.e. is not a question."""
    asker = episodes[index].speaker_label
    for later in episodes[index + 1 :]:
        if later.speaker_label != asker:
            return any(not s.endswith("?") for s in sentences(later.content))
    return False


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def episode_lines(episodes: Sequence[EpisodeText], *, start: int = 0) -> list[SummaryLine]:
    """The kept sentences of episodes (in time order), each as a labelled, dated line."""
    lines: list[SummaryLine] = []
    order = start
    for index, episode in enumerate(episodes):
        day = episode.created_at.astimezone(UTC).strftime("%Y-%m-%d")
        answered: bool | None = None
        for sentence in sentences(episode.content):
            if sentence.endswith("?") and answered is None:
                answered = _answered(episodes, index)
            kinds = classify(sentence, open_question=not answered)
            if not kinds:
                continue
            text = f"[{day}] {episode.speaker_label}: {_clip(sentence, MAX_LINE_CHARS)}"
            lines.append(SummaryLine(text=text, kinds=kinds, order=order))
            order += 1
    return lines


def summary_lines(text: str | None) -> list[SummaryLine]:
    """A previous summary's lines, classified again (a line kept as a question was open)."""
    lines: list[SummaryLine] = []
    for order, raw in enumerate((text or "").splitlines()):
        line = raw.strip()
        if not line:
            continue
        match = _LINE.match(line)
        sentence = match.group("text") if match else line
        kinds = classify(sentence, open_question=True)
        if kinds:
            lines.append(SummaryLine(text=line, kinds=kinds, order=order))
    return lines


def within_budget(
    lines: Sequence[SummaryLine], max_tokens: int, *, folded_from: int | None = None
) -> list[SummaryLine]:
    """Drop the lowest-priority lines (oldest first within a priority) until the joined text
    fits `max_tokens`; the rest keep their time order. Commitments, decisions and identifiers
    from `folded_from` on (the turns being folded) are dropped only after every other line."""

    def kept_for(line: SummaryLine) -> tuple[bool, int, int]:
        folded = folded_from is not None and line.order >= folded_from
        return (folded and bool(KEPT_WHEN_FOLDED & set(line.kinds)), line.priority, line.order)

    budget_chars = max_tokens * 4
    total = sum(len(line.text) for line in lines) + max(len(lines) - 1, 0)
    dropped: set[int] = set()
    for line in sorted(lines, key=kept_for):
        if total <= budget_chars:
            break
        dropped.add(line.order)
        total -= len(line.text) + 1
    return [line for line in lines if line.order not in dropped]


class ExtractiveSummarizer:
    """Offline summarizer: keeps the sentences that matter, verbatim, with speaker and date."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens

    def fold(self, previous: str | None, episodes: Sequence[EpisodeText]) -> str:
        kept = summary_lines(previous)
        folded_from = len(kept)
        seen = {line.text for line in kept}
        for line in episode_lines(episodes, start=len(kept)):
            if line.text not in seen:
                seen.add(line.text)
                kept.append(line)
        # Renumber so `order` is the line's position: budget cuts then go oldest first.
        ordered = [line.model_copy(update={"order": i}) for i, line in enumerate(kept)]
        limit = min(MAX_LINE_CHARS, self.max_tokens * 4)
        clipped = [
            line
            if len(line.text) <= limit
            else line.model_copy(update={"text": _clip(line.text, limit)})
            for line in ordered
        ]
        fitted = within_budget(clipped, self.max_tokens, folded_from=folded_from)
        return "\n".join(line.text for line in fitted)

    def rebuild(self, episodes: Sequence[EpisodeText]) -> str:
        return self.fold(None, episodes)


def fit_lines(text: str, max_tokens: int) -> str:
    """Text cut at a line boundary (or mid-line for a single long line) to fit `max_tokens`:
    the hard bound applied to summaries a model wrote."""
    if estimate_tokens(text) <= max_tokens:
        return text
    kept: list[str] = []
    budget = max_tokens * 4
    used = 0
    for line in text.splitlines():
        cost = len(line) + (1 if kept else 0)
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    if not kept:
        return _clip(text, budget)
    return "\n".join(kept)
