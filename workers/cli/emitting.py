"""`memsync emit FILE.jsonl [--wait]`: validate every line, send the turns, and with --wait
follow them until each agent's memory (and its vectors) is written, with a progress bar."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.settings import Settings
from pipeline.errors import InvalidEvent
from pipeline.validate import validate_event
from schemas.event import TurnEvent
from workers.cli.errors import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, describe, redact_url
from workers.cli.progress import ProgressBar
from workers.state.ledger import TurnStatus
from workers.worker import runtime

if TYPE_CHECKING:
    from memsync.producer import Producer


def add_emit_command(sub: Any) -> None:
    emit = sub.add_parser("emit", help="emit turn events from a JSON Lines file")
    emit.add_argument("file", type=Path, help="one TurnEvent per line ('-' for stdin)")
    emit.add_argument("--wait", action="store_true", help="return when every sync is in the graph")
    emit.add_argument("--timeout", type=float, default=600.0, help="seconds --wait may take")
    emit.set_defaults(handler=_emit)


def read_events(path: Path) -> tuple[list[TurnEvent], list[str]]:
    """Validate every line first, so a bad file sends nothing and every problem is reported."""
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    events: list[TurnEvent] = []
    errors: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(validate_event(line))
        except InvalidEvent as exc:
            errors.append(f"{path}:{number}: {exc}")
    return events, errors


def _emit(args: argparse.Namespace, settings: Settings) -> int:
    from memsync.producer import Producer

    events, errors = read_events(args.file)
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        print(f"memsync: {len(errors)} invalid event(s); nothing was sent", file=sys.stderr)
        return EXIT_USAGE
    deadline = time.monotonic() + args.timeout
    producer = Producer(settings)
    try:
        statuses = _send(producer, events, args)
    except (Exception, KeyboardInterrupt) as exc:
        # One line says both what went wrong and where the events are now.
        if args.debug:
            traceback.print_exc()
        code, line = describe(exc, settings)
        note = _spool_note(_close(producer), settings)
        print(f"memsync: {line}{'; ' + note if note else ''}", file=sys.stderr)
        return code
    note = _spool_note(_close(producer), settings)
    if note:
        where = redact_url(settings.broker_url)
        print(f"memsync: Redis at {where} was unreachable; {note}", file=sys.stderr)
    if statuses is None:
        return EXIT_FAILED
    if not args.wait:
        return EXIT_UNREACHABLE if note else 0
    code = _outcome(statuses)
    if all(s.finished for s in statuses):
        left = _wait_embedded(events, settings, deadline)
        if left:
            print(
                f"memsync: {left} item(s) of these turns still wait for embeddings "
                "(is an embed worker running? see `memsync stats`)",
                file=sys.stderr,
            )
            code = EXIT_FAILED
    return code


def _wait_embedded(events: list[TurnEvent], settings: Settings, deadline: float) -> int:
    """With embeddings on, poll until the turns' episodes (and the memories citing them) have
    vectors, or the deadline; how many still wait."""
    from pipeline.embedder import make_embedder
    from pipeline.graph.embeddings import pending_for_episodes
    from schemas.keys import episode_key

    if make_embedder(settings) is None:
        return 0
    wanted = [episode_key(e.tenant, e.channel.id, m.id) for e in events for m in e.messages]
    graph = runtime.graph()
    while True:
        left = pending_for_episodes(graph, wanted)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def _send(
    producer: Producer, events: list[TurnEvent], args: argparse.Namespace
) -> list[TurnStatus] | None:
    """Emit the events and, with --wait, wait for their syncs; None if they were not all handed
    to the broker or the spool in time."""
    for event in events:
        producer.emit(event)
    if not producer.flush(timeout=args.timeout):
        print(f"memsync: {producer.pending} event(s) not published", file=sys.stderr)
        return None
    print(f"emitted {len(events)} event(s)")
    if not args.wait:
        return []
    # The producer keeps draining its spool while we wait, should the broker be away.
    bar = ProgressBar(total=len(events), label="syncing")
    try:
        return runtime.ledger().wait(
            [(e.tenant, e.event_id) for e in events], timeout=args.timeout, on_progress=bar.update
        )
    finally:
        bar.close()


def _spool_note(spooled: int, settings: Settings) -> str:
    if not spooled:
        return ""
    return (
        f"{spooled} event(s) wait in the spool ({settings.spool_dir}); "
        "`memsync spool flush` publishes them"
    )


def _close(producer: Producer) -> int:
    """Close the producer; how many events it left in the spool. A broker blip here is no
    failure: whatever was not published is in the spool, and that count is what matters."""
    try:
        producer.close(timeout=5)
    except Exception as exc:  # kombu and redis raise many types while dropping a dead connection
        print(f"memsync: warning: closing the broker connection: {exc}", file=sys.stderr)
    try:
        return producer.spool_status().events
    except Exception as exc:  # sqlite trouble must not hide the command's own outcome
        print(f"memsync: warning: cannot read the spool: {exc}", file=sys.stderr)
        return 0


# Why agents are left out, for a first run that finds nothing remembered (README, "trust").
TRUST_HINT = (
    "an agent remembers a turn only in a channel that is not public, with no anonymous human, "
    "and (strict mode, the default) with every human its owner or trusted: "
    "`memsync trust own|grant`, or MEMSYNC_TRUST_MODE=open for a single-user install"
)


def _outcome(statuses: list[TurnStatus]) -> int:
    """Summarise an `emit --wait`: 0 only if every trusted agent remembers every turn and trust
    left no agent out."""
    failed = [s for s in statuses if s.finished and not s.complete]
    unfinished = [s for s in statuses if not s.finished]
    synced = sum(s.synced for s in statuses)
    print(f"synced {synced} agent memories for {len(statuses)} event(s)")
    for status in failed:
        why = status.reason or f"{status.dead} agent sync(s) dead-lettered"
        print(f"{status.state} {status.event_id}: {why}", file=sys.stderr)
    left_out = [s.untrusted for s in statuses if s.untrusted]
    if left_out:
        print(
            f"memsync: {len(left_out)} event(s) left {sum(left_out)} agent(s) out as untrusted; "
            "see `memsync stats` / the audit stream",
            file=sys.stderr,
        )
        print(f"memsync: {TRUST_HINT}", file=sys.stderr)
    if unfinished:
        print(f"memsync: {len(unfinished)} event(s) not finished in time", file=sys.stderr)
    return EXIT_FAILED if failed or unfinished or left_out else 0
