"""The trust directory: who an agent (or its owner) trusts, granted and revoked by operators."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pipeline.errors import ConfigurationError
from pipeline.graph import cypher
from pipeline.graph.model import TRUST_KINDS
from pipeline.graph.store import GraphStore
from schemas.keys import participant_key
from schemas.records import TrustEntry

TrustKind = Literal["friend", "team", "connected"]


class TrustEdge(BaseModel):
    """One grant: `truster` trusts `trustee` as a friend, a teammate or a connection."""

    model_config = ConfigDict(frozen=True)

    truster: str
    trustee: str
    as_: str
    granted_at: str | None = None


def grant_trust(
    graph: GraphStore, tenant: str, truster_id: str, trustee_id: str, as_: str = "connected"
) -> None:
    """Record that `truster_id` (an agent or a human owner) trusts `trustee_id`; idempotent."""
    if as_ not in TRUST_KINDS:
        raise ConfigurationError(f"as: {as_!r} is not one of {', '.join(TRUST_KINDS)}")
    with graph.session() as session:
        session.execute_write(
            lambda tx: tx.run(
                cypher.GRANT_TRUST,
                tenant=tenant,
                truster_key=participant_key(tenant, truster_id),
                truster_id=truster_id,
                trustee_key=participant_key(tenant, trustee_id),
                trustee_id=trustee_id,
                kind=as_,
            ).consume()
        )


def revoke_trust(graph: GraphStore, tenant: str, truster_id: str, trustee_id: str) -> bool:
    """Remove a grant; True if there was one."""
    with graph.session() as session:
        revoked = session.execute_write(
            lambda tx: tx.run(
                cypher.REVOKE_TRUST,
                truster_key=participant_key(tenant, truster_id),
                trustee_key=participant_key(tenant, trustee_id),
            ).single(strict=True)["revoked"]
        )
    return bool(revoked)


def own_agent(graph: GraphStore, tenant: str, agent_id: str, owner_id: str) -> str | None:
    """Make `owner_id` the owner of `agent_id`, replacing any owner it had; the previous owner's
    id (None if it had none).

    The operator's word: events only ever set an owner when none is recorded. Workers see the
    change within MEMSYNC_TRUST_CACHE_SECONDS.
    """
    with graph.session() as session:
        previous: list[str] = session.execute_write(
            lambda tx: tx.run(
                cypher.OWN_AGENT,
                tenant=tenant,
                agent_key=participant_key(tenant, agent_id),
                agent_id=agent_id,
                owner_key=participant_key(tenant, owner_id),
                owner_id=owner_id,
            ).single(strict=True)["previous"]
        )
    others = sorted(p for p in previous if p is not None and p != owner_id)
    return others[0] if others else (owner_id if owner_id in previous else None)


def owners_of(graph: GraphStore, tenant: str, agent_id: str) -> list[str]:
    """Every recorded owner of an agent, sorted: one, or none; several only on a graph written
    before ownership was set once (`own_agent` repairs it)."""
    with graph.session(write=False) as session:
        records = list(
            session.run(cypher.AGENT_OWNERS, agent_key=participant_key(tenant, agent_id))
        )
    return [r["owner"] for r in records]


def list_trust(graph: GraphStore, tenant: str, truster_id: str | None = None) -> list[TrustEdge]:
    key = participant_key(tenant, truster_id) if truster_id else None
    with graph.session(write=False) as session:
        records = list(session.run(cypher.LIST_TRUST, tenant=tenant, truster_key=key))
    return [
        TrustEdge(
            truster=r["truster"], trustee=r["trustee"], as_=r["as"], granted_at=r["granted_at"]
        )
        for r in records
    ]


def lookup_trust(graph: GraphStore, keys: Iterable[str]) -> dict[str, TrustEntry]:
    """Trust entries for these participant keys (absent keys trust no one)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    with graph.session(write=False) as session:
        records = list(session.run(cypher.LOOKUP_TRUST, keys=wanted))
    return {
        r["key"]: TrustEntry(key=r["key"], trusted=frozenset(r["trusted"]), owner=r["owner"])
        for r in records
    }
