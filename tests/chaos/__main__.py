"""`python -m tests.chaos --minutes N --seed S`: one chaos run, its figures printed and appended
to .memsync/chaos-report.txt; exit status 1 unless the audit is exact and nothing died unplanned.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.chaos.driver import ChaosConfig, run_chaos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=20.0, help="turns a second")
    parser.add_argument(
        "--root", type=Path, default=None, help="data and logs (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="memsync-chaos-"))
    print(f"[chaos] data and logs in {root}", flush=True)
    result = run_chaos(ChaosConfig(minutes=args.minutes, seed=args.seed, root=root, rate=args.rate))
    return 0 if result.clean else 1


if __name__ == "__main__":
    sys.exit(main())
