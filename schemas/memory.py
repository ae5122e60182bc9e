"""Memory items: what an agent learns from a turn (preferences, facts, agreements, obligations).

Polarity lives in the predicate: "I don't like red-eyes" gives predicate "dislikes" with
`negated=True` (the statement was phrased negatively), so readers never have to combine the two.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

MemoryKind = Literal["preference", "fact", "agreement", "commitment", "closure"]
Source = Literal["self_stated", "peer_stated", "verified"]

# The predicate of a closure read from a tool call rather than from words: its value is the
# stems of the act (pipeline/english/actions.py), and it closes only promises of its channel.
CALLED: Final = "called"
# The predicate of an agreement on how to pay ("I'll use the Visa ending in 6437"): one slot per
# channel, so a later choice of payment replaces an earlier one and no other agreement.
PAYS_WITH: Final = "pays_with"

MEMORY_KINDS: tuple[MemoryKind, ...] = (
    "preference",
    "fact",
    "agreement",
    "commitment",
    "closure",
)


class MemoryItem(BaseModel):
    """One thing an agent may remember, with who it is about, who said it and where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: MemoryKind
    # The participant the item is about; for an agreement, the channel key.
    subject_key: str
    speaker_key: str
    # The episode (AttributedMessage.key) the item was read from.
    evidence_key: str
    # Message text never yields "verified"; only an explicit API call may set it.
    source: Source
    predicate: str
    value: str
    text: str
    topic: str | None = None
    negated: bool = False
    hedged: bool = False
    confidence: float = Field(ge=0.0, le=1.0)
    stated_at: datetime
    owed_by_key: str | None = None
    # None means the obligation is owed to the channel as a whole.
    owed_to_key: str | None = None
    due: datetime | None = None
