"""Lenses: which kinds and topics of memory an agent keeps, so each agent remembers its role.

A lens comes from the agent participant's `lens` name. Built-in lenses can be extended or
overridden by a JSON file the user owns (MEMSYNC_LENSES_FILE), e.g.
`{"travel": {"kinds": ["preference", "fact", "commitment", "closure"], "topics": ["seat"]}}`.
Items without a topic pass a topic filter unless the lens sets `"untopical": false`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import ConfigurationError
from schemas.memory import MEMORY_KINDS, MemoryItem, MemoryKind

DEFAULT_LENS = "default"


class Lens(BaseModel):
    """What one kind of agent keeps: memory kinds, and topics (None keeps every topic)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kinds: frozenset[MemoryKind] = frozenset(MEMORY_KINDS)
    topics: frozenset[str] | None = None
    untopical: bool = True

    def keeps(self, item: MemoryItem) -> bool:
        if item.kind not in self.kinds:
            return False
        # A closure must reach the commitment it closes, whatever its wording's topic.
        if self.topics is None or item.kind == "closure":
            return True
        if item.topic is None:
            return self.untopical
        return item.topic in self.topics


BUILTIN_LENSES: dict[str, Lens] = {
    DEFAULT_LENS: Lens(),
    "travel": Lens(
        kinds=frozenset({"preference", "fact", "agreement", "commitment", "closure"}),
        topics=frozenset({"seat", "food", "hotel", "schedule", "travel", "health"}),
    ),
    "finance": Lens(
        kinds=frozenset({"fact", "agreement", "commitment", "closure", "preference"}),
        topics=frozenset({"price", "terms", "work"}),
        untopical=False,
    ),
}


def parse_lenses(text: str) -> dict[str, Lens]:
    """Built-in lenses updated with a user's JSON lens file; errors name the lens and field."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"lens file is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigurationError("lens file must be a JSON object of lens name -> lens")
    lenses = dict(BUILTIN_LENSES)
    for name, spec in raw.items():
        try:
            lenses[name] = Lens.model_validate(spec)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in error["loc"])
            raise ConfigurationError(f"lens {name!r}: {field}: {error['msg']}") from None
    return lenses


def apply_lens(
    items: Sequence[MemoryItem], lens_name: str | None, lenses: Mapping[str, Lens]
) -> list[MemoryItem]:
    """The items this agent keeps; an unknown lens name falls back to the default lens."""
    lens = lenses.get(lens_name or DEFAULT_LENS) or lenses.get(DEFAULT_LENS) or Lens()
    return [item for item in items if lens.keeps(item)]
