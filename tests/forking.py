"""Forking inside a test: the child must never return into pytest, and never outlive the test."""

from __future__ import annotations

import os
import signal
import time
import warnings


def fork() -> int:
    """os.fork(), without Python's warning about forking a threaded process (that is the test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def reap(pid: int, timeout: float) -> int:
    """The child's exit code; a child still running at the deadline is killed (-9), so no hung
    child outlives the test holding the runner's output open."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.005)
