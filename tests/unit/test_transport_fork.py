"""A pool child forked while the heartbeat thread uses a channel's Redis pool does not hang:
the thread works inside the fork gate, so no pool lock is held at fork()."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from typing import Any

from tests.unit.fakebroker import fake_channel
from workers import forkgate


def reap(pid: int, timeout: float) -> int:
    """The child's exit code, or -9 after killing a child still running at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -9


def test_kombus_after_fork_cleanup_never_hangs_the_child() -> None:
    with fake_channel() as channel:
        client: Any = channel.client
        stop = threading.Event()

        def busy() -> None:  # as the heartbeat thread is, on a channel of its own
            while not stop.is_set():
                with forkgate.working():
                    client.set("k", "v")

        thread = threading.Thread(target=busy, daemon=True)
        thread.start()
        hung = 0
        try:
            for _ in range(100):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
                if pid == 0:  # what billiard's pool child runs first: kombu's after-fork hook
                    code = 1
                    try:
                        channel._after_fork()
                        code = 0
                    finally:
                        os._exit(code)
                hung += reap(pid, timeout=10) != 0
        finally:
            stop.set()
            thread.join(5)
        assert hung == 0
