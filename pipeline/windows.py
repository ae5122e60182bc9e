"""Windows: the chosen messages shown together as one recall item (pure; pipeline/rank.py
scores and chooses them).

Chosen messages that follow each other in their channel are shown as one window in time order,
ranked by its best message, at most MAX_WINDOW of them (`group`). A window that shows a value
replaced later also shows what replaced it (`follow_revisions`): "Booked: Monday 10 June,
9:15am" without the later "your Monday appointment has been cancelled and you're booked in for
Friday 11am" tells the reader the wrong time, and the revision is often in a later window than
the first statement, or in none.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pipeline.rank import MAX_WINDOW, Passage, Unit, best_first, places

# Shown in a window's text where messages were left out between two of its messages.
GAP_MARK: Final = "…"


@dataclass(frozen=True)
class Window:
    """Chosen messages of one channel, in time order; it ranks by its best message (the lead),
    and `hits` are those a retriever matched. They follow each other but where `after_gap`
    says messages were left out before one (a later replacement added: `follow_revisions`)."""

    passages: tuple[Passage, ...]
    hits: frozenset[str]
    score: float
    lead: str
    after_gap: frozenset[str] = frozenset()

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.passages)

    @property
    def best(self) -> Passage:
        return next(p for p in self.passages if p.key == self.lead)

    @property
    def text(self) -> str:
        if len(self.passages) == 1:
            return self.passages[0].text
        lines: list[str] = []
        for p in self.passages:
            if p.key in self.after_gap:
                lines.append(GAP_MARK)
            lines.append(p.line)
        return "\n".join(lines)


def split_run(run: Sequence[Unit], cap: int) -> list[Sequence[Unit]]:
    """Consecutive messages (in time order) as pieces of at most `cap`: first the `cap` around
    the best message that score most together (the earliest such), then what lies either side,
    alike."""
    if len(run) <= cap:
        return [run] if run else []
    lead = run.index(min(run, key=best_first))
    starts = range(max(0, lead - cap + 1), min(lead, len(run) - cap) + 1)
    low = max(starts, key=lambda s: (sum(u.score for u in run[s : s + cap]), -s))
    high = low + cap - 1
    return [
        *split_run(run[:low], cap),
        run[low : high + 1],
        *split_run(run[high + 1 :], cap),
    ]


def group(
    chosen: Sequence[Unit], stretches: Iterable[Sequence[str]], hits: Iterable[str]
) -> list[Unit | Window]:
    """Chosen units, best first, with chosen messages that are consecutive in a stretch merged
    into windows of at most MAX_WINDOW (each placed where its best message was)."""
    matched = set(hits)
    picked = {u.key: u for u in chosen if u.message is not None}
    window_of: dict[str, Window] = {}
    for stretch in stretches:
        current: list[Unit] = []
        for key in [*stretch, None]:
            if key is not None and key in picked:
                current.append(picked[key])
                continue
            for piece in split_run(current, MAX_WINDOW):
                lead = min(piece, key=best_first)
                window = Window(
                    passages=tuple(u.message for u in piece if u.message is not None),
                    hits=frozenset(u.key for u in piece if u.key in matched),
                    score=lead.score,
                    lead=lead.key,
                )
                for unit in piece:
                    window_of[unit.key] = window
            current = []
    shown: list[Unit | Window] = []
    placed: set[str] = set()
    for unit in chosen:
        if unit.message is None:
            shown.append(unit)
            continue
        # A message in no stretch is a window of its own.
        window = window_of.get(unit.key) or Window(
            (unit.message,), frozenset({unit.key} & matched), unit.score, unit.key
        )
        if window.lead not in placed:
            placed.add(window.lead)
            shown.append(window)
    return shown


def follow_revisions(
    shown: Sequence[Unit | Window],
    later: Mapping[str, Sequence[str]],
    passages: Mapping[str, Passage],
    stretches: Iterable[Sequence[str]],
) -> list[Unit | Window]:
    """`shown` with each window that holds a value replaced later (`later`: a message's key to
    the keys of the messages that replaced its value) also holding the latest replacement it
    lacks, so that a replaced value is not shown without what replaced it.

    Only when no window ranked above already shows the replacement; it leaves the lower-ranked
    window that held it (one emptied is dropped), so no message is shown twice. The window keeps
    at most MAX_WINDOW messages by giving up those farthest from its lead, never the lead nor
    the replaced one, and marks where messages were left out.
    """
    place = places(stretches)
    out: list[Unit | Window | None] = list(shown)
    extended: set[str] = set()
    for index in range(len(out)):
        item = out[index]
        if not isinstance(item, Window):
            continue
        held = {p.key for p in item.passages}
        replacing = [
            (passages[key].order, key, old)
            for old in sorted(held)
            for key in later.get(old, ())
            if key in passages and key not in held
        ]
        if not replacing:
            continue
        _, newest, old = max(replacing)
        if any(isinstance(o, Window) and _holds(o, newest) for o in out[:index]):
            continue
        grown = _with(item, passages[newest], {item.lead, old}, place)
        out[index] = grown
        extended.add(item.lead)
        moved = False
        for after in range(index + 1, len(out)):
            other = out[after]
            if isinstance(other, Window) and _holds(other, newest):
                out[after] = _without(other, newest, place)
                moved = True
        if not moved and len(grown.passages) > len(item.passages):
            _give_up_one(out, extended, place)
    return [o for o in out if o is not None and (not isinstance(o, Window) or o.passages)]


def _give_up_one(
    out: list[Unit | Window | None], spare: set[str], place: Mapping[str, tuple[int, int]]
) -> None:
    """One message fewer shown, from the lowest-ranked item that can give one up (not a window
    led by a key in `spare`, nor an item resting on several messages): the budget counts what
    is shown."""
    for index in range(len(out) - 1, -1, -1):
        item = out[index]
        if item is None:
            continue
        if isinstance(item, Window):
            if item.lead in spare or not item.passages:
                continue
            if len(item.passages) == 1:
                out[index] = None
                return
            at = next(i for i, p in enumerate(item.passages) if p.key == item.lead)
            far = max(range(len(item.passages)), key=lambda i: (abs(i - at), i))
            kept = [p for i, p in enumerate(item.passages) if i != far]
            out[index] = _window(kept, item, item.lead, place)
            return
        if len(item.evidence) <= 1:
            out[index] = None
            return


def _holds(window: Window, key: str) -> bool:
    return any(p.key == key for p in window.passages)


def _with(
    window: Window, added: Passage, keep: set[str], place: Mapping[str, tuple[int, int]]
) -> Window:
    """`window` with `added` in time order, cut back to MAX_WINDOW messages from those
    farthest from its lead, the earlier of two as far (sparing `keep` and `added`)."""
    kept = sorted([*window.passages, added], key=lambda p: p.order)
    spare = keep | {added.key}
    while len(kept) > MAX_WINDOW:
        at = next(i for i, p in enumerate(kept) if p.key == window.lead)
        far = [i for i, p in enumerate(kept) if p.key not in spare]
        if not far:
            break
        del kept[max(far, key=lambda i: (abs(i - at), -i))]
    return _window(kept, window, window.lead, place)


def _without(window: Window, key: str, place: Mapping[str, tuple[int, int]]) -> Window:
    """`window` without message `key`; when `key` led it, the earliest left leads."""
    kept = [p for p in window.passages if p.key != key]
    lead = window.lead if window.lead != key or not kept else kept[0].key
    return _window(kept, window, lead, place)


def _window(
    kept: Sequence[Passage], was: Window, lead: str, place: Mapping[str, tuple[int, int]]
) -> Window:
    """A window of `kept` in place of `was`, marking each message that does not follow the one
    before it in their stretch."""
    gaps = frozenset(
        later.key
        for before, later in itertools.pairwise(kept)
        if (spot := place.get(later.key)) is None
        or (prior := place.get(before.key)) is None
        or spot != (prior[0], prior[1] + 1)
    )
    hits = was.hits & {p.key for p in kept}
    return Window(tuple(kept), hits, was.score, lead, gaps)
