"""`memsync dlq list|show|replay|purge`: the dead-letter store from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from memsync.settings import Settings
from workers.cli.progress import ProgressBar
from workers.cli.replay import parse_duration, replay
from workers.worker import runtime


def add_dlq_commands(sub: Any) -> None:
    dlq = sub.add_parser("dlq", help="the dead-letter store")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True)
    dlq_list = dlq_sub.add_parser("list", help="entries, oldest failure first")
    dlq_list.add_argument("--json", action="store_true")
    dlq_list.set_defaults(handler=_dlq_list)
    dlq_show = dlq_sub.add_parser("show", help="one entry in full")
    dlq_show.add_argument("id")
    dlq_show.set_defaults(handler=_dlq_show)
    dlq_replay = dlq_sub.add_parser("replay", help="send entries back to their queues")
    dlq_replay.add_argument("ids", nargs="*")
    dlq_replay.add_argument("--all", action="store_true")
    dlq_replay.add_argument("--dry-run", action="store_true")
    dlq_replay.set_defaults(handler=_dlq_replay)
    dlq_purge = dlq_sub.add_parser("purge", help="delete entries for good")
    dlq_purge.add_argument("ids", nargs="*")
    dlq_purge.add_argument("--older-than", default=None, help="e.g. 7d, 12h, 30m")
    dlq_purge.set_defaults(handler=_dlq_purge)


def _dlq_list(args: argparse.Namespace, settings: Settings) -> int:
    letters = runtime.deadletters().entries()
    if args.json:
        print(json.dumps([json.loads(x.model_dump_json()) for x in letters], indent=2))
        return 0
    print(f"{len(letters)} dead letter(s)")
    for x in letters:
        when = datetime.fromtimestamp(x.last_failed_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        what = "/".join(p for p in (x.tenant, x.event_id, x.agent_id) if p) or "-"
        print(f"{x.id}  {when}  {x.stage:<6} {what:<40} x{x.attempts}  {x.error_type}: {x.error}")
    return 0


def _dlq_show(args: argparse.Namespace, settings: Settings) -> int:
    letter = runtime.deadletters().get(args.id)
    if letter is None:
        print(f"memsync: no dead letter {args.id}", file=sys.stderr)
        return 1
    print(json.dumps(json.loads(letter.model_dump_json()), indent=2))
    return 0


def _dlq_replay(args: argparse.Namespace, settings: Settings) -> int:
    from workers.worker.app import app

    if not args.ids and not args.all:
        print("memsync: name entry ids or --all", file=sys.stderr)
        return 2
    store = runtime.deadletters()
    total = store.count() if args.all else len(args.ids)
    bar = ProgressBar(total=total, label="replaying")
    report = replay(
        store, app, None if args.all else args.ids, dry_run=args.dry_run, on_progress=bar.update
    )
    bar.close()
    verb = "would replay" if args.dry_run else "replayed"
    print(f"{verb} {len(report.sent)} dead letter(s)")
    for entry_id, why in report.skipped:
        print(f"skipped {entry_id}: {why}", file=sys.stderr)
    for entry_id in report.missing:
        print(f"no dead letter {entry_id}", file=sys.stderr)
    return 1 if report.missing else 0


def _dlq_purge(args: argparse.Namespace, settings: Settings) -> int:
    store = runtime.deadletters()
    if args.older_than is None and not args.ids:
        print("memsync: name entry ids or --older-than DURATION", file=sys.stderr)
        return 2
    ids = list(args.ids)
    if args.older_than is not None:
        try:
            ids += store.ids_older_than(parse_duration(args.older_than))
        except ValueError as exc:
            print(f"memsync: {exc}", file=sys.stderr)
            return 2
    result = store.purge(ids)
    print(f"purged {result.removed} dead letter(s)")
    print(result.aof_note)
    return 0
