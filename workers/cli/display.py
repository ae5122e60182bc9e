"""Plain-text views of an agent's memory, shared by the CLI and the demo."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeline.graph.reader import CommitmentView, FactView


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


def _who(key: str | None) -> str:
    return key.split(":", 1)[1] if key and ":" in key else (key or "the channel")


def describe_memory(facts: Sequence[FactView], commitments: Sequence[CommitmentView]) -> list[str]:
    """One line per fact (with provenance) and per commitment (with its state)."""
    lines = []
    for f in facts:
        state = f" [superseded {_when(f.superseded_at)}]" if f.superseded_at else ""
        lines.append(
            f"  fact  {f.text}  ({f.source}, by {_who(f.stated_by)} at {_when(f.stated_at)}, "
            f"confidence {f.confidence:.2f}){state}"
        )
        lines.append(f"        key {f.key}")
    for c in commitments:
        due = f", due {_when(c.due)}" if c.due else ""
        closed = f" at {_when(c.closed_at)}" if c.closed_at else ""
        lines.append(
            f"  owes  {_who(c.owed_by_key)} -> {_who(c.owed_to_key)}: {c.value}{due}  "
            f"[{c.status}{closed}]"
        )
        lines.extend(f"        ({change.note()})" for change in c.changed)
    if not lines:
        lines.append("  (no facts or commitments yet)")
    return lines
