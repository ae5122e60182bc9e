"""The memory pages: what an agent knows (facts with provenance and supersession, commitments,
summaries, channels) and a channel's timeline. Every value is escaped by workers.inspector.html."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from pipeline.graph.inspection import (
    AgentMemory,
    ChannelRecord,
    CommitmentRecord,
    FactRecord,
    TimelineEntry,
)
from workers.inspector.html import Html, badge, cell, href, join, row, table, tag, when
from workers.inspector.pages import BASE, ids, layout, meta, notice

SOURCES = {
    "verified": ("verified", "ok"),
    "self_stated": ("self-stated", "info"),
    "peer_stated": ("peer-stated, unverified", "warn"),
}


# -- agent ----------------------------------------------------------------------------------------


def _source(source: str) -> Html:
    text, kind = SOURCES.get(source, (source, "muted"))
    return badge(text, kind)


def _learnt_in(tenant: str, agent: str, channels: Iterable[str]) -> Html:
    links = (
        tag("a", c, href=href(f"{BASE}/channel", tenant=tenant, channel=c, agent=agent))
        for c in channels
    )
    return join(links, ", ")


def _fact_rows(tenant: str, agent: str, facts: Sequence[FactRecord], now: datetime) -> list[Html]:
    anchors = {f.key: f"fact-{i}" for i, f in enumerate(facts)}
    rows: list[Html] = []
    for fact in facts:
        status: list[Html] = []
        if fact.superseded_at is not None:
            status.append(badge("superseded", "bad"))
            replaced = tag("div", meta(f"at {when(fact.superseded_at)}"))
            if fact.superseded_by_key in anchors:
                target = f"#{anchors[fact.superseded_by_key]}"
                replaced = tag(
                    "div",
                    "by ",
                    tag("a", fact.superseded_by_text or "a newer fact", href=target),
                    " ",
                    meta(f"at {when(fact.superseded_at)}"),
                    class_="superseded-by",
                )
            status.append(replaced)
        elif fact.expired(now):
            status.append(badge("expired", "muted"))
        else:
            status.append(badge("current", "ok"))
        if fact.expired(now) and fact.superseded_at is not None:
            status.append(badge("expired", "muted"))
        old = fact.superseded_at is not None or fact.expired(now)
        rows.append(
            row(
                cell(fact.text, class_="text"),
                join(fact.about, ", "),
                cell(_source(fact.source)),
                fact.stated_by or "",
                cell(_learnt_in(tenant, agent, fact.learnt_in)),
                cell(ids(fact.evidence)),
                when(fact.stated_at),
                when(fact.last_confirmed),
                when(fact.expires_at),
                cell(status),
                id=anchors[fact.key],
                class_="fact old" if old else "fact",
            )
        )
    return rows


def _commitment_rows(tenant: str, agent: str, items: Sequence[CommitmentRecord]) -> list[Html]:
    kinds = {"open": "warn", "closed": "ok", "cancelled": "muted"}
    return [
        row(
            cell(
                c.text,
                *(tag("div", change.note(), class_="muted") for change in c.changed),
                class_="text",
            ),
            cell(badge(c.status, kinds.get(c.status, "muted"))),
            c.owed_by or "",
            c.owed_to or "",
            when(c.due),
            when(c.opened_at),
            when(c.closed_at),
            cell(_learnt_in(tenant, agent, c.learnt_in)),
            cell(ids(c.evidence)),
            class_="commitment" if c.status == "open" else "commitment old",
        )
        for c in items
    ]


def agent(tenant: str, memory: AgentMemory, now: datetime) -> Html:
    """What the agent knows: facts with provenance and supersession, commitments, summaries."""
    a = memory.agent
    name = a.label or a.id
    current = sum(1 for f in memory.facts if f.superseded_at is None and not f.expired(now))
    open_count = sum(1 for c in memory.commitments if c.status == "open")
    body: list[object] = [
        tag("h1", f"{name}"),
        tag(
            "p",
            meta(
                f"agent {a.id} of tenant {tenant} · {current} current of "
                f"{len(memory.facts)} facts · {open_count} open commitments"
            ),
        ),
        tag("h2", "Facts"),
    ]
    if memory.facts:
        body.append(
            table(
                [
                    "fact",
                    "about",
                    "source",
                    "stated by",
                    "learnt in",
                    "evidence",
                    "stated",
                    "last confirmed",
                    "expires",
                    "status",
                ],
                _fact_rows(tenant, a.id, memory.facts, now),
                id="facts",
            )
        )
    else:
        body.append(notice("No facts yet."))
    body.append(tag("h2", "Commitments"))
    if memory.commitments:
        body.append(
            table(
                [
                    "commitment",
                    "status",
                    "owed by",
                    "owed to",
                    "due",
                    "opened",
                    "closed",
                    "learnt in",
                    "evidence",
                ],
                _commitment_rows(tenant, a.id, memory.commitments),
                id="commitments",
            )
        )
    else:
        body.append(notice("No commitments."))
    body.append(tag("h2", "Summaries"))
    if memory.summaries:
        body.append(
            table(
                ["channel", "version", "covers until", "summary"],
                (
                    row(
                        cell(
                            tag(
                                "a",
                                s.channel_title or s.channel_id,
                                href=href(
                                    f"{BASE}/channel",
                                    tenant=tenant,
                                    channel=s.channel_id,
                                    agent=a.id,
                                ),
                            )
                        ),
                        s.version,
                        when(s.covers_until),
                        cell(s.text, class_="msg"),
                    )
                    for s in memory.summaries
                ),
                id="summaries",
            )
        )
    else:
        body.append(notice("No summaries yet."))
    body.append(tag("h2", "Channels"))
    body.append(
        table(
            ["channel", "kind", "title", "episodes observed", ""],
            (
                row(
                    cell(
                        tag(
                            "a",
                            c.id,
                            href=href(f"{BASE}/channel", tenant=tenant, channel=c.id, agent=a.id),
                        )
                    ),
                    c.kind or "",
                    c.title or "",
                    c.episodes if c.episodes is not None else "",
                    cell(
                        tag(
                            "a",
                            "whole channel",
                            href=href(f"{BASE}/channel", tenant=tenant, channel=c.id),
                        )
                    ),
                )
                for c in memory.channels
            ),
            id="channels",
        )
    )
    return layout(name, tenant, body)


# -- channel --------------------------------------------------------------------------------------


def channel(
    tenant: str, record: ChannelRecord, entries: Sequence[TimelineEntry], agent: str | None
) -> Html:
    """A channel's episodes in time order, all of them or what one agent observed."""
    title = record.title or record.id
    if agent is None:
        scope = tag("p", meta(f"the whole channel ({record.kind or 'channel'}), every episode"))
    else:
        scope = tag(
            "p",
            meta("what "),
            tag("a", agent, href=href(f"{BASE}/agent", tenant=tenant, agent=agent)),
            meta(" observed · "),
            tag(
                "a",
                "show the whole channel",
                href=href(f"{BASE}/channel", tenant=tenant, channel=record.id),
            ),
        )
    rows = [
        row(
            when(e.created_at),
            cell(e.speaker_label or e.speaker_id or "?", class_="speaker"),
            e.role,
            cell(e.content, class_="msg"),
            cell(tag("code", e.id)),
            join(e.observers, ", "),
            class_="episode",
        )
        for e in entries
    ]
    body: list[object] = [tag("h1", f"Channel {title}"), scope]
    if rows:
        body.append(
            table(
                ["time (UTC)", "speaker", "role", "message", "id", "observed by"],
                rows,
                id="timeline",
            )
        )
    else:
        body.append(notice("No episodes."))
    return layout(f"Channel {title}", tenant, body)
