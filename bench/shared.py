"""Where benchmarks find the full public data sets: ``../shared/data`` beside the project.

Tests never read it (they use the slices in tests/data); only bench/ imports this module.
"""

from __future__ import annotations

from pathlib import Path

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
