"""A gate the worker's background threads (heartbeat, reconciler) pass through while they work,
shut across fork().

A pool child is a fork of the worker's main process. A lock that one of those threads held at
that moment (a Redis or kombu pool's, the runtime's, a cache's) stays held for ever in the child,
which then hangs on its first use of it (kombu's after-fork cleanup takes the pool locks), and a
task sent to it runs into the hard time limit. With the gate, fork() waits until no thread is
inside a tick, and no tick starts until it is done. Nothing else may be taken before the gate is
shut: a tick still running could need it, and fork() would wait for that tick for ever.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager


class ForkGate:
    """Many threads may work at once; a fork waits for all of them and keeps new ones out."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._forking = False

    @contextmanager
    def working(self) -> Iterator[None]:
        with self._cond:
            while self._forking:
                self._cond.wait()
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def shut(self) -> None:
        """Before fork(): wait until no thread works, and keep new work out."""
        with self._cond:
            self._forking = True
            while self._active:
                self._cond.wait()

    def open(self) -> None:
        """After fork(), in the parent: let work start again."""
        with self._cond:
            self._forking = False
            self._cond.notify_all()


gate = ForkGate()


# Functions, not bound methods: the child replaces `gate`, and these must see the current one.
def _shut() -> None:
    gate.shut()


def _open() -> None:
    gate.open()


def _fresh_in_child() -> None:
    # The threads that waited at the gate do not exist in the child.
    global gate
    gate = ForkGate()


os.register_at_fork(before=_shut, after_in_parent=_open, after_in_child=_fresh_in_child)


def working() -> AbstractContextManager[None]:
    """The current gate, for a background thread's unit of work (a tick)."""
    return gate.working()
