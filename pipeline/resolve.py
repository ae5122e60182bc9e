"""Stage 2: give every speaker the identity label `Display Name (@handle)`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemas.event import Participant, TurnEvent
from schemas.keys import channel_key, episode_key, participant_key
from schemas.records import (
    AttributedMessage,
    ChannelRef,
    FilteredTurn,
    KnownParticipant,
    ResolvedTurn,
    Speaker,
)

ANONYMOUS_NAME = "Anonymous"


def names_needed(events: Sequence[TurnEvent]) -> set[str]:
    """Keys of participants sent without a full name, to look up among those already known."""
    named = _named_in_batch(events)
    return {
        participant_key(event.tenant, p.id)
        for event in events
        for p in event.participants
        if not p.anonymous
        and (p.display_name is None or p.handle is None)
        and participant_key(event.tenant, p.id) not in named
    }


def resolve_speakers(
    turns: Sequence[FilteredTurn], known: Mapping[str, KnownParticipant]
) -> list[ResolvedTurn]:
    """Label every participant and attribute every kept message to its speaker.

    Names come from the event, then from participants named earlier in the same batch, then from
    `known` (keyed by participant key). Identity is the participant key, never the name, so two
    people called "Sam" stay two speakers.
    """
    directory = dict(known)
    directory.update(_named_in_batch([turn.event for turn in turns]))
    resolved: list[ResolvedTurn] = []
    for turn in turns:
        event = turn.event
        speakers = {p.id: speaker_for(event.tenant, p, directory) for p in event.participants}
        messages = [
            AttributedMessage(
                key=episode_key(event.tenant, event.channel.id, m.id),
                id=m.id,
                role=m.role,
                speaker_key=speakers[m.sender_id].key,
                speaker_label=speakers[m.sender_id].label,
                content=m.content,
                created_at=m.created_at,
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
    """The labelled speaker for one participant."""
    key = participant_key(tenant, participant.id)
    provisional = False
    if participant.anonymous:
        display_name, handle = ANONYMOUS_NAME, participant.id
    else:
        known = directory.get(key)
        provisional = known is None and (
            participant.display_name is None or participant.handle is None
        )
        display_name = (
            participant.display_name
            or (known.display_name if known else None)
            or participant.handle
            or (known.handle if known else None)
            or participant.id
        )
        handle = participant.handle or (known.handle if known else None) or participant.id
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


def identity_label(display_name: str, handle: str) -> str:
    return f"{display_name} (@{handle})"


def _named_in_batch(events: Sequence[TurnEvent]) -> dict[str, KnownParticipant]:
    named: dict[str, KnownParticipant] = {}
    for event in events:
        for p in event.participants:
            if p.display_name is not None and p.handle is not None and not p.anonymous:
                named[participant_key(event.tenant, p.id)] = KnownParticipant(
                    id=p.id, display_name=p.display_name, handle=p.handle
                )
    return named
