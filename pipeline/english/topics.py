"""English topic words: which subject area a memory's text is about (travel, food, work...)."""

from __future__ import annotations

import re

TOPICS: list[tuple[str, re.Pattern[str]]] = [
    ("health", re.compile(r"allerg|doctor|medic|health|asthma|diabet", re.I)),
    ("seat", re.compile(r"window|aisle|seat|legroom|exit row|middle", re.I)),
    (
        "food",
        re.compile(
            r"vegan|vegetarian|meal|food|eat|coffee|tea\b|spicy|restaurant|lunch|"
            r"dinner|breakfast|gluten|dairy|nut|pork|beef|fish|sushi|pizza|wine",
            re.I,
        ),
    ),
    ("hotel", re.compile(r"hotel|room|suite|bed\b|airbnb|check-?in|hostel", re.I)),
    ("terms", re.compile(r"net-?\d+|terms|contract|invoice|payment|deposit|refund|sla", re.I)),
    ("price", re.compile(r"price|cost|budget|\$|usd|eur|€|£|discount|rate|cheap|fee", re.I)),
    (
        "schedule",
        re.compile(
            r"morning|evening|afternoon|meeting|schedule|\d\s?[ap]m|monday|"
            r"tuesday|wednesday|thursday|friday|weekend|calendar|red-?eye",
            re.I,
        ),
    ),
    (
        "travel",
        re.compile(
            r"flight|airline|airport|train|travel|trip|luggage|bag|passport|visa|"
            r"entry rules|business class|economy|reservation|booking",
            re.I,
        ),
    ),
    (
        "work",
        re.compile(
            r"deploy|server|us-(?:east|west)|aws|gcp|forecast|report|manager|office|"
            r"engineer|api|repo|kubernetes|postgres|release|deck|slides",
            re.I,
        ),
    ),
]


def topic_of(text: str) -> str | None:
    """The first topic whose words occur in the text, or None."""
    return next((name for name, pattern in TOPICS if pattern.search(text)), None)
