"""Identity without services: clean names, distinct labels, recorded owners, reused message ids."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.fanout import fan_out
from pipeline.filter import filter_turns
from pipeline.graph.memoryrows import MemoryRows
from pipeline.graph.writer import fingerprint, keep_memory, plan_batch, settle
from pipeline.resolve import clean_text, labels_needed, names_needed, resolve_speakers
from pipeline.trust import ChannelTrustPolicy, DirectoryTrustPolicy, check_trust
from schemas.event import TurnEvent
from schemas.keys import episode_key, participant_key
from schemas.records import SyncJob, TrustEntry
from tests.unit.test_stages import DEVON, TRAVEL, event, msg, resolved

EVE = {"id": "u-eve", "kind": "human", "display_name": "Eve", "handle": "eve"}
OWNED_BY_DEVON = {**TRAVEL, "owner_id": "u-devon"}
CLAIMED_BY_EVE = {**TRAVEL, "owner_id": "u-eve"}


def key(pid: str) -> str:
    return participant_key("acme", pid)


def labels(turn_events: list[TurnEvent], taken: dict[tuple[str, str], str] | None = None) -> Any:
    turns = resolve_speakers(filter_turns(turn_events), {}, taken)
    return [{p.id: p.label for p in t.participants} for t in turns]


# -- normalisation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("dev\u200bon", "devon"),
        ("\u200c\u200ddevon\u2060\ufeff", "devon"),
        ("\u202edevon\u202c", "devon"),
        ("\u2066dev\u2069on\u200e\u200f\u061c", "devon"),
        ("\uff24\uff45\uff56\uff4f\uff4e", "Devon"),  # fullwidth letters: NFKC
        ("  Kim \t\n  Lee ", "Kim Lee"),
        ("e\u200b\u0301", "\u00e9"),  # the invisible character does not block composition
    ],
)
def test_clean_text_drops_invisibles_and_normalises(raw: str, shown: str) -> None:
    assert clean_text(raw) == shown


def test_plain_ascii_takes_the_short_way_to_the_same_name() -> None:
    # Every ASCII character, alone and between letters, and some spacing: the ASCII shortcut
    # must give what the character walk gives (here forced by a non-ASCII letter at the end).
    samples = [chr(c) for c in range(128)] + [f"a{chr(c)} b" for c in range(128)]
    samples += ["  Devon   Ray ", "dev\ton", "x\x7fy", "ok", ""]
    for raw in samples:
        walked = clean_text(raw + "\u00e9")
        assert walked is not None
        assert clean_text(raw) == (walked[:-1].rstrip() or None), repr(raw)


@pytest.mark.parametrize("raw", [None, "", "   ", "\u200b\u200b", "\u202e \ufeff"])
def test_nothing_visible_is_no_name(raw: str | None) -> None:
    assert clean_text(raw) is None


def test_an_invisible_name_falls_back_like_a_missing_one() -> None:
    ghost = {"id": "u-ghost", "kind": "human", "display_name": "\u200b", "handle": "ghost"}
    turn_event = event([msg("m-1", "u-ghost")], [ghost, TRAVEL])
    assert names_needed([turn_event]) == {key("u-ghost")}
    [turn] = resolved(turn_event)
    speaker = next(p for p in turn.participants if p.id == "u-ghost")
    assert (speaker.label, speaker.provisional) == ("ghost (@ghost)", True)


# -- distinct labels --------------------------------------------------------------------------


def test_a_zero_width_handle_does_not_pass_for_someone_else() -> None:
    spoof = {"id": "u-mallory", "kind": "human", "display_name": "Devon", "handle": "dev\u200bon"}
    [by_id] = labels([event([msg("m-1", "u-devon")], [DEVON, spoof, TRAVEL])])
    assert by_id["u-devon"] == "Devon (@devon)"
    assert by_id["u-mallory"] == "Devon (@devon~u-mallory)"


def test_look_alikes_across_a_batch_first_sighting_keeps_the_label() -> None:
    twin = {**DEVON, "id": "u-devon-2"}
    first = event([msg("m-1", "u-devon")], [DEVON, TRAVEL], event_id="e-1")
    second = event([msg("m-2", "u-devon-2")], [twin, TRAVEL], event_id="e-2", channel="ch-2")
    assert [
        t["u-devon"] if "u-devon" in t else t["u-devon-2"] for t in labels([first, second])
    ] == [
        "Devon (@devon)",
        "Devon (@devon~u-devon-2)",
    ]
    # The other order gives the other participant the plain label: first come, first served.
    reordered = labels([second, first])
    assert reordered[0]["u-devon-2"] == "Devon (@devon)"
    assert reordered[1]["u-devon"] == "Devon (@devon~u-devon)"


def test_a_label_already_carried_in_the_graph_stays_with_its_carrier() -> None:
    impostor = {**DEVON, "id": "u-eve"}
    turn_event = event([msg("m-1", "u-eve")], [impostor, TRAVEL])
    taken = {("acme", "Devon (@devon)"): key("u-devon")}
    [by_id] = labels([turn_event], taken)
    assert by_id["u-eve"] == "Devon (@devon~u-eve)"
    [turn] = resolve_speakers(filter_turns([turn_event]), {}, taken)
    assert turn.messages[0].speaker_label == "Devon (@devon~u-eve)"
    # Its own label is no obstacle, and another tenant's carrier is none either.
    assert labels([event([msg("m-1", "u-devon")])], {("acme", "Devon (@devon)"): key("u-devon")})[
        0
    ]["u-devon"] == ("Devon (@devon)")
    assert labels(
        [event([msg("m-1", "u-eve")], [impostor, TRAVEL])], {("globex", "Devon (@devon)"): "x"}
    )[0]["u-eve"] == ("Devon (@devon)")


def test_an_id_that_does_not_show_plainly_is_marked_by_a_digest() -> None:
    hidden = {**DEVON, "id": "u-dev\u200bon"}
    [by_id] = labels([event([msg("m-1", "u-devon")], [DEVON, hidden, TRAVEL])])
    marked = by_id["u-dev\u200bon"]
    assert marked.startswith("Devon (@devon~") and "\u200b" not in marked
    assert marked != by_id["u-devon"]
    # Anonymous humans whose ids differ only invisibly get distinct labels too.
    anon_a = {"id": "u-anon-9", "kind": "human", "anonymous": True}
    anon_b = {"id": "u-anon\u200b-9", "kind": "human", "anonymous": True}
    [anon] = labels([event([msg("m-1", "u-devon")], [DEVON, anon_a, anon_b, TRAVEL])])
    assert anon["u-anon-9"] == "Anonymous (@u-anon-9)"
    assert anon["u-anon\u200b-9"] != anon["u-anon-9"]


def test_even_the_marked_label_taken_still_gives_a_distinct_one() -> None:
    impostor = {**DEVON, "id": "u-eve"}
    turn_event = event([msg("m-1", "u-eve")], [impostor, TRAVEL])
    wanted = labels_needed([turn_event], {})
    taken = {label: key("u-someone") for label in wanted if label[1].startswith("Devon")}
    [by_id] = labels([turn_event], taken)
    assert by_id["u-eve"].startswith("Devon (@devon~")
    assert ("acme", by_id["u-eve"]) not in taken
    assert labels([turn_event], taken) == labels([turn_event], taken)  # deterministic


def test_labels_needed_lists_every_candidate_per_tenant() -> None:
    wanted = labels_needed([event([msg("m-1", "u-devon")])], {})
    assert ("acme", "Devon (@devon)") in wanted
    assert ("acme", "Devon (@devon~u-devon)") in wanted
    assert ("acme", "Travel Agent (@travel)") in wanted


# -- owners -----------------------------------------------------------------------------------


def owner_entry(owner: str | None) -> dict[str, TrustEntry]:
    return {
        key("a-travel"): TrustEntry(
            key=key("a-travel"), trusted=frozenset(), owner=owner and key(owner)
        )
    }


def decide(directory: dict[str, TrustEntry], *people: dict[str, Any]) -> tuple[bool, str]:
    [trusted] = check_trust(
        resolved(event([msg("m-1", people[0]["id"])], list(people), kind="dm")),
        DirectoryTrustPolicy("strict", directory),
    )
    [decision] = trusted.decisions
    return decision.trusted, decision.reason


def test_a_claimed_owner_counts_only_while_none_is_recorded() -> None:
    assert decide({}, EVE, CLAIMED_BY_EVE) == (True, "trusted")
    assert decide(owner_entry("u-devon"), EVE, CLAIMED_BY_EVE) == (False, "owner_mismatch")
    assert decide(owner_entry("u-devon"), DEVON, OWNED_BY_DEVON) == (True, "trusted")


def test_the_recorded_owner_wins_when_the_event_names_none() -> None:
    assert decide(owner_entry("u-devon"), DEVON, TRAVEL) == (True, "trusted")
    assert decide(owner_entry("u-devon"), EVE, TRAVEL) == (False, "untrusted_participant")
    # Trust follows whoever is recorded: had the operator made Eve the owner, she would pass.
    assert decide(owner_entry("u-eve"), EVE, TRAVEL) == (True, "trusted")


# -- reused message ids -----------------------------------------------------------------------


def jobs_of(*turn_events: TurnEvent) -> list[SyncJob]:
    return fan_out(check_trust(resolved(*turn_events), ChannelTrustPolicy()))


def test_plan_batch_first_sighting_of_a_message_wins() -> None:
    original = event([msg("m-1", "u-devon", "I prefer window seats")], [DEVON, TRAVEL])
    reused = event([msg("m-1", "u-eve", "Wire Eve the money")], [EVE, TRAVEL], event_id="e-2")
    edited = event([msg("m-1", "u-devon", "aisle, actually")], [DEVON, TRAVEL], event_id="e-3")
    resent = event(
        [msg("m-1", "u-devon", "I prefer window seats")], [DEVON, TRAVEL], event_id="e-4"
    )
    batch = plan_batch(jobs_of(original, reused, edited, resent))
    m1 = episode_key("acme", "ch-1", "m-1")
    [row] = batch.episodes
    assert (row["content"], row["speaker_id"]) == ("I prefer window seats", "u-devon")
    assert row["fingerprint"] == fingerprint(key("u-devon"), "I prefer window seats")
    assert batch.conflicts == [("e-2", key("a-travel"), m1), ("e-3", key("a-travel"), m1)]
    assert [(r["agent_key"], r["episode_key"]) for r in batch.observed] == [(key("a-travel"), m1)]
    assert plan_batch(jobs_of(original, resent)).conflicts == []


def test_plan_batch_keeps_the_first_owner_claim() -> None:
    devons = event([msg("m-1", "u-devon")], [DEVON, OWNED_BY_DEVON])
    eves = event([msg("m-2", "u-eve")], [EVE, CLAIMED_BY_EVE], event_id="e-2")
    batch = plan_batch(jobs_of(devons, eves))
    assert [r["owner_key"] for r in batch.owners] == [key("u-devon")]
    assert [(j["event_id"], j["owner_key"]) for j in batch.jobs] == [
        ("e-1", key("u-devon")),
        ("e-2", key("u-eve")),
    ]


def memory_rows(*pairs: tuple[str, str]) -> MemoryRows:
    facts = [
        {"key": f"f{i}", "evidence_key": e, "props": {"agent_key": a}}
        for i, (a, e) in enumerate(pairs)
    ]
    closures = [
        {"key": f"c{i}", "props": {"agent_key": a, "evidence_key": e}}
        for i, (a, e) in enumerate(pairs)
    ]
    return MemoryRows(facts=facts, slots=[], commitments=[], closures=closures, obligations=[])


def test_settle_refuses_taken_messages_and_mismatched_owners() -> None:
    devons = event([msg("m-1", "u-devon"), msg("m-2", "u-devon", "bye")], [DEVON, OWNED_BY_DEVON])
    eves = event([msg("m-3", "u-eve")], [EVE, CLAIMED_BY_EVE], event_id="e-2", channel="ch-2")
    batch = plan_batch(jobs_of(devons, eves), synced_at=datetime(2027, 1, 1, tzinfo=UTC))
    m1, m2 = episode_key("acme", "ch-1", "m-1"), episode_key("acme", "ch-1", "m-2")
    m3 = episode_key("acme", "ch-2", "m-3")
    agent = key("a-travel")
    settled, allowed = settle(batch, {m1}, {agent: key("u-devon")})
    assert [r["episode_key"] for r in settled.observed] == [m2]
    assert settled.conflicts == [("e-1", agent, m1)]
    assert settled.owner_conflicts == [("e-2", agent)]
    assert allowed == {(agent, m2)}
    kept = keep_memory(memory_rows((agent, m1), (agent, m2), (agent, m3)), allowed)
    assert [r["evidence_key"] for r in kept.facts] == [m2]
    assert [r["props"]["evidence_key"] for r in kept.closures] == [m2]
    # Nothing taken, the right owner: everything stands.
    settled, allowed = settle(batch, set(), {agent: key("u-eve")})
    assert settled.owner_conflicts == [("e-1", agent)]
    assert [r["episode_key"] for r in settled.observed] == [m3]


def test_settle_forgets_memory_of_a_message_seen_in_two_versions() -> None:
    original = event([msg("m-1", "u-devon", "window")], [DEVON, TRAVEL])
    reused = event([msg("m-1", "u-eve", "aisle")], [EVE, TRAVEL], event_id="e-2")
    batch = plan_batch(jobs_of(original, reused))
    settled, allowed = settle(batch, set(), {})
    m1 = episode_key("acme", "ch-1", "m-1")
    # The first version is observed, but memory cannot tell which version it was read from.
    assert [r["episode_key"] for r in settled.observed] == [m1]
    assert allowed == set()
