"""A short seeded chaos schedule on real processes, with default delivery settings.

Two minutes of a steady producer (its own process) and a fault every 15-30 s: worker process
groups killed, Neo4j frozen, Redis restarted on its AOF data, the producer killed and
restarted. The graph must then hold every expected (agent, episode) pair exactly once, every
turn must be settled, replay must clear every dead letter, and no process may have died
without the schedule killing it. The long run is `make chaos MINUTES=30`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.driver import Chaos, ChaosConfig, report
from tests.integration.report import report_fault

SEED = 20260105
# As many faults as three minutes at the driver's default gaps (20-40 s) gave, in less time: the
# whole of `make test` has a budget.
MINUTES = 2.0
GAP = (15.0, 30.0)


@pytest.mark.integration
@pytest.mark.chaos
@pytest.mark.timeout(1200)
def test_seeded_fault_schedule_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    config = ChaosConfig(minutes=MINUTES, seed=SEED, root=tmp_path, settle_timeout=420, gap=GAP)
    result = Chaos(config).run()
    figures = report(result)
    report_fault(
        f"chaos schedule, seed {SEED}, {MINUTES:g} min",
        " | ".join(line.strip() for line in figures.splitlines()[1:]),
    )
    assert sum(result.faults.values()) >= 4, figures  # a schedule that broke almost nothing
    assert result.turns > 0, figures
    assert result.unplanned == [], figures
    assert result.fault_errors == [], figures
    assert result.lost == 0, figures
    assert result.duplicated == 0, figures
    assert result.unexpected == 0, figures
    assert result.unsettled == 0, figures
    assert result.dead_after_replay == 0, figures
