"""Strict trust against the directory: owner, the agent's grants, the owner's grants."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.trust import DirectoryTrustPolicy, TrustMode, check_trust, trusters
from schemas.keys import participant_key
from schemas.records import TrustEntry
from tests.unit.test_stages import DEVON, event, msg, resolved

SARAH: dict[str, Any] = {
    "id": "u-sarah",
    "kind": "human",
    "display_name": "Sarah",
    "handle": "sarah",
}
PRIYA: dict[str, Any] = {
    "id": "u-priya",
    "kind": "human",
    "display_name": "Priya",
    "handle": "priya",
}
OWNED: dict[str, Any] = {
    "id": "a-travel",
    "kind": "agent",
    "display_name": "Travel Agent",
    "handle": "travel",
    "owner_id": "u-devon",
}
ORPHAN: dict[str, Any] = {"id": "a-chef", "kind": "agent", "display_name": "Chef", "handle": "chef"}


def key(pid: str) -> str:
    return participant_key("acme", pid)


def entry(pid: str, *trusted: str, owner: str | None = None) -> TrustEntry:
    return TrustEntry(
        key=key(pid), trusted=frozenset(key(t) for t in trusted), owner=owner and key(owner)
    )


def decide(
    directory: dict[str, TrustEntry], *people: Mapping[str, Any], mode: TrustMode = "strict"
) -> dict[str, tuple[bool, str]]:
    turn = resolved(event([msg("m1", "u-devon")], [dict(p) for p in people]))
    [trusted] = check_trust(turn, DirectoryTrustPolicy(mode, directory))
    return {d.agent_key: (d.trusted, d.reason) for d in trusted.decisions}


def test_owner_alone_is_trusted_and_a_stranger_is_not() -> None:
    assert decide({}, DEVON, OWNED) == {key("a-travel"): (True, "trusted")}
    assert decide({}, DEVON, SARAH, OWNED) == {key("a-travel"): (False, "untrusted_participant")}


def test_grants_by_the_agent_or_by_its_owner_count() -> None:
    by_agent = {key("a-travel"): entry("a-travel", "u-sarah")}
    assert decide(by_agent, DEVON, SARAH, OWNED)[key("a-travel")] == (True, "trusted")
    by_owner = {key("u-devon"): entry("u-devon", "u-sarah")}
    assert decide(by_owner, DEVON, SARAH, OWNED)[key("a-travel")] == (True, "trusted")
    # Every human must pass: Priya is trusted by nobody.
    assert decide(by_owner, DEVON, SARAH, PRIYA, OWNED)[key("a-travel")][0] is False


def test_owner_known_only_from_the_directory() -> None:
    directory = {
        key("a-chef"): entry("a-chef", owner="u-devon"),
        key("u-devon"): entry("u-devon", "u-sarah"),
    }
    assert decide(directory, DEVON, SARAH, ORPHAN)[key("a-chef")] == (True, "trusted")
    assert decide({}, DEVON, ORPHAN)[key("a-chef")] == (False, "untrusted_participant")


def test_revoking_a_grant_untrusts_the_turn() -> None:
    granted = {key("a-travel"): entry("a-travel", "u-sarah")}
    revoked = {key("a-travel"): entry("a-travel")}
    assert decide(granted, DEVON, SARAH, OWNED)[key("a-travel")][0] is True
    assert decide(revoked, DEVON, SARAH, OWNED)[key("a-travel")][0] is False


def test_open_mode_ignores_the_directory_but_not_the_channel_rules() -> None:
    assert decide({}, DEVON, SARAH, OWNED, mode="open")[key("a-travel")] == (True, "trusted")
    anon: dict[str, Any] = {"id": "u-anon", "kind": "human", "anonymous": True}
    assert decide({}, DEVON, anon, OWNED, mode="open")[key("a-travel")] == (
        False,
        "anonymous_participant",
    )


def test_trusters_are_agents_and_their_owners() -> None:
    turn = event([msg("m1", "u-devon")], [DEVON, SARAH, OWNED, ORPHAN])
    assert trusters([turn]) == {key("a-travel"), key("u-devon"), key("a-chef")}
