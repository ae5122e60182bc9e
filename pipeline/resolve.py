"""Stage 2: give every speaker the identity label `Display Name (@handle)`, distinct per tenant."""

from __future__ import annotations

import hashlib
import itertools
import unicodedata
from collections.abc import Mapping, Sequence

from pipeline.english.actions import failed_result
from schemas.event import Participant, TurnEvent
from schemas.keys import channel_key, episode_key, participant_key
from schemas.records import (
    AttributedMessage,
    ChannelRef,
    FilteredTurn,
    KnownParticipant,
    LabelKey,
    ResolvedTurn,
    Speaker,
)

ANONYMOUS_NAME = "Anonymous"
# Hex digits of a participant key's hash that mark a look-alike whose id does not show plainly.
DIGEST_CHARS = 10


def clean_text(value: str | None) -> str | None:
    """A name, handle or id as it is shown: NFKC, no format characters, single spaces.

    Format characters (Unicode category Cf: zero-width spaces and joiners, word joiner, BOM, bidi
    marks, embeddings, overrides and isolates) are invisible and would let two participants look
    identical. None when nothing visible is left, so the usual fallbacks apply.
    """
    if value is None:
        return None
    if value.isascii() and value.isprintable():
        # Most names: ASCII has no format characters, its control characters are not printable,
        # and NFKC leaves it as it is, so only the spaces are left to fold. (The character walk
        # below took about a tenth of a sync worker's CPU, on the same few names every batch.)
        return " ".join(value.split()) or None
    # Dropped before NFKC too, so an invisible character cannot keep a sequence from composing.
    text = unicodedata.normalize("NFKC", _visible(value))
    return " ".join(_visible(text).split()) or None


def _visible(text: str) -> str:
    return "".join(
        " " if unicodedata.category(ch) == "Cc" else ch
        for ch in text
        if unicodedata.category(ch) != "Cf"
    )


def names_needed(events: Sequence[TurnEvent]) -> set[str]:
    """Keys of participants sent without a full name, to look up among those already known."""
    named = _named_in_batch(events)
    return {
        participant_key(event.tenant, p.id)
        for event in events
        for p in event.participants
        if not p.anonymous
        and (clean_text(p.display_name) is None or clean_text(p.handle) is None)
        and participant_key(event.tenant, p.id) not in named
    }


def labels_needed(
    events: Sequence[TurnEvent], known: Mapping[str, KnownParticipant]
) -> set[LabelKey]:
    """Every (tenant, label) these events' participants may carry, to ask who already has it."""
    directory = _directory(events, known)
    needed: set[LabelKey] = set()
    done: set[tuple[object, ...]] = set()
    for event in events:
        for p in event.participants:
            if (seen := _seen(event.tenant, p)) in done:
                continue
            done.add(seen)
            speaker = speaker_for(event.tenant, p, directory)
            needed.update((event.tenant, label) for label in label_candidates(speaker))
    return needed


def resolve_speakers(
    turns: Sequence[FilteredTurn],
    known: Mapping[str, KnownParticipant],
    taken: Mapping[LabelKey, str] | None = None,
) -> list[ResolvedTurn]:
    """Label every participant and attribute every kept message to its speaker.

    Names come from the event, then from participants named earlier in the same batch, then from
    `known` (keyed by participant key). Identity is the participant key, never the name, so two
    people called "Sam" stay two speakers; two who would share a label get distinct ones: a label
    already carried in the graph (`taken`: who carries it) or earlier in the batch stays with its
    carrier, and the newcomer's handle is marked with its id (see `label_candidates`).
    """
    directory = _directory([turn.event for turn in turns], known)
    claimed: dict[LabelKey, str] = dict(taken or {})
    # A batch names the same few people turn after turn: each is labelled once. A claim is
    # settled once made (none is released within a batch), so one seen again keeps its label.
    labelled: dict[tuple[object, ...], Speaker] = {}
    resolved: list[ResolvedTurn] = []
    for turn in turns:
        event = turn.event
        speakers: dict[str, Speaker] = {}
        for p in event.participants:
            seen = _seen(event.tenant, p)
            speaker = labelled.get(seen)
            if speaker is None:
                speaker = speaker_for(event.tenant, p, directory)
                speaker = labelled[seen] = _claim(event.tenant, speaker, claimed)
            speakers[p.id] = speaker
        calls = calls_by_message(turn)
        messages = [
            AttributedMessage(
                key=episode_key(event.tenant, event.channel.id, m.id),
                id=m.id,
                role=m.role,
                speaker_key=speakers[m.sender_id].key,
                speaker_label=speakers[m.sender_id].label,
                content=m.content,
                created_at=m.created_at,
                acted=bool(m.tool_calls),
                calls=calls.get(m.id, []),
            )
            for m in turn.kept
        ]
        assert event.occurred_at is not None  # set by TurnEvent validation
        resolved.append(
            ResolvedTurn(
                event_id=event.event_id,
                tenant=event.tenant,
                channel=ChannelRef.of(channel_key(event.tenant, event.channel.id), event.channel),
                participants=list(speakers.values()),
                messages=messages,
                dropped=turn.dropped,
                occurred_at=event.occurred_at,
            )
        )
    return resolved


def speaker_for(
    tenant: str, participant: Participant, directory: Mapping[str, KnownParticipant]
) -> Speaker:
    """The labelled speaker for one participant, before labels are made distinct."""
    key = participant_key(tenant, participant.id)
    shown_id = clean_text(participant.id) or _digest(key)
    provisional = False
    if participant.anonymous:
        display_name, handle = ANONYMOUS_NAME, shown_id
    else:
        known = directory.get(key)
        name = clean_text(participant.display_name)
        own_handle = clean_text(participant.handle)
        known_name = clean_text(known.display_name) if known else None
        known_handle = clean_text(known.handle) if known else None
        provisional = known is None and (name is None or own_handle is None)
        display_name = name or known_name or own_handle or known_handle or shown_id
        handle = own_handle or known_handle or shown_id
    return Speaker(
        key=key,
        id=participant.id,
        kind=participant.kind,
        display_name=display_name,
        handle=handle,
        label=identity_label(display_name, handle),
        anonymous=participant.anonymous,
        owner_id=participant.owner_id,
        lens=participant.lens,
        provisional=provisional,
    )


def _seen(tenant: str, participant: Participant) -> tuple[object, ...]:
    """A participant as sent, all fields, as a cheap key (hashing the model itself cost more
    than the work it saved)."""
    return (tenant, *participant.__dict__.values())


def identity_label(display_name: str, handle: str) -> str:
    return f"{display_name} (@{handle})"


def label_candidates(speaker: Speaker) -> list[str]:
    """The labels a speaker may carry, best first: its own, then its handle marked with its id
    (`Devon (@devon~u-devon-2)`), then with a digest of its key when the id does not show as it
    is (invisible or odd characters would make the mark itself a look-alike)."""
    marks = [speaker.id] if clean_text(speaker.id) == speaker.id else []
    marks.append(_digest(speaker.key))
    return [
        identity_label(speaker.display_name, speaker.handle),
        *(identity_label(speaker.display_name, f"{speaker.handle}~{mark}") for mark in marks),
    ]


def _claim(tenant: str, speaker: Speaker, claimed: dict[LabelKey, str]) -> Speaker:
    """The speaker with the first candidate label nobody else carries, now claimed for it."""
    digest = _digest(speaker.key)
    numbered = (
        identity_label(speaker.display_name, f"{speaker.handle}~{digest}-{n}")
        for n in itertools.count(2)
    )
    for label in itertools.chain(label_candidates(speaker), numbered):
        if claimed.setdefault((tenant, label), speaker.key) == speaker.key:
            return speaker.model_copy(update={"label": label})
    raise AssertionError("unreachable: the numbered labels never run out")


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:DIGEST_CHARS]


def _directory(
    events: Sequence[TurnEvent], known: Mapping[str, KnownParticipant]
) -> dict[str, KnownParticipant]:
    directory = dict(known)
    directory.update(_named_in_batch(events))
    return directory


def _named_in_batch(events: Sequence[TurnEvent]) -> dict[str, KnownParticipant]:
    """Participants named in full in these events, by key; a later naming wins. Read from the
    end, so each person's latest naming is the first found and the rest are passed over (a
    batch names the same few people turn after turn)."""
    named: dict[str, KnownParticipant] = {}
    done: set[tuple[object, ...]] = set()
    for event in reversed(events):
        for p in reversed(event.participants):
            if (seen := _seen(event.tenant, p)) in done:
                continue
            done.add(seen)
            name, handle = clean_text(p.display_name), clean_text(p.handle)
            if name is None or handle is None or p.anonymous:
                continue
            key = participant_key(event.tenant, p.id)
            if key not in named:
                named[key] = KnownParticipant(id=p.id, display_name=name, handle=handle)
    return named


def calls_by_message(turn: FilteredTurn) -> dict[str, list[str]]:
    """The tools each kept message's sender called with it or since their last kept message in
    the turn, by message id; not a call whose result says it failed. A call with no text is
    dropped at stage 1; what it did (cancel the booking the agent offered to cancel) is carried
    by the words its sender says next."""
    kept = {m.id for m in turn.kept}
    pending: dict[str, list[tuple[str | None, str]]] = {}
    failed: set[str] = set()
    found: dict[str, list[str]] = {}
    for m in turn.event.messages:
        if m.role == "tool":
            if m.tool_call_id is not None and failed_result(m.content):
                failed.add(m.tool_call_id)
            continue
        if m.role == "system" or m.injected_context:
            continue
        calls = pending.setdefault(m.sender_id, [])
        calls.extend((c.id, c.name) for c in m.tool_calls)
        if m.id in kept:
            names = [name for call_id, name in calls if call_id is None or call_id not in failed]
            if names:
                found[m.id] = list(dict.fromkeys(names))
            pending[m.sender_id] = []
    return found
