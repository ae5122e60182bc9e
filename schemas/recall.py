"""Recall: what an agent asks of its memory (RecallQuery) and what it gets back (RecallItem)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from schemas.event import Identifier, Tenant
from schemas.memory import Source

RecallKind = Literal["episode", "fact", "commitment", "summary"]
RecallMode = Literal["hybrid", "keyword", "vector"]

RECALL_KINDS: tuple[RecallKind, ...] = ("episode", "fact", "commitment", "summary")
# A query is a question, not a document: longer text only slows Lucene and the embedder down.
MAX_QUERY_CHARS = 2000
MAX_LIMIT = 200
# The most message ids one call may leave out (a platform's recent window is far shorter).
MAX_EXCLUDED = 500


class RecallQuery(BaseModel):
    """One recall: whose memory, which scope, and the question.

    `limit` is a budget of messages, not of items: a window of three messages costs three, so a
    long evidence list never buys recall. Without a query (or one with no words) the agent's
    most recent episodes come back instead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: Tenant = "default"
    agent_id: Identifier
    query: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    # Thread memory (episodes, summaries) stays in this channel; facts and commitments follow
    # the agent, filtered by what this channel's audience could have heard.
    channel_id: Identifier | None = None
    # A participant id: episodes they said, facts about them, commitments owed by or to them.
    about: Identifier | None = None
    # When it was said (episode), stated (fact) or opened (commitment). A summary covers its
    # channel from the start up to `covers_until`, so only `since` can leave it out.
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None
    kinds: tuple[RecallKind, ...] = RECALL_KINDS
    # Restricts facts and commitments to these sources; episodes and summaries have none.
    sources: tuple[Source, ...] | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    mode: RecallMode = "hybrid"
    # Neighbouring messages of a hit (same channel, by time, up to `window` either side) are
    # candidates too, scored by a share of the hit's relevance: an answer often sits next to the
    # message that matched the question. Chosen messages that follow each other come back as one
    # item, in time order.
    include_neighbours: bool = True
    window: int = Field(default=1, ge=0, le=2)
    # Superseded or expired facts and closed commitments come back only when asked, and then
    # flagged `current: false`.
    include_stale: bool = False
    include_closed: bool = False
    # Platform message ids never shown (the caller's recent window, already in its prompt); they
    # still lend relevance to the messages beside them, which may then be shown instead. An id
    # is unique only within its channel: hold the recall to the window's channel (as
    # build_context does), or a message of another channel reusing the id is left out too.
    exclude_ids: tuple[Identifier, ...] = Field(default=(), max_length=MAX_EXCLUDED)

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, value: tuple[RecallKind, ...]) -> tuple[RecallKind, ...]:
        if not value:
            raise ValueError("at least one kind is needed")
        return tuple(k for k in RECALL_KINDS if k in value)

    @field_validator("sources")
    @classmethod
    def _sources(cls, value: tuple[Source, ...] | None) -> tuple[Source, ...] | None:
        if value is not None and not value:
            raise ValueError("give at least one source, or none to allow all")
        return value

    @field_validator("until")
    @classmethod
    def _after_since(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        since = info.data.get("since")
        if value is not None and since is not None and value <= since:
            raise ValueError("must be later than since")
        return value

    @property
    def neighbours(self) -> int:
        """How many messages either side of a hit join it."""
        return self.window if self.include_neighbours else 0


class Change(BaseModel):
    """A fact a recalled message gave that a later message of the same channel replaced: what it
    was, what it became, and the ids of the messages saying so."""

    model_config = ConfigDict(frozen=True)

    was: str
    now: str
    evidence: list[str]
    # Where the replacement was said, when that is not the recalled message's own channel (a
    # commitment's note: its value may change wherever its audience heard it).
    said_in: str | None = None

    def note(self) -> str:
        """The change as a reader is told it beside the old message: what a later message said
        and where, not what is current (a replacement its audience did not hear is not named)."""
        where = "in this channel" if self.said_in is None else f"in #{self.said_in}"
        return f'later {where}, "{self.was}" became "{self.now}"'


class RecallItem(BaseModel):
    """One remembered thing, best first in a recall's answer.

    `evidence` lists the platform message ids (`messages[].id` as emitted) the item rests on, in
    time order; an episode's evidence is its own message plus any neighbours shown with it, and
    `matched` names the ones that matched the query.
    """

    model_config = ConfigDict(frozen=True)

    kind: RecallKind
    key: str
    text: str
    score: float
    evidence: list[str]
    matched: list[str] = Field(default_factory=list)
    channel_id: str | None = None
    speaker_label: str | None = None
    speaker_id: str | None = None
    # When it was said (episode), stated (fact), opened (commitment) or covered until (summary).
    created_at: datetime | None = None
    source: Source | None = None
    status: str | None = None
    # False for superseded or expired facts and closed commitments (only with include_*).
    current: bool = True
    # For an episode: facts its messages gave that a later message in the same channel replaced,
    # so an old value shown in a window never reads as current.
    changed: list[Change] = Field(default_factory=list)
    # For a commitment whose own words point back ("I'll do that for you"): the message it
    # answers, "Name (@handle): text"; without it the item names nothing to act on.
    in_reply_to: str | None = None

    def attributed(self) -> str:
        """What the item says, with who said it: a window of several messages already shows
        each as "Name (@handle): text"; a single message, whatever lines it has, gets its
        speaker in front. Other kinds: their text."""
        if self.kind != "episode" or len(self.evidence) > 1:
            return self.text
        return f"{self.speaker_label or 'someone'}: {self.text}"


# How much of the message a commitment answers a line quotes: enough to say what was asked.
_QUOTE_CHARS = 160


def reply_note(in_reply_to: str | None) -> str:
    """' (in reply to "...")' for a commitment that answers a message, the message cut at a
    word boundary after at most _QUOTE_CHARS characters; nothing for one that does not."""
    if not in_reply_to:
        return ""
    text = " ".join(in_reply_to.split())
    if len(text) > _QUOTE_CHARS:
        text = text[:_QUOTE_CHARS].rsplit(" ", 1)[0] + " ..."
    return f' (in reply to "{text}")'


__all__ = [
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "RECALL_KINDS",
    "Change",
    "RecallItem",
    "RecallKind",
    "RecallMode",
    "RecallQuery",
    "reply_note",
]
