"""A dependency-free progress bar for long CLI operations, drawn on stderr when it is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """`done/total` with a bar and rate; prints plain milestones when stderr is not a terminal."""

    def __init__(
        self, total: int, label: str, *, enabled: bool = True, stream: TextIO | None = None
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.started = time.monotonic()
        self._last = -1
        self._tty = self.stream.isatty()

    def update(self, done: int) -> None:
        if not self.enabled or done == self._last:
            return
        self._last = done
        if self._tty:
            width = 30
            filled = width if self.total == 0 else int(width * done / self.total)
            elapsed = time.monotonic() - self.started
            rate = done / elapsed if elapsed > 0 else 0.0
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total} {rate:.1f}/s")
        elif done == self.total or done % max(self.total // 10, 1) == 0:
            self.stream.write(f"{self.label}: {done}/{self.total}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()
