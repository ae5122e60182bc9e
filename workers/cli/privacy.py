"""`memsync forget`, `memsync export` and `memsync graph sweep`: erasure, access and retention.

forget: exit 0 when everything is deleted (a second run deletes nothing and exits 0 too);
1 when the subject was never known ("nothing to forget") or the run is incomplete (run it
again); 2 for bad usage (an agent given as --participant, say).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from redis.exceptions import LockError

from memsync import keys
from memsync.settings import Settings
from pipeline.graph.erasure import ErasureRecord, Scope, list_erasures
from pipeline.graph.export import export_participant
from pipeline.graph.forgetting import (
    DEFAULT_BARRIER_SECONDS,
    DEFAULT_BATCH,
    ForgetReport,
    Forgetter,
    UnknownSubject,
    WrongKind,
)
from pipeline.graph.retention import sweep
from schemas.keys import channel_key, participant_key
from workers.cli.arguments import checked_ids
from workers.cli.errors import EXIT_FAILED, EXIT_USAGE
from workers.worker import runtime

_SCOPES: tuple[Scope, ...] = ("participant", "agent", "channel")


def add_privacy_commands(sub: Any) -> None:
    """Register `forget` and `export` on the top-level subparsers."""
    forget = sub.add_parser(
        "forget",
        help="erase a participant, an agent's memory or a channel (or --list erasures)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for scope in _SCOPES:
        forget.add_argument(f"--{scope}", default=None, help=f"the {scope} id")
    forget.add_argument("--tenant", default="default")
    forget.add_argument("--list", action="store_true", help="list erasure records (no content)")
    forget.add_argument("--json", action="store_true")
    forget.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="nodes per transaction")
    forget.add_argument(
        "--wait-seconds",
        type=float,
        default=DEFAULT_BARRIER_SECONDS,
        help="how long to wait for writes already running to end before deleting",
    )
    forget.set_defaults(handler=_forget)

    export = sub.add_parser("export", help="everything held of a participant, as JSON")
    export.add_argument("--participant", required=True, help="the participant id")
    export.add_argument("--tenant", default="default")
    export.add_argument("--out", type=Path, default=None, help="write here instead of stdout")
    export.set_defaults(handler=_export)


def add_sweep_command(graph_sub: Any) -> None:
    """Register `graph sweep` on the `graph` subparsers."""
    cmd = graph_sub.add_parser(
        "sweep",
        help="delete expired facts and (MEMSYNC_EPISODE_RETENTION_DAYS) old raw episodes",
    )
    cmd.add_argument("--tenant", default=None, help="one tenant only (default: all)")
    cmd.add_argument("--dry-run", action="store_true", help="count, change nothing")
    cmd.add_argument("--json", action="store_true")
    cmd.set_defaults(handler=_sweep)


# -- forget ---------------------------------------------------------------------------------------


def _forget(args: argparse.Namespace, settings: Settings) -> int:
    problem = checked_ids(args, *_SCOPES)
    if problem:
        return _usage(problem)
    named = [s for s in _SCOPES if getattr(args, s) is not None]
    if args.list:
        if len(named) > 1:
            return _usage("--list takes at most one of --participant, --agent, --channel")
        return _list(args, named[0] if named else None)
    if len(named) != 1:
        return _usage("name exactly one of --participant, --agent, --channel (or --list)")
    if args.batch < 1 or args.wait_seconds < 0:
        return _usage("--batch must be at least 1 and --wait-seconds at least 0")
    scope = named[0]
    subject = getattr(args, scope)
    forgetter = Forgetter(
        graph=runtime.graph(),
        summarizer=_summarizer(settings),
        summarizer_name=settings.summarizer,
        reanchor_tokens=settings.summary_reanchor_tokens,
        pair_lock=_fold_lock,
        batch=args.batch,
        barrier_seconds=args.wait_seconds,
        command=f"memsync forget --{scope} --tenant {args.tenant}",
    )
    try:
        report = getattr(forgetter, scope)(args.tenant, subject)
    except UnknownSubject as exc:
        print(f"memsync: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except WrongKind as exc:
        return _usage(str(exc))
    _show_report(report, args)
    return 0 if report.complete else EXIT_FAILED


def _show_report(report: ForgetReport, args: argparse.Namespace) -> None:
    if args.json:
        shown = report.model_dump(mode="json")
        print(json.dumps({**shown, "complete": report.complete}, indent=2, sort_keys=True))
    else:
        counts = ", ".join(f"{kind} {n}" for kind, n in report.counts.items())
        if report.deleted:
            print(f"forgot {report.scope} in tenant {report.tenant} (run {report.run}): {counts}")
        else:
            print(f"nothing left to forget (run {report.run}): {counts}")
        print(f"erasure record {report.subject_hash[:16]}: `memsync forget --list`")
    if not report.barrier_ok:
        print(
            "memsync: writes running when the erasure began did not end in time; "
            "run the same command again",
            file=sys.stderr,
        )
    if report.pending_pairs:
        print(
            f"memsync: {len(report.pending_pairs)} summary(ies) not rebuilt (a fold held them); "
            "run the same command again",
            file=sys.stderr,
        )


def _list(args: argparse.Namespace, scope: Scope | None) -> int:
    subject = None
    if scope is not None:
        value = getattr(args, scope)
        key = channel_key(args.tenant, value) if scope == "channel" else None
        subject = (scope, key or participant_key(args.tenant, value))
    found = list_erasures(runtime.graph(), args.tenant, subject)
    if args.json:
        print(json.dumps([e.model_dump(mode="json") for e in found], indent=2, sort_keys=True))
        return 0
    print(f"{len(found)} erasure record(s) in tenant {args.tenant}")
    for record in found:
        print(_describe(record))
    return 0


def _describe(record: ErasureRecord) -> str:
    totals = ", ".join(f"{k} {v}" for k, v in record.totals.items() if v) or "nothing"
    ban = " (tombstone: later turns dropped)" if record.blocking else ""
    when = record.first_at.strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{when}  {record.scope:<11} {record.subject_hash[:16]}  runs {record.runs}  "
        f"deleted: {totals}{ban}"
    )


def _summarizer(settings: Settings) -> Any:
    # The fold task's own summarizer: rebuilding a summary is its re-anchoring step.
    from workers.worker.folding import make_summarizer

    return make_summarizer(settings)


@contextlib.contextmanager
def _fold_lock(agent_key: str, channel_key_: str) -> Iterator[bool]:
    """The pair's fold lock (workers/worker/folding.py), waited for: a running fold ends first."""
    from workers.worker.folding import LEASE_SECONDS

    lock = runtime.redis_client().lock(
        keys.fold_lock(agent_key, channel_key_),
        timeout=LEASE_SECONDS,
        blocking=True,
        blocking_timeout=LEASE_SECONDS,
        thread_local=False,
    )
    taken = bool(lock.acquire())
    try:
        yield taken
    finally:
        if taken:
            with contextlib.suppress(LockError):
                lock.release()


# -- export ---------------------------------------------------------------------------------------


def _export(args: argparse.Namespace, settings: Settings) -> int:
    problem = checked_ids(args, "participant")
    if problem:
        return _usage(problem)
    data = export_participant(runtime.graph(), args.tenant, args.participant)
    text = json.dumps(data, indent=2, sort_keys=True, default=_json_value, ensure_ascii=False)
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text + "\n")
        print(
            f"exported {len(data['episodes'])} episode(s), {len(data['facts'])} fact(s), "
            f"{len(data['commitments'])} commitment(s) to {args.out}"
        )
    return 0


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"not JSON: {type(value).__name__}")


# -- sweep ----------------------------------------------------------------------------------------


def _sweep(args: argparse.Namespace, settings: Settings) -> int:
    problem = checked_ids(args)
    if problem:
        return _usage(problem)
    report = sweep(
        runtime.graph(),
        retention_days=settings.episode_retention_days,
        tenant=args.tenant,
        dry_run=args.dry_run,
    )
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True))
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    retention = (
        f"episodes older than {report.retention_days:g} days"
        if report.retention_days is not None
        else "no episodes (MEMSYNC_EPISODE_RETENTION_DAYS unset)"
    )
    print(
        f"{verb} {report.facts_expired} expired fact(s) and {report.episodes_deleted} of the "
        f"{retention}; kept {report.episodes_kept} still cited or unsummarised"
    )
    return 0


def _usage(problem: str) -> int:
    print(f"memsync: {problem}", file=sys.stderr)
    return EXIT_USAGE
