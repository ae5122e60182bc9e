"""A pool child forked while the heartbeat thread uses a channel's Redis pool does not hang:
the thread works inside the fork gate, so no pool lock is held at fork()."""

from __future__ import annotations

import os
import threading
from typing import Any

from tests.forking import fork, reap
from tests.unit.fakebroker import fake_channel
from workers.worker import forkgate


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
                pid = fork()
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
