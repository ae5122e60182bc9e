"""`memsync` commands that read or change the graph: graph init, recall, context, facts, trust."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from pydantic import ValidationError

from memsync.settings import Settings
from pipeline.embedder import make_embedder
from pipeline.graph import directory
from pipeline.graph.embeddings import reembed, require_vector_indexes
from pipeline.graph.model import TRUST_KINDS
from pipeline.graph.reader import agent_commitments, agent_facts
from pipeline.graph.schema import init_schema
from pipeline.graph.search import recall as search_memory
from pipeline.graph.writer import verify_fact
from schemas.recall import RecallItem, RecallQuery, reply_note
from workers.cli.arguments import checked_ids
from workers.cli.display import describe_memory
from workers.cli.errors import EXIT_FAILED, EXIT_USAGE
from workers.cli.privacy import add_sweep_command
from workers.worker import runtime

# Fields (or titled arguments) whose command-line option has another name.
_FLAGS: Final = {"exclude_ids": "exclude", "recent_ids": "recent"}


def _refuse(problem: str) -> int:
    print(f"memsync: {problem}", file=sys.stderr)
    return EXIT_USAGE


def _refuse_invalid(exc: ValidationError) -> int:
    """The first problem, named as its option is: a titled argument (`recent_ids`) by its
    title, a model's field by its name."""
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else "query"
    if exc.title in _FLAGS:
        field = exc.title
    return _refuse(f"{_FLAGS.get(field, field)}: {error['msg']}")


def add_graph_commands(sub: Any) -> None:
    """Register graph, recall, facts and trust on the top-level subparsers."""
    graph = sub.add_parser("graph", help="graph schema")
    graph_sub = graph.add_subparsers(dest="graph_command", required=True)
    graph_sub.add_parser("init", help="create constraints and indexes (idempotent)").set_defaults(
        handler=_graph_init
    )
    graph_sub.add_parser(
        "reembed",
        help="move to the configured embedder: rebuild vector indexes, queue old vectors again",
    ).set_defaults(handler=_graph_reembed)
    add_sweep_command(graph_sub)

    rec = sub.add_parser("recall", help="what an agent remembers (search with --query)")
    rec.add_argument("--agent", required=True, help="agent participant id")
    rec.add_argument("--tenant", default="default")
    rec.add_argument("--channel", default=None, help="recall for this channel id (its scope)")
    rec.add_argument("--about", default=None, help="only memory about this participant id")
    rec.add_argument("--query", default=None, help="words or a question; without it, recent")
    rec.add_argument(
        "--limit", type=int, default=None, help="budget in messages (default 10; 50 without query)"
    )
    rec.add_argument("--mode", choices=("hybrid", "keyword", "vector"), default="hybrid")
    rec.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="MESSAGE_ID",
        help="a platform message id never to show (repeat it)",
    )
    rec.add_argument("--json", action="store_true")
    rec.set_defaults(handler=_recall)

    ctx = sub.add_parser("context", help="what an agent is told before answering in a channel")
    ctx.add_argument("--agent", required=True, help="agent participant id")
    ctx.add_argument("--channel", required=True, help="channel id")
    ctx.add_argument("--tenant", default="default")
    ctx.add_argument("--query", default=None, help="also recall memories relevant to this")
    ctx.add_argument(
        "--budget", type=int, default=None, help="token budget (default 2000); lowest priority cut"
    )
    ctx.add_argument(
        "--recent",
        action="append",
        default=[],
        metavar="MESSAGE_ID",
        help="a message of the recent window the context goes before: never repeated (repeat it)",
    )
    ctx.add_argument("--json", action="store_true", help="the Context model, as JSON")
    ctx.set_defaults(handler=_context)

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
    embedder = make_embedder(settings)
    dimensions = embedder.dimensions if embedder is not None else None
    statements = init_schema(runtime.graph(), vector_dimensions=dimensions)
    print(f"graph schema ready ({len(statements)} schema statements: constraints, indexes)")
    if embedder is not None:
        # An index left from another model is not replaced by IF NOT EXISTS: say so now.
        require_vector_indexes(runtime.graph(), embedder.dimensions)
        print(f"vector indexes: {embedder.dimensions} dimensions ({embedder.model})")
    return 0


def _graph_reembed(args: argparse.Namespace, settings: Settings) -> int:
    # The model an embed worker stores vectors as (int8 under MEMSYNC_EMBED_QUANTIZED).
    embedder = make_embedder(settings, use="batches")
    if embedder is None:
        return _refuse("MEMSYNC_EMBEDDER=none: there is no model to re-embed with")
    done = reembed(runtime.graph(), embedder)
    for name in done.dropped:
        print(f"dropped {name} (other dimensions); made again at {embedder.dimensions}")
    queued = ", ".join(f"{label} {count}" for label, count in done.requeued.items())
    print(f"queued for {embedder.model}: {queued}; embed workers (--queues embed) catch up")
    return 0


def _recall(args: argparse.Namespace, settings: Settings) -> int:
    problem = checked_ids(args, "agent", "channel", "about")
    if problem:
        return _refuse(problem)
    searching = bool(args.query and args.query.strip())
    try:
        query = RecallQuery(
            tenant=args.tenant,
            agent_id=args.agent,
            channel_id=args.channel,
            about=args.about,
            query=args.query,
            limit=args.limit if args.limit is not None else (10 if searching else 50),
            mode=args.mode,
            exclude_ids=tuple(args.exclude),
        )
    except ValidationError as exc:
        return _refuse_invalid(exc)
    by_meaning = searching and args.mode != "keyword"
    embedder = make_embedder(settings, use="once") if by_meaning else None
    items = search_memory(
        runtime.graph(), query, embedder=embedder, dm_policy=settings.dm_memory_policy
    )
    if not searching:
        # Without a query this is the recent transcript: oldest first, each item also under
        # its earlier name `content`, for scripts written against the plain listing.
        items.reverse()
    if args.json:
        shown = [i.model_dump(mode="json") for i in items]
        if not searching:
            shown = [{**row, "content": row["text"]} for row in shown]
        print(json.dumps(shown, indent=2))
        return 0
    for item in items:
        print(_describe_recalled(item, searching))
    if not items:
        print(f"{args.agent} remembers nothing yet" if not searching else "nothing found")
    return 0


def _context(args: argparse.Namespace, settings: Settings) -> int:
    from memsync.reading import Memory
    from pipeline.context import DEFAULT_BUDGET_TOKENS

    problem = checked_ids(args, "agent", "channel")
    if problem:
        return _refuse(problem)
    budget = args.budget if args.budget is not None else DEFAULT_BUDGET_TOKENS
    if budget < 0:
        return _refuse(f"budget: must be at least 0 (got {budget})")
    searching = bool(args.query and args.query.strip())
    memory = Memory(
        runtime.graph(),
        embedder=make_embedder(settings, use="once") if searching else None,
        dm_policy=settings.dm_memory_policy,
    )
    try:
        context = memory.build_context(
            args.agent,
            args.channel,
            tenant=args.tenant,
            query=args.query,
            budget_tokens=budget,
            recent_ids=args.recent,
        )
    except ValidationError as exc:
        return _refuse_invalid(exc)
    if args.json:
        print(json.dumps(context.model_dump(mode="json"), indent=2))
        return 0
    messages = context.render()
    for message in messages:
        print(f"[{message['role']}]\n{message['content']}\n")
    cut = context.dropped_by_section()
    shown = ", ".join(f"{section} {len(keys)}" for section, keys in cut.items())
    print(
        f"({context.used_tokens} of {context.budget_tokens} tokens"
        + (f"; cut: {shown})" if shown else ")")
    )
    return 0


def _describe_recalled(item: RecallItem, searching: bool) -> str:
    """One recalled item as a line, with who said it (a window's further messages, or a
    message's further lines, below it)."""
    when = item.created_at.strftime("%Y-%m-%d %H:%M") if item.created_at else "-"
    where = f"#{item.channel_id}" if item.channel_id else ""
    if item.kind == "episode":
        head = f"[{when}] {where} {item.attributed()}"
    else:
        head = f"[{when}] {where} {item.kind}: {item.text}{reply_note(item.in_reply_to)}"
    if searching:
        head = f"{item.score:.4f} {head}  (evidence: {', '.join(item.evidence) or '-'})"
    return head + "".join(f"\n    ({change.note()})" for change in item.changed)


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
