"""Stage 5a: read memory items (preferences, facts, agreements, obligations) out of a turn.

Pure functions: the English rules in pipeline/english/ find candidates in each message's text
(and read its topic and due dates), and this stage resolves "I", "you", names and @handles to the
turn's participants.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime
from typing import Protocol

from pipeline.english.due import due_in_window, resolve_due
from pipeline.english.patterns import Candidate
from pipeline.english.rules import candidates
from pipeline.english.topics import topic_of
from schemas.memory import PAYS_WITH, MemoryItem, MemoryKind, Source
from schemas.records import AttributedMessage, ChannelRef, ResolvedTurn, Speaker

BASE_CONFIDENCE = {
    "preference": 0.8,
    "fact": 0.8,
    "agreement": 0.75,
    "commitment": 0.75,
    "closure": 0.7,
}
HEDGE_FACTOR = 0.6


def provenance(speaker: Speaker, *, about_self: bool) -> Source:
    """The one provenance rule: only a human speaking about themselves is self_stated; any
    agent's claim, and anything said about someone else, is peer_stated. Never verified."""
    return "self_stated" if about_self and speaker.kind == "human" else "peer_stated"


def confidence_for(kind: MemoryKind, *, hedged: bool) -> float:
    return round(BASE_CONFIDENCE[kind] * (HEDGE_FACTOR if hedged else 1.0), 3)


def memory_item(
    kind: MemoryKind,
    *,
    speaker: Speaker,
    subject: Speaker | ChannelRef,
    message: AttributedMessage,
    predicate: str,
    value: str,
    text: str,
    topic: str | None,
    negated: bool = False,
    hedged: bool = False,
    owed_to: Speaker | None = None,
    due: datetime | None = None,
) -> MemoryItem:
    """The one item builder both extractors share, so provenance, confidence, obligations (owed
    by the speaker, never to themselves), evidence, times and due window cannot drift apart."""
    # Agents' claims are never taken at their word, even about themselves.
    about_self = isinstance(subject, Speaker) and subject.key == speaker.key
    obligation = kind in ("commitment", "closure")
    owed = owed_to if obligation and owed_to is not None and owed_to.key != speaker.key else None
    return MemoryItem(
        kind=kind,
        subject_key=subject.key,
        speaker_key=speaker.key,
        evidence_key=message.key,
        source=provenance(speaker, about_self=about_self),
        predicate=predicate,
        value=value,
        text=text,
        topic=topic,
        negated=negated,
        hedged=hedged,
        confidence=confidence_for(kind, hedged=hedged),
        stated_at=message.created_at,
        owed_by_key=speaker.key if obligation else None,
        owed_to_key=owed.key if owed else None,
        due=due_in_window(due),
    )


class Extractor(Protocol):
    """Anything that turns a resolved turn into memory items for one agent.

    Outside a DM the items must not depend on `agent`: a turn is extracted once for all the
    agents in its channel (pipeline/memorize.py).
    """

    def extract(self, turn: ResolvedTurn, agent: Speaker) -> list[MemoryItem]: ...


class RulesExtractor:
    """The offline extractor: English patterns, no network and no model."""

    def extract(self, turn: ResolvedTurn, agent: Speaker) -> list[MemoryItem]:
        return extract_memories(turn, agent)


def extract_memories(turn: ResolvedTurn, agent: Speaker) -> list[MemoryItem]:
    """Every memory item in the turn, as `agent` would read it (no lens filtering here)."""
    items: list[MemoryItem] = []
    by_key = {p.key: p for p in turn.participants}
    for message in turn.messages:
        speaker = by_key.get(message.speaker_key)
        if speaker is None or message.role not in ("human", "ai"):
            continue
        found = candidates(message.content)
        if not found:
            # Most messages give nothing: their addressee is never looked for.
            continue
        other = _dm_partner(turn, speaker, agent)
        addressee = _addressee(message.content, turn.participants, speaker) or other
        for candidate in found:
            item = _item(candidate, turn, message, speaker, addressee)
            if item is not None:
                items.append(item)
    return items


def _item(
    c: Candidate,
    turn: ResolvedTurn,
    message: AttributedMessage,
    speaker: Speaker,
    addressee: Speaker | None,
) -> MemoryItem | None:
    subject = _subject(c.subject, turn, speaker, addressee)
    if subject is None:
        return None
    obligation = c.kind in ("commitment", "closure")
    owed_to = addressee if obligation and addressee and addressee.key != speaker.key else None
    due = resolve_due(c.due_phrase, message.created_at) if c.due_phrase else None
    return memory_item(
        c.kind,
        speaker=speaker,
        subject=subject if isinstance(subject, Speaker) else turn.channel,
        message=message,
        predicate=c.predicate,
        value=c.value,
        text=_text(c, turn, subject, owed_to, due),
        # A way to pay is one slot per channel, whatever it names ("Visa" reads as travel).
        topic=None if c.predicate == PAYS_WITH else topic_of(f"{c.predicate} {c.value}"),
        negated=c.negated,
        hedged=c.hedged,
        owed_to=owed_to,
        due=due,
    )


def _subject(
    ref: str, turn: ResolvedTurn, speaker: Speaker, addressee: Speaker | None
) -> Speaker | str | None:
    if ref == "speaker":
        return speaker
    if ref == "channel":
        return "channel"
    if ref == "other":
        return addressee
    return _named(ref.removeprefix("name:"), turn.participants, speaker)


def _dm_partner(turn: ResolvedTurn, speaker: Speaker, agent: Speaker) -> Speaker | None:
    """In a DM, the one participant who is not the speaker ("you")."""
    if turn.channel.kind != "dm":
        return None
    others = [p for p in turn.participants if p.key != speaker.key]
    if len(others) == 1:
        return others[0]
    return agent if agent.key != speaker.key and agent in others else None


def _named(word: str, participants: list[Speaker], speaker: Speaker) -> Speaker | None:
    word = word.lower()
    for p in participants:
        if p.key == speaker.key:
            continue
        if word == f"@{p.handle.lower()}" or word.lstrip("@") == p.display_name.lower():
            return p
        if word == p.display_name.lower().split()[0]:
            return p
    return None


def _addressee(text: str, participants: list[Speaker], speaker: Speaker) -> Speaker | None:
    """The first other participant named or @-mentioned in the message."""
    best: tuple[int, Speaker] | None = None
    for p in participants:
        if p.key == speaker.key:
            continue
        m = _mention(p.handle, p.display_name).search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), p)
    return best[1] if best else None


@functools.lru_cache(maxsize=4096)
def _mention(handle: str, display_name: str) -> re.Pattern[str]:
    """How a message names a participant: "@handle", or the display name as words. Compiled
    once per name (building it per message and participant was a sixth of the extractor's time)."""
    return re.compile(rf"{re.escape(f'@{handle}')}|\b{re.escape(display_name)}\b", re.IGNORECASE)


def _text(
    c: Candidate,
    turn: ResolvedTurn,
    subject: Speaker | str,
    owed_to: Speaker | None,
    due: datetime | None,
) -> str:
    """One line a reader understands without the graph: labels, not keys."""
    hedge = " (hedged)" if c.hedged else ""
    if isinstance(subject, str):
        where = turn.channel.title or turn.channel.id
        what = " to pay with" if c.predicate == PAYS_WITH else ""
        return f"Agreed in {where}{what}: {c.value or '(previous proposal)'}{hedge}"
    who = subject.label
    if c.kind == "commitment":
        to = f" to {owed_to.label}" if owed_to else ""
        when = f" by {due.date().isoformat()}" if due else ""
        return f"{who} committed{to}: {c.value}{when}{hedge}"
    if c.kind == "closure":
        verb = "cancelled" if c.predicate == "cancels" else "completed"
        return f"{who} {verb}: {c.value or '(open commitment)'}{hedge}"
    predicate = c.predicate.replace("_", " ")
    if c.kind == "fact" and c.predicate not in ("lives_in", "works_at", "deploys_to", "uses"):
        return f"{who}'s {predicate} is {c.value}{hedge}"
    if c.doing and c.predicate == "dislikes":
        return f"{who} prefers not to {c.value}{hedge}"
    to = "to " if c.doing else ""
    return f"{who} {predicate} {to}{c.value}{hedge}"
