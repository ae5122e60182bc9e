"""Fitting a Context to its token budget: the priority order and the cut, no I/O.

Priority, highest first (the lowest is dropped first, and nothing is kept below a cut):

1. the header (who the agent is, the channel, the people present): without it nothing is shown;
2. the channel's rolling summary (when it does not fit whole, its oldest lines go first);
3. open commitments, the soonest due first (undated ones last), then the most recently opened;
4. facts: verified and self-stated before peer-stated, fresh before stale, then the most
   recently confirmed;
5. relevant memories (recall), by score.

The kept entries are always a prefix of that order, so every kept entry outranks every dropped
one, and the rendered messages never exceed the budget (tokens estimated with the summarizer's
`estimate_tokens`, plus a fixed cost per message).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pipeline.english.numbers import GROUPING_COMMA
from pipeline.summarize import estimate_tokens
from schemas.context import Context, ContextCommitment, ContextFact, Dropped, Message, Section
from schemas.recall import RecallItem

# What a chat format adds per message (role, separators): OpenAI's documented rule of thumb.
MESSAGE_OVERHEAD_TOKENS: Final = 4
# What a context may cost when the caller does not say: a modest slice of a model's window.
DEFAULT_BUDGET_TOKENS: Final = 2000
# A fact not restated for this long is flagged stale (it stays current until it expires).
STALE_AFTER_DAYS: Final = 90

_SOURCE_RANK: Final = {"verified": 0, "self_stated": 0, "peer_stated": 1}
_FAR_FUTURE: Final = datetime.max.replace(tzinfo=UTC)
_GROUPING: Final = re.compile(GROUPING_COMMA)


def quotes(text: str, value: str) -> bool:
    """Whether `text` names `value` as whole words (case and thousands' commas aside): "the 2000
    EUR budget" quotes "2,000 EUR", "20000 EUR" does not quote "2000 EUR"."""
    value = _GROUPING.sub("", value.strip())
    pattern = rf"(?<!\w){re.escape(value)}(?!\w)"
    return bool(value) and re.search(pattern, _GROUPING.sub("", text), re.I) is not None


def is_stale(last_confirmed: datetime, now: datetime, stale_after_days: int) -> bool:
    """Whether a fact last confirmed then counts as stale now (strictly older than the limit)."""
    return now - last_confirmed > timedelta(days=stale_after_days)


def message_tokens(messages: Sequence[Message]) -> int:
    """Estimated tokens of rendered messages: their text plus a fixed cost per message."""
    return sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def fact_order(fact: ContextFact) -> tuple[int, bool, float, str]:
    """Sort key, highest priority first: trusted sources, fresh, recently confirmed."""
    return (_SOURCE_RANK[fact.source], fact.stale, -fact.last_confirmed.timestamp(), fact.key)


def commitment_order(commitment: ContextCommitment) -> tuple[datetime, float, str]:
    """Sort key, highest priority first: soonest due (undated last), then newest."""
    return (
        commitment.due or _FAR_FUTURE,
        -commitment.opened_at.timestamp(),
        commitment.key,
    )


def memory_order(item: RecallItem) -> tuple[float, str]:
    return (-item.score, item.key)


def prioritised(context: Context) -> Context:
    """The same context with each section in priority order."""
    return context.model_copy(
        update={
            "commitments": sorted(context.commitments, key=commitment_order),
            "facts": sorted(context.facts, key=fact_order),
            "memories": sorted(context.memories, key=memory_order),
        }
    )


def _entries(context: Context) -> list[tuple[Section, str]]:
    """Every entry of an untrimmed context in priority order, as (section, key)."""
    entries: list[tuple[Section, str]] = [("header", "header")]
    if context.summary is not None:
        entries.append(("summary", context.summary.key))
    entries += [("commitments", c.key) for c in context.commitments]
    entries += [("facts", f.key) for f in context.facts]
    entries += [("memories", m.key) for m in context.memories]
    return entries


def _prefix(context: Context, count: int, summary_text: str | None = None) -> Context:
    """The context keeping only its first `count` entries in priority order."""
    left = count - 1  # the header is entry 0
    update: dict[str, Any] = {"header": count > 0}
    summary = context.summary
    if summary is not None:
        if left < 1:
            summary = None
        elif summary_text is not None:
            summary = summary.model_copy(update={"text": summary_text})
        left -= 1
    update["summary"] = summary
    for section in ("commitments", "facts", "memories"):
        items: list[Any] = getattr(context, section)
        update[section] = items[: max(left, 0)]
        left -= len(items)
    return context.model_copy(update=update)


def _tokens(context: Context) -> int:
    return message_tokens(context.render())


def _largest(low: int, high: int, fits: Any) -> int:
    """The largest n in [low, high] with fits(n), given fits is monotone and fits(low)."""
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def trim(context: Context) -> Context:
    """The context cut to its `budget_tokens` by the module's priority order, with
    `used_tokens` and `dropped` filled in. Every section must already be in priority order
    (see `prioritised`); the input's own `dropped` is kept and added to."""
    budget = context.budget_tokens
    entries = _entries(context)
    # Most contexts fit whole: one render says so, where the search would take one per halving.
    kept = (
        len(entries)
        if _tokens(_prefix(context, len(entries))) <= budget
        else _largest(0, len(entries), lambda n: _tokens(_prefix(context, n)) <= budget)
    )
    summary_text: str | None = None
    partial = False
    if kept < len(entries) and entries[kept][0] == "summary" and context.summary is not None:
        # The summary alone is too long: keep its most recent lines that fit.
        lines = context.summary.text.splitlines()

        def fits(n: int) -> bool:
            text = "\n".join(lines[len(lines) - n :])
            return _tokens(_prefix(context, kept + 1, text)) <= budget

        tail = _largest(0, len(lines) - 1, fits) if len(lines) > 1 else 0
        if tail > 0:
            summary_text = "\n".join(lines[len(lines) - tail :])
            partial = True
    final = _prefix(context, kept + 1 if partial else kept, summary_text)
    dropped = [Dropped(section=s, key=k) for s, k in entries[kept:]]
    if partial:
        dropped[0] = Dropped(section="summary", key=dropped[0].key, partial=True)
    return Context.model_validate(
        {
            **dict(final),
            "used_tokens": _tokens(final),
            "dropped": [*context.dropped, *dropped],
        }
    )


def fit(context: Context) -> Context:
    """Order each section by priority, then trim to the budget."""
    return trim(prioritised(context))
