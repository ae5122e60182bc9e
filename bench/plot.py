"""The issue-9 figure: sync-path throughput per phase against the ceiling, and emit() p99.

Reads the JSON of bench/syncpath.py (one file per agents-per-channel setting; give several)
and optionally of bench/emitlatency.py, and draws a PNG with matplotlib's Agg backend.

Run: `.venv/bin/python -m bench.plot --syncpath A.json [B.json ...] [--emit E.json]
--out docs/syncpath.png`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Bar:
    """One bar: a label and its value."""

    label: str
    value: float


@dataclass(frozen=True)
class Throughput:
    """One syncpath run: its bars (turns/s per phase) and its ceiling."""

    title: str
    bars: list[Bar]
    ceiling: float | None


def throughput(report: dict[str, Any]) -> Throughput:
    """Turns/s per phase (the ceiling included as a bar) from a syncpath JSON report."""
    config = report["config"]
    bars = [
        Bar(r["phase"], float(r["turns_per_s"]))
        for r in report["results"]
        if r.get("turns_per_s") is not None
    ]
    ceiling = next((b.value for b in bars if b.label == "ceiling"), None)
    title = f"{config['agents']} agents a channel, {config['turns']} turns"
    return Throughput(title, bars, ceiling)


# The emit() target: p99 at or under 1 ms in every condition.
EMIT_TARGET_US = 1000.0


def emit_bars(report: dict[str, Any]) -> list[Bar]:
    """emit() p99 (us) per condition from an emitlatency JSON report."""
    return [
        Bar(f"broker {r['broker']}\nload {r['load']}", float(r["emit_us"]["p99"]))
        for r in report["runs"]
        if r["emit_us"].get("p99") is not None
    ]


def draw(runs: list[Throughput], emits: list[Bar], out: Path, rate: float | None) -> None:
    try:
        import matplotlib  # type: ignore[import-not-found, unused-ignore]
    except ModuleNotFoundError:
        raise SystemExit(
            "matplotlib is not installed in this environment; install it to draw the plot"
        ) from None
    matplotlib.use("Agg")  # no display: draw to a file
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

    panels = len(runs) + (1 if emits else 0)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=False):
        labels = [b.label.replace("pipeline ", "") for b in run.bars]
        ax.bar(labels, [b.value for b in run.bars], color="tab:blue")
        if run.ceiling is not None:
            ax.axhline(run.ceiling, color="tab:red", linestyle="-", label="ceiling")
            ax.axhline(run.ceiling / 2, color="tab:red", linestyle="--", label="half ceiling")
            ax.legend()
        ax.set_ylabel("turns/s")
        ax.set_title(run.title)
        ax.tick_params(axis="x", labelrotation=30)
    if emits:
        ax = axes[0][-1]
        ax.bar([b.label for b in emits], [b.value for b in emits], color="tab:green")
        ax.axhline(EMIT_TARGET_US, color="tab:red", linestyle="--", label="target (1 ms)")
        ax.legend(loc="upper left")
        ax.set_ylabel("emit() p99 (us)")
        ax.set_title(f"emit() p99 at {rate:.0f}/s" if rate else "emit() p99")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--syncpath", type=Path, nargs="+", required=True)
    parser.add_argument("--emit", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("docs/syncpath.png"))
    args = parser.parse_args()
    runs = [throughput(json.loads(path.read_text())) for path in args.syncpath]
    emits: list[Bar] = []
    rate: float | None = None
    if args.emit is not None:
        report = json.loads(args.emit.read_text())
        emits = emit_bars(report)
        rate = float(report["config"]["rate"])
    draw(runs, emits, args.out, rate)
    print(f"plot written to {args.out}")


if __name__ == "__main__":
    main()
