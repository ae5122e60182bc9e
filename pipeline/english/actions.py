"""Which promises a tool call carries out, read from the tool's name.

An agent often promises an action while it waits for the go-ahead ("Please confirm, and I'll
proceed with the cancellation"), then makes the call once the customer says yes. The call has
no text; its name says what was done ("cancel_reservation", "updateBooking"). Its leading verb,
and the verbs English uses for the same act, are the word stems a kept promise must hold for the
call to have kept it (pipeline/memorize.py, the graph's closure rule).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

# Verbs of a look-up: its call keeps a promise to look, and a date after one names what is looked
# up, not a deadline (pipeline/english/patterns.py, LOOKUP_VERB).
LOOKUP_VERBS: Final = ("search", "look", "find", "check", "retrieve", "fetch", "query")
# Verbs that name one act: an "update" call carries out a promised change, an upgrade or a
# modification.
_SAME_ACT_VERBS: Final = (
    ("update", "change", "modify", "edit", "adjust", "amend", "upgrade", "downgrade"),
    ("cancel", "revoke", "withdraw"),
    LOOKUP_VERBS,
    ("send", "email", "mail", "notify"),
    ("calculate", "compute"),
)
# A tool name's leading verb is read through these; "get" is too common a word to match a
# promise by ("get back to you"), so it stands for the lookup verbs without itself.
_LEADS: Final[dict[str, str]] = {"get": "fetch", "list": "fetch", "read": "fetch"}
# Calls that act on nothing the customer was promised.
_NO_ACT: Final = frozenset({"think", "log", "noop", "ping"})
# How a tool's result says the call did nothing: "Error: not enough seats", {"error": ...}.
_FAILED_TEXT: Final = re.compile(r"\s*(?:error|failed|failure|exception)\b", re.IGNORECASE)
_FAILED_STATUS: Final = frozenset({"error", "failed", "failure"})
_WORD_BREAK: Final = re.compile(r"[^A-Za-z]+|(?<=[a-z])(?=[A-Z])")
_SHORTEST_STEM: Final = 4


def verb_stem(verb: str) -> str:
    """The stem a verb's forms share: "update" gives "updat" (updating, updated), "modify"
    gives "modif" (modification), "cancel" stays."""
    verb = verb.lower()
    return verb[:-1] if len(verb) > _SHORTEST_STEM and verb[-1] in "ey" else verb


def action_stems(tool_name: str) -> frozenset[str]:
    """The word stems of the act a call of `tool_name` carries out, or none when its name
    begins with no verb long enough to match on ("get" alone, "x", digits)."""
    words = [w for w in _WORD_BREAK.split(tool_name) if w]
    if not words:
        return frozenset()
    verb = words[0].lower()
    if verb in _NO_ACT:
        return frozenset()
    stem = verb_stem(_LEADS.get(verb, verb))
    if len(stem) < _SHORTEST_STEM:
        return frozenset()
    for group in _SAME_ACT:
        if stem in group:
            return group
    return frozenset({stem})


# Stems, so "cancel" holds "cancelling" and "cancellation" and "modif" holds "modification".
_SAME_ACT: Final = tuple(frozenset(verb_stem(v) for v in verbs) for verbs in _SAME_ACT_VERBS)


def failed_result(content: str) -> bool:
    """A tool result that says its call failed: a call refused ("Error: payment method not
    found") kept no promise, whatever the agent says after it."""
    if _FAILED_TEXT.match(content):
        return True
    # Only an object can say so; a long list of search results is not parsed for nothing.
    if not content.lstrip().startswith("{"):
        return False
    try:
        result: Any = json.loads(content)
    except ValueError:
        return False
    if not isinstance(result, dict):
        return False
    status = result.get("status")
    return (
        bool(result.get("error"))
        or result.get("is_error") is True
        or result.get("ok") is False
        or result.get("success") is False
        or (isinstance(status, str) and status.lower() in _FAILED_STATUS)
    )
