"""Whether a line points back at something said before it ("I'll do that for you"): such a
commitment names nothing a later reader can act on without the message it answers."""

from __future__ import annotations

from typing import Final

# A pronoun standing for something earlier. "that" opening a clause ("make sure that the
# refund goes through", "so that you can") points forward, not back, so it does not count.
_POINTS_BACK: Final = (
    r"\b(?:it|this|them|those|these|that(?!\s+(?:the|a|an|i|you|we|he|she|they|it|my|your|"
    r"our|his|her|their|there|is|was|will|would|should|can|could)\b))\b"
)

# The test as a whole-string Cypher `=~` pattern (Java's syntax agrees here): the context's
# statement seeks what a commitment answers only for a commitment whose text matches it.
POINTS_BACK_MATCH: Final = f"(?is).*(?:{_POINTS_BACK}).*"
