"""`memsync` commands that read or change the graph: graph init, recall, facts, trust."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import TypeAdapter, ValidationError

from memsync.settings import Settings
from pipeline.graph import directory
from pipeline.graph.model import TRUST_KINDS
from pipeline.graph.reader import agent_commitments, agent_facts, recall
from pipeline.graph.schema import init_schema
from pipeline.graph.writer import verify_fact
from schemas.event import Identifier, Tenant
from workers import runtime
from workers.cli_errors import EXIT_FAILED, EXIT_USAGE
from workers.display import describe_memory

_TENANT: TypeAdapter[str] = TypeAdapter(Tenant)
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)


def checked_ids(args: argparse.Namespace, *fields: str) -> str | None:
    """Validate `tenant` and these id arguments as an event's would be, in place.

    Returns the first problem, naming the argument, so nothing odd is ever written to the graph.
    """
    for field in ("tenant", *fields):
        value = getattr(args, field, None)
        if value is None:
            continue
        adapter = _TENANT if field == "tenant" else _IDENTIFIER
        try:
            setattr(args, field, adapter.validate_python(value))
        except ValidationError as exc:
            return f"{field}: {exc.errors()[0]['msg']} (got {value!r})"
    return None


def _refuse(problem: str) -> int:
    print(f"memsync: {problem}", file=sys.stderr)
    return EXIT_USAGE


def add_graph_commands(sub: Any) -> None:
    """Register graph, recall, facts and trust on the top-level subparsers."""
    graph = sub.add_parser("graph", help="graph schema")
    graph_sub = graph.add_subparsers(dest="graph_command", required=True)
    graph_sub.add_parser("init", help="create constraints and indexes (idempotent)").set_defaults(
        handler=_graph_init
    )

    rec = sub.add_parser("recall", help="what an agent remembers")
    rec.add_argument("--agent", required=True, help="agent participant id")
    rec.add_argument("--tenant", default="default")
    rec.add_argument("--channel", default=None, help="only this channel id")
    rec.add_argument("--limit", type=int, default=50)
    rec.add_argument("--json", action="store_true")
    rec.set_defaults(handler=_recall)

    _add_facts(sub)
    _add_trust(sub)


def _add_trust(sub: Any) -> None:
    trust = sub.add_parser("trust", help="the trust directory (strict mode)")
    trust_sub = trust.add_subparsers(dest="trust_command", required=True)
    for name, text in (("grant", "TRUSTER trusts TRUSTEE"), ("revoke", "remove a grant")):
        cmd = trust_sub.add_parser(name, help=text)
        cmd.add_argument("truster", help="agent id, or a human owner's id")
        cmd.add_argument("trustee", help="participant id")
        cmd.add_argument("--tenant", default="default")
        if name == "grant":
            cmd.add_argument("--as", dest="as_", default="connected", choices=TRUST_KINDS)
        cmd.set_defaults(handler=_trust)
    trust_list = trust_sub.add_parser("list", help="grants, optionally of one truster")
    trust_list.add_argument("--truster", default=None)
    trust_list.add_argument("--tenant", default="default")
    trust_list.add_argument("--json", action="store_true")
    trust_list.set_defaults(handler=_trust)
    own = trust_sub.add_parser("own", help="record OWNER (a human) as the owner of AGENT")
    own.add_argument("agent", help="agent participant id")
    own.add_argument("owner", help="the human's participant id")
    own.add_argument("--tenant", default="default")
    own.set_defaults(handler=_trust)


def _add_facts(sub: Any) -> None:
    facts = sub.add_parser("facts", help="what agents know: facts and commitments")
    facts_sub = facts.add_subparsers(dest="facts_command", required=True)
    listing = facts_sub.add_parser("list", help="an agent's facts and commitments")
    listing.add_argument("--agent", required=True)
    listing.add_argument("--tenant", default="default")
    listing.add_argument("--all", action="store_true", help="include superseded facts")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_facts)
    verify = facts_sub.add_parser("verify", help="mark a fact verified (the only way to get it)")
    verify.add_argument("key")
    verify.set_defaults(handler=_facts)


def _graph_init(args: argparse.Namespace, settings: Settings) -> int:
    statements = init_schema(runtime.graph())
    print(f"graph schema ready ({len(statements)} constraints and indexes ensured)")
    return 0


def _recall(args: argparse.Namespace, settings: Settings) -> int:
    problem = checked_ids(args, "agent", "channel")
    if problem:
        return _refuse(problem)
    episodes = recall(runtime.graph(), args.tenant, args.agent, args.channel, args.limit)
    if args.json:
        print(json.dumps([e.model_dump(mode="json") for e in episodes], indent=2))
        return 0
    for e in episodes:
        when = e.created_at.strftime("%Y-%m-%d %H:%M")
        print(f"[{when}] #{e.channel_title or e.channel_id} {e.speaker_label}: {e.content}")
    if not episodes:
        print(f"{args.agent} remembers nothing yet")
    return 0


def _facts(args: argparse.Namespace, settings: Settings) -> int:
    if args.facts_command == "verify":
        if verify_fact(runtime.graph(), args.key):
            print(f"verified {args.key}")
            return 0
        print(f"memsync: no fact {args.key}", file=sys.stderr)
        return EXIT_FAILED
    problem = checked_ids(args, "agent")
    if problem:
        return _refuse(problem)
    graph = runtime.graph()
    facts = agent_facts(graph, args.tenant, args.agent, include_superseded=args.all)
    commitments = agent_commitments(graph, args.tenant, args.agent)
    if args.json:
        print(
            json.dumps(
                {
                    "facts": [f.model_dump(mode="json") for f in facts],
                    "commitments": [c.model_dump(mode="json") for c in commitments],
                },
                indent=2,
            )
        )
        return 0
    for line in describe_memory(facts, commitments):
        print(line)
    return 0


def _trust(args: argparse.Namespace, settings: Settings) -> int:
    problem = checked_ids(args, "truster", "trustee", "agent", "owner")
    if problem:
        return _refuse(problem)
    graph = runtime.graph()
    if args.trust_command == "grant":
        directory.grant_trust(graph, args.tenant, args.truster, args.trustee, args.as_)
        print(f"{args.truster} trusts {args.trustee} as {args.as_}")
        return 0
    if args.trust_command == "revoke":
        revoked = directory.revoke_trust(graph, args.tenant, args.truster, args.trustee)
        print(f"revoked: {args.truster} -> {args.trustee}" if revoked else "no such grant")
        return 0 if revoked else EXIT_FAILED
    if args.trust_command == "own":
        previous = directory.own_agent(graph, args.tenant, args.agent, args.owner)
        was = f" (was {previous})" if previous and previous != args.owner else ""
        print(f"{args.agent} is owned by {args.owner}{was}")
        return 0
    edges = directory.list_trust(graph, args.tenant, args.truster)
    if args.json:
        print(json.dumps([e.model_dump() for e in edges], indent=2))
    for e in [] if args.json else edges:
        print(f"{e.truster} -> {e.trustee} as {e.as_} (since {e.granted_at})")
    return 0
