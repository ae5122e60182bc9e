"""The chaos run's producer process: emits the seeded stream at a steady rate through Producer.

`python -m tests.chaos.emitter --seed S --rate R --state DIR`, settings from MEMSYNC_*. It may be
killed with SIGKILL at any moment: every second it flushes (each emitted turn is then published
or in the durable spool) and records the next index in DIR/checkpoint, and a restart resumes
from there, re-emitting the few turns emitted after the last checkpoint (writes are
idempotent). Every emit is appended to DIR/emitted.log. SIGTERM stops it cleanly: the rest is
flushed, the spool drained, and the final checkpoint is the number of turns in the stream.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from memsync.producer import Producer
from memsync.settings import Settings
from tests.chaos.stream import turn

CHECKPOINT = "checkpoint"
EMITTED = "emitted.log"
FLUSH_TIMEOUT = 60.0
DRAIN_TIMEOUT = 300.0
READY = "resuming at"  # printed once SIGTERM is handled: the driver waits for it


def read_checkpoint(state: Path) -> int:
    """The first index not known to be published or spooled (0 before any checkpoint)."""
    try:
        return int((state / CHECKPOINT).read_text().strip() or 0)
    except FileNotFoundError:
        return 0


def write_checkpoint(state: Path, index: int) -> None:
    """Atomically, and durably: a torn or lost checkpoint would skip or lose turns."""
    tmp = state / f"{CHECKPOINT}.tmp"
    with tmp.open("w") as out:
        out.write(str(index))
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(state / CHECKPOINT)


def emitted_high_water(state: Path) -> int:
    """One past the highest index any incarnation emitted (a torn last line is ignored)."""
    try:
        lines = (state / EMITTED).read_text().split("\n")
    except FileNotFoundError:
        return 0
    return max((int(x) + 1 for x in lines if x.strip().isdigit()), default=0)


def run(seed: int, rate: float, state: Path) -> int:
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    state.mkdir(parents=True, exist_ok=True)
    producer = Producer(Settings())
    start_index = index = read_checkpoint(state)
    # A killed incarnation may have emitted past its last checkpoint: re-emit at least that far
    # before stopping, so every turn ever emitted is one a live producer stands behind.
    must_reach = emitted_high_water(state)
    durable = index
    print(f"emitter {os.getpid()} {READY} {index}", flush=True)
    started = time.monotonic()
    with (state / EMITTED).open("a") as log:
        while not stopping or index < must_reach:
            # Pacing by the clock, not by sleeps between emits, so the rate holds on average.
            due = started + (index - start_index) / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.emit(turn(seed, index))
            log.write(f"{index}\n")
            log.flush()
            index += 1
            if index % max(1, int(rate)) == 0 and producer.flush(FLUSH_TIMEOUT):
                write_checkpoint(state, index)
                durable = index
    if not producer.flush(FLUSH_TIMEOUT):
        print("emitter: buffered turns neither published nor spooled", file=sys.stderr)
        return 1
    write_checkpoint(state, index)
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while producer.spool_status().events > 0:  # a clean stop leaves nothing in the spool
        if time.monotonic() > deadline:
            print("emitter: the spool did not drain", file=sys.stderr)
            producer.close()
            return 1
        time.sleep(0.2)
    producer.close()
    print(f"emitter {os.getpid()} stopped at {index} (checkpointed {durable})", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.emitter")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    return run(args.seed, args.rate, args.state)


if __name__ == "__main__":
    sys.exit(main())
