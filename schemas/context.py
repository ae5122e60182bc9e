"""Context: what an agent is told before it answers in a channel, and its rendering as messages.

A Context holds only what survived the token budget (see pipeline/context.py for the priority
order); `dropped` lists what was cut. `render()` turns it into OpenAI-style system messages that
a platform puts in front of its recent window of the conversation.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.memory import Source
from schemas.recall import Change, RecallItem, reply_note

Section = Literal["header", "summary", "commitments", "facts", "memories"]
SECTIONS: tuple[Section, ...] = ("header", "summary", "commitments", "facts", "memories")
Message = dict[str, str]

# How each source reads in the rendered context: a peer's claim must never read as verified.
_PROVENANCE: dict[Source, str] = {
    "verified": "verified",
    "self_stated": "self-stated",
}


class ContextParty(BaseModel):
    """A participant as the context names them: id (who) and label (how they read)."""

    model_config = ConfigDict(frozen=True)

    id: str
    label: str
    is_agent: bool = False


class ContextChannel(BaseModel):
    """The channel the context is for; kind and title are None for a channel never stored."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str | None = None
    title: str | None = None

    @property
    def name(self) -> str:
        return f"#{self.id} ({self.title})" if self.title else f"#{self.id}"


class ContextSummary(BaseModel):
    """The agent's rolling summary of the channel, covering its episodes up to `covers_until`."""

    model_config = ConfigDict(frozen=True)

    key: str
    text: str
    version: int
    covers_until: datetime


class ContextFact(BaseModel):
    """A current fact about someone present (or the channel), with where it came from."""

    model_config = ConfigDict(frozen=True)

    key: str
    subject_id: str
    subject_label: str
    text: str
    source: Source
    stated_by_id: str | None = None
    stated_by_label: str | None = None
    stated_at: datetime
    last_confirmed: datetime
    # Not restated for longer than the context's `stale_after_days`.
    stale: bool = False
    # Channel ids of its evidence episodes, and the platform message ids themselves.
    learnt_in: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)

    @property
    def provenance(self) -> str:
        """How the fact is marked: verified, self-stated, or whose unverified claim it is."""
        if self.source == "peer_stated":
            return f"said by {self.stated_by_label or 'someone else'}, unverified"
        return _PROVENANCE[self.source]

    def line(self) -> str:
        marks = [self.provenance]
        if self.stale:
            marks.append(f"stale: last confirmed {self.last_confirmed.astimezone(UTC):%Y-%m-%d}")
        return f"- {self.text} ({'; '.join(marks)})"


class ContextCommitment(BaseModel):
    """An open commitment owed by or to someone present (or to the channel)."""

    model_config = ConfigDict(frozen=True)

    key: str
    text: str
    owed_by: ContextParty
    # A participant, or the channel itself (a promise made to everyone there); None if unknown.
    owed_to: ContextParty | None = None
    due: datetime | None = None
    opened_at: datetime
    source: Source | None = None
    learnt_in: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    # The message it answers ("Name (@handle): text"), when its own words point back at it
    # ("I'll do that for you"): without it the line names nothing to act on.
    in_reply_to: str | None = None
    # Values its text quotes that a later statement replaced (the commitment stands; the value
    # it names is no longer current), each with what replaced it.
    changed: list[Change] = Field(default_factory=list)

    def line(self) -> str:
        due = f", due {self.due.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if self.due else ""
        since = f"since {self.opened_at.astimezone(UTC):%Y-%m-%d}"
        mark = ", unverified" if self.source == "peer_stated" else ""
        # The extractors write a whole sentence that names who owes whom ("Devon (@devon)
        # committed to Sarah (@sarah): ..."); only a bare value needs them said again.
        said = self.text
        if not said.startswith(self.owed_by.label):
            owes = f"owes {self.owed_to.label}" if self.owed_to else "promised"
            said = f"{self.owed_by.label} {owes}: {said}"
        changes = "".join(f"\n  ({change.note()})" for change in self.changed)
        return f"- {said}{reply_note(self.in_reply_to)} ({since}{due}{mark}){changes}"


class Dropped(BaseModel):
    """One thing the budget cut: its section and key (`partial`: only some summary lines)."""

    model_config = ConfigDict(frozen=True)

    section: Section
    key: str
    partial: bool = False


class Context(BaseModel):
    """What `agent` is told in `channel`: summary, people, facts, commitments, memories."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    agent: ContextParty
    channel: ContextChannel
    query: str | None = None
    summary: ContextSummary | None = None
    participants: list[ContextParty] = Field(default_factory=list)
    commitments: list[ContextCommitment] = Field(default_factory=list)
    facts: list[ContextFact] = Field(default_factory=list)
    memories: list[RecallItem] = Field(default_factory=list)
    stale_after_days: int = 90
    budget_tokens: int = Field(ge=0)
    used_tokens: int = Field(default=0, ge=0)
    # False when even the header did not fit: nothing is rendered at all.
    header: bool = True
    dropped: list[Dropped] = Field(default_factory=list)

    @model_validator(mode="after")
    def _within_budget(self) -> Context:
        if self.used_tokens > self.budget_tokens:
            raise ValueError(f"used_tokens {self.used_tokens} exceed budget {self.budget_tokens}")
        return self

    def dropped_by_section(self) -> dict[Section, list[str]]:
        """The keys the budget cut, per section (sections with nothing cut are absent)."""
        cut: dict[Section, list[str]] = {}
        for item in self.dropped:
            cut.setdefault(item.section, []).append(item.key)
        return cut

    def render(self) -> list[Message]:
        """System messages, one per non-empty section, in a fixed order with clear headings."""
        if not self.header:
            return []
        messages = [self._header()]
        if self.summary is not None:
            messages.append(_system(self._summary(self.summary)))
        if self.commitments:
            lines = [c.line() for c in self.commitments]
            messages.append(_system("\n".join(["## Open commitments", *lines])))
        if self.facts:
            messages.append(_system(self._facts()))
        if self.memories:
            messages.append(_system(self._memories()))
        return messages

    def _header(self) -> Message:
        you = f"{self.agent.label} (you)"
        people = [p.label for p in self.participants if p.id != self.agent.id]
        lines = [
            f"# Memory for {self.agent.label} in {self.channel.name}",
            "Long-term memory, not part of the conversation; it may be incomplete or out of date.",
            f"People here: {', '.join([*people, you])}",
        ]
        return _system("\n".join(lines))

    def _summary(self, summary: ContextSummary) -> str:
        until = summary.covers_until.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
        return f"## Summary of this channel so far (up to {until} UTC)\n{summary.text}"

    def _facts(self) -> str:
        lines = ["## What you know about the people here"]
        for subject, facts in _grouped(self.facts):
            lines.append(f"### {subject}")
            lines.extend(f.line() for f in facts)
        return "\n".join(lines)

    def _memories(self) -> str:
        about = f": {self.query}" if self.query else ""
        lines = [f"## Memories that may be relevant{about}"]
        lines.extend(_memory_line(m) for m in self.memories)
        return "\n".join(lines)


def _system(content: str) -> Message:
    return {"role": "system", "content": content}


def _grouped(facts: Iterable[ContextFact]) -> list[tuple[str, list[ContextFact]]]:
    """Facts per subject, subjects in order of their first fact."""
    groups: dict[str, tuple[str, list[ContextFact]]] = {}
    for fact in facts:
        groups.setdefault(fact.subject_id, (fact.subject_label, []))[1].append(fact)
    return list(groups.values())


def _memory_line(item: RecallItem) -> str:
    when = f"{item.created_at.astimezone(UTC):%Y-%m-%d}" if item.created_at else "undated"
    where = f" #{item.channel_id}" if item.channel_id else ""
    head = f"- [{when}{where}]"
    if item.kind == "episode":
        changes = "".join(f"\n  ({change.note()})" for change in item.changed)
        said = item.attributed()
        if "\n" in said:
            body = "\n".join(f"  {line}" for line in said.splitlines())
            return f"{head}\n{body}{changes}"
        return f"{head} {said}{changes}"
    mark = ""
    if item.source == "peer_stated":
        mark = f" (said by {item.speaker_label or 'someone else'}, unverified)"
    elif item.source is not None:
        mark = f" ({_PROVENANCE[item.source]})"
    return f"{head} {item.kind}: {item.text}{reply_note(item.in_reply_to)}{mark}"


__all__ = [
    "SECTIONS",
    "Context",
    "ContextChannel",
    "ContextCommitment",
    "ContextFact",
    "ContextParty",
    "ContextSummary",
    "Dropped",
    "Message",
    "Section",
]
