"""Precision and recall of the rules extractor on labelled utterances, per kind and overall.

Each line is scored twice: values matching when equal after normalising or when one contains
the other (the rule the figures in docs/benchmarks.md were first given under), and values
matching only when equal, which shows a truncated or overlong value. `--file` scores another
labelled file, such as the held-out bench/data/extraction_heldout.jsonl.

`score_file` is shared with tests/unit/test_extract.py so the printed figures and the test floors
come from the same matching logic.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.shared import SHARED_DATA_DIR, json_lines, shared_data_dir
from pipeline.english.rules import candidates
from pipeline.extract import Extractor, RulesExtractor
from schemas.keys import channel_key, episode_key, participant_key
from schemas.memory import MEMORY_KINDS, MemoryItem
from schemas.records import AttributedMessage, ChannelRef, ResolvedTurn, Speaker
from tests.datasets import friends_raw_events, tau_raw_events

LABELLED_FILE = Path(__file__).resolve().parents[1] / "tests" / "data" / "extraction_labelled.jsonl"
# A Thursday, so "by Friday" labels read as the next day.
STATED_AT = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
TENANT = "bench"
_ARTICLES = re.compile(r"\b(?:the|a|an)\b")


@dataclass
class KindScore:
    """Counts for one kind (or all kinds together)."""

    support: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Report:
    """Scores per kind, overall, and the lines that missed (for reading, not for asserting)."""

    lines: int = 0
    kinds: dict[str, KindScore] = field(
        default_factory=lambda: {k: KindScore() for k in MEMORY_KINDS}
    )
    misses: list[str] = field(default_factory=list)

    @property
    def overall(self) -> KindScore:
        total = KindScore()
        for s in self.kinds.values():
            total.support += s.support
            total.tp, total.fp, total.fn = total.tp + s.tp, total.fp + s.fp, total.fn + s.fn
        return total


def norm_value(value: str) -> str:
    """Lowercase, drop articles and punctuation, squeeze spaces."""
    value = _ARTICLES.sub(" ", value.lower())
    value = re.sub(r"[^\w@$%./-]+", " ", value)
    return " ".join(value.split()).strip(" .")


def values_match(expected: str, got: str, *, exact: bool = False) -> bool:
    """Equal after normalising, or (unless `exact`) one containing the other: the lenient rule
    counts "2" for "2,000 EUR", so a truncated value shows only under `exact`."""
    e, g = norm_value(expected), norm_value(got)
    return e == g or (not exact and bool(e) and bool(g) and (e in g or g in e))


def _speaker(pid: str, kind: str, name: str) -> Speaker:
    handle = name.lower().replace(" ", "")
    return Speaker(
        key=participant_key(TENANT, pid),
        id=pid,
        kind="agent" if kind == "agent" else "human",
        display_name=name,
        handle=handle,
        label=f"{name} (@{handle})",
    )


def build_turn(line: dict[str, Any]) -> tuple[ResolvedTurn, Speaker, dict[str, str]]:
    """One labelled line as a one-message turn, the memory owner, and key -> label subject."""
    speaker = (
        _speaker("a-scout", "agent", "Scout")
        if line["speaker"] == "agent"
        else _speaker("u-riley", "human", "Riley")
    )
    owner = _speaker("a-atlas", "agent", "Atlas")
    participants = [speaker, owner]
    names = {e["subject"] for e in line["expected"]} | {line.get("addressee") or "speaker"}
    for name in sorted(names - {"speaker", "other", "channel"}):
        participants.append(_speaker(f"u-{name.lower()}", "human", name))
    if line["channel_kind"] == "group" and len(participants) == 2:
        participants.append(_speaker("u-jordan", "human", "Jordan"))
    channel = ChannelRef(
        key=channel_key(TENANT, "ch-bench"), id="ch-bench", kind=line["channel_kind"]
    )
    message = AttributedMessage(
        key=episode_key(TENANT, "ch-bench", line["id"]),
        id=line["id"],
        role="ai" if line["speaker"] == "agent" else "human",
        speaker_key=speaker.key,
        speaker_label=speaker.label,
        content=line["text"],
        created_at=STATED_AT,
    )
    turn = ResolvedTurn(
        event_id=line["id"],
        tenant=TENANT,
        channel=channel,
        participants=participants,
        messages=[message],
        dropped=[],
        occurred_at=STATED_AT,
    )
    labels = {p.key: p.display_name for p in participants}
    labels[speaker.key], labels[owner.key], labels[channel.key] = "speaker", "other", "channel"
    return turn, owner, labels


def _matches(
    expected: dict[str, Any], item: MemoryItem, labels: dict[str, str], *, exact: bool
) -> bool:
    # A held-out label names no predicate for a fact (its names are the extractor's own).
    return (
        expected["kind"] == item.kind
        and expected["subject"] == labels.get(item.subject_key)
        and expected.get("predicate", item.predicate) == item.predicate
        and values_match(expected["value"], item.value, exact=exact)
    )


def score_lines(
    lines: Iterable[dict[str, Any]], extractor: Extractor | None = None, *, exact: bool = False
) -> Report:
    """Greedy one-to-one matching of extracted items against the expected ones, per line."""
    extractor = extractor or RulesExtractor()
    report = Report()
    for line in lines:
        report.lines += 1
        turn, owner, labels = build_turn(line)
        got = extractor.extract(turn, owner)
        unmatched = list(got)
        for expected in line["expected"]:
            score = report.kinds[expected["kind"]]
            score.support += 1
            hit = next((i for i in unmatched if _matches(expected, i, labels, exact=exact)), None)
            if hit is None:
                score.fn += 1
                report.misses.append(f"FN {line['id']}: {expected} <- {line['text'][:80]!r}")
            else:
                score.tp += 1
                unmatched.remove(hit)
        for item in unmatched:
            report.kinds[item.kind].fp += 1
            report.misses.append(
                f"FP {line['id']}: {item.kind}/{labels.get(item.subject_key)}/{item.predicate}="
                f"{item.value!r} <- {line['text'][:80]!r}"
            )
    return report


def load_lines(path: Path = LABELLED_FILE) -> list[dict[str, Any]]:
    """The labelled lines of a JSON Lines file, without its header line (`_header`), if any."""
    return json_lines(path)


def format_report(report: Report) -> str:
    rows = [f"labelled utterances: {report.lines}"]
    rows.append(f"{'kind':<11} {'support':>7} {'tp':>4} {'fp':>4} {'fn':>4}  precision recall   f1")
    entries: Sequence[tuple[str, KindScore]] = [*report.kinds.items(), ("overall", report.overall)]
    for kind, s in entries:
        rows.append(
            f"{kind:<11} {s.support:>7} {s.tp:>4} {s.fp:>4} {s.fn:>4}  "
            f"{s.precision:>9.3f} {s.recall:>6.3f} {s.f1:>5.3f}"
        )
    return "\n".join(rows)


def time_rules(data: Path, repeats: int = 5) -> str:
    """How long the rules take a message, over the messages of the public sets in `data` that
    the filter stage keeps (the rules never see tool or system messages)."""
    texts = [
        message.get("content") or ""
        for event in [*tau_raw_events(data), *friends_raw_events(root=data)]
        for message in event["messages"]
        if message.get("role") not in ("tool", "system") and (message.get("content") or "").strip()
    ]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for text in texts:
            candidates(text)
        best = min(best, time.perf_counter() - start)
    return (
        f"rules over {len(texts):,} messages of tau-bench and FriendsQA: best of {repeats} "
        f"{best * 1e3:.0f} ms, {best / len(texts) * 1e6:.1f} us a message"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--file", type=Path, default=LABELLED_FILE, help=f"labelled lines (default {LABELLED_FILE})"
    )
    parser.add_argument("-v", action="store_true", help="print every miss")
    parser.add_argument(
        "--time",
        nargs="?",
        const=SHARED_DATA_DIR,
        type=Path,
        metavar="DATA",
        help="also time the rules over the kept messages of tau-bench and FriendsQA in DATA "
        "(default ../shared/data), best of 5",
    )
    args = parser.parse_args(argv)
    if args.time is not None:
        print(time_rules(shared_data_dir(args.time)) + "\n")
    lines = load_lines(args.file)
    rules = (("values equal or one containing the other", False), ("values equal", True))
    for title, exact in rules:
        report = score_lines(lines, exact=exact)
        print(f"== {title} ==\n{format_report(report)}\n")
        if args.v:
            print("\n".join(report.misses) + "\n")


if __name__ == "__main__":
    main()
