"""Tenant-qualified graph keys, built in one place so every writer and reader agrees."""

from __future__ import annotations

from urllib.parse import quote


def compose_key(*parts: str) -> str:
    """Join parts with ':'; escaping ':' inside parts keeps keys unambiguous whatever the ids."""
    return ":".join(quote(part, safe="@-_.~/") for part in parts)


def participant_key(tenant: str, participant_id: str) -> str:
    return compose_key(tenant, participant_id)


def channel_key(tenant: str, channel_id: str) -> str:
    return compose_key(tenant, "channel", channel_id)


def episode_key(tenant: str, channel_id: str, message_id: str) -> str:
    return compose_key(tenant, "episode", channel_id, message_id)
