"""fork() waits at the gate, so a pool child never inherits a lock a background thread held."""

from __future__ import annotations

import os
import threading

from tests.forking import fork, reap
from workers.worker import forkgate


def test_a_child_never_inherits_a_lock_held_inside_a_tick() -> None:
    shared = threading.Lock()  # stands for a pool's, the runtime's or a cache's lock
    stop = threading.Event()

    def ticking() -> None:  # as the heartbeat and reconciler threads do
        while not stop.is_set():
            with forkgate.working(), shared:
                pass

    thread = threading.Thread(target=ticking, daemon=True)
    thread.start()
    failures = 0
    try:
        for _ in range(200):
            pid = fork()
            if pid == 0:
                os._exit(0 if shared.acquire(timeout=5) else 1)
            failures += reap(pid, timeout=10) != 0
    finally:
        stop.set()
        thread.join(5)
    assert failures == 0


def test_work_goes_on_after_a_fork_in_the_parent_and_the_child() -> None:
    pid = fork()
    if pid == 0:
        code = 1
        try:
            with forkgate.working():
                code = 0
        finally:
            os._exit(code)
    assert reap(pid, timeout=10) == 0
    with forkgate.working():
        pass
