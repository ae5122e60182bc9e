"""Tenant-qualified graph keys, built in one place so every writer and reader agrees."""

from __future__ import annotations

import hashlib
import re
from typing import Literal
from urllib.parse import quote

# Neo4j refuses to index a property value past about 8 KB ("Property value is too large to
# index"), and every key carries a uniqueness constraint. Longer keys keep a readable prefix and
# end in a digest of the whole key, so they stay unique and every key that fitted before is kept.
MAX_KEY_CHARS = 8000
_DIGEST_CHARS = 64
# What `quote` leaves as it is with the safe characters below: a part made only of these is
# its own escape, and checking that costs a fraction of quoting (keys are built for every
# participant of every turn).
_KEPT = "@-_.~/"
_UNESCAPED = re.compile(r"[A-Za-z0-9@_.~/-]*")


def compose_key(*parts: str) -> str:
    """Join parts with ':'; escaping ':' inside parts keeps keys unambiguous whatever the ids."""
    key = ":".join(
        part if _UNESCAPED.fullmatch(part) else quote(part, safe=_KEPT) for part in parts
    )
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()
    # '#' never appears in an escaped part, so a shortened key cannot equal a composed one.
    return f"{key[: MAX_KEY_CHARS - _DIGEST_CHARS - 1]}#{digest}"


def participant_key(tenant: str, participant_id: str) -> str:
    return compose_key(tenant, participant_id)


def channel_key(tenant: str, channel_id: str) -> str:
    return compose_key(tenant, "channel", channel_id)


def episode_key(tenant: str, channel_id: str, message_id: str) -> str:
    return compose_key(tenant, "episode", channel_id, message_id)


ScopeRole = Literal["agent", "channel", "speaker"]


def scope_token(role: ScopeRole, key: str) -> str:
    """An agent (who remembers), a channel or a speaker as one full-text search term.

    Search indexes carry these terms beside the text, so a keyword query can be held to what
    one agent observed, to one channel or to one speaker inside Lucene itself, instead of
    filtering every tenant's matches afterwards. A 20-digit number: the English analyser
    neither splits nor stems digits. 64 bits of SHA-256 over role and key; the graph filter
    after the search still checks the real edges, so a collision could only cost a result.
    """
    digest = hashlib.sha256(f"{role}\x00{key}".encode()).digest()
    return str(int.from_bytes(digest[:8], "big")).zfill(20)
