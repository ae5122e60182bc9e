"""Cut the small data slices under tests/data from the full public sets in ../shared/data.

Tests read only the slices, so a clone without ``../shared`` runs them; this script is how the
slices were made and how to check they still match their source. Records are copied whole and
unchanged, only fewer of them (see tests/data/README.md for the rule and the figures).

Run: `.venv/bin/python -m bench.slices` (rewrite) or `... -m bench.slices --check` (compare).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.shared import shared_data_dir
from tests.datasets import FRIENDSQA_FILE, LICENCE_FILES, TAU_BENCH_FILE, TESTS_DATA_DIR

ROOT = TESTS_DATA_DIR.parents[1]
# FriendsQA ships only the Apache notice; the licence asks that a copy of its text go along.
APACHE_TEXT = Path("friendsqa", "LICENSE-2.0.txt")

TAU_STEP = 40  # trajectories 0, 40, 80, 120, 160: every message shape the filter must handle
FRIENDS_STEP = 12  # scenes 0, 12, ..., 132: two chorus lines, Ross Geller in half the scenes


def cut_tau(full: Any) -> Any:
    """Every TAU_STEP-th trajectory, in file order, each copied whole."""
    return full[::TAU_STEP]


def cut_friends(full: Any) -> Any:
    """Every FRIENDS_STEP-th episode (one scene each), questions included, in file order."""
    return {**full, "data": full["data"][::FRIENDS_STEP]}


SLICES: dict[Path, Callable[[Any], Any]] = {TAU_BENCH_FILE: cut_tau, FRIENDSQA_FILE: cut_friends}


def render(data: Any) -> str:
    return json.dumps(data, indent=1) + "\n"


def planned(source: Path) -> dict[Path, bytes]:
    """Every file under tests/data this script owns, with the content it must have."""
    files: dict[Path, bytes] = {}
    for name, cut in SLICES.items():
        full = json.loads((source / name).read_text(encoding="utf-8"))
        files[name] = render(cut(full)).encode()
    for name in LICENCE_FILES:
        files[name] = (source / name).read_bytes()
    files[APACHE_TEXT] = (ROOT / "LICENSE").read_bytes()
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare only, write nothing")
    args = parser.parse_args()
    try:
        source = shared_data_dir()
    except FileNotFoundError as exc:
        parser.error(str(exc))
    stale = []
    for name, content in planned(source).items():
        target = TESTS_DATA_DIR / name
        if target.exists() and target.read_bytes() == content:
            continue
        stale.append(name)
        if not args.check:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            target.chmod(0o644)  # the shared copies are read-only
    for name in stale:
        print(f"{'differs' if args.check else 'wrote'}: tests/data/{name}")
    for name in SLICES:
        size = (TESTS_DATA_DIR / name).stat().st_size if (TESTS_DATA_DIR / name).exists() else 0
        print(f"tests/data/{name}: {size / 1000:.0f} kB")
    if args.check and stale:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
