"""How numbers are written in chat, shared by the extractor's patterns and the read side."""

from __future__ import annotations

from typing import Final

# A comma between digits that groups thousands ("2,000 EUR", "$1,250.50"): part of the number,
# so "2,000" and "2000" name one value.
GROUPING_COMMA: Final = r"(?<=\d),(?=\d{3}(?!\d))"
