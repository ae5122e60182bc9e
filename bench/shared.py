"""Where benchmarks find the full public data sets: ``../shared/data`` beside the project.

Tests never read it (they use the slices in tests/data); only bench/ imports this module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.datasets import FRIENDSQA_FILE, TAU_BENCH_FILE

SHARED_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data_dir(root: Path | None = None) -> Path:
    """The full data sets (at `root`, default ../shared/data); a clear error if they are absent."""
    where = SHARED_DATA_DIR if root is None else root
    if not (where / TAU_BENCH_FILE).is_file():
        raise FileNotFoundError(
            f"the full public data sets are not at {where} (expected "
            f"{TAU_BENCH_FILE} and {FRIENDSQA_FILE} there); benchmarks need them beside the "
            "project as ../shared/data. Tests do not: they read the slices in tests/data."
        )
    return where


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON Lines data file, without its header line (`_header`), if any."""
    rows = (json.loads(row) for row in path.read_text(encoding="utf-8").splitlines() if row.strip())
    return [row for row in rows if "_header" not in row]
