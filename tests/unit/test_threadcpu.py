"""bench.threadcpu: a JVM's threads grouped by what they do, CPU summed between snapshots."""

from __future__ import annotations

import os
import threading
import time

from bench import threadcpu


def test_threads_are_grouped_by_role_and_only_what_was_spent_counts() -> None:
    before = {"11:C2 CompilerThre": 5.0, "12:neo4j.BoltWorke": 1.0, "13:GC Thread#0": 0.5}
    after = {
        "11:C2 CompilerThre": 7.5,
        "12:neo4j.BoltWorke": 4.0,
        "13:GC Thread#0": 0.75,
        "14:C1 CompilerThre": 0.5,  # started between the snapshots
        "15:Sweeper thread": 0.25,
    }
    assert threadcpu.by_role(before, after) == {
        "queries": 3.0,
        "compiler": 3.0,
        "gc": 0.25,
        "other": 0.25,
        "total": 6.5,
    }


def test_every_live_thread_of_a_process_is_read() -> None:
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    waiter.start()
    try:
        seen = threadcpu.by_thread(os.getpid())
        ids = {int(key.split(":", 1)[0]) for key in seen}
        assert {os.getpid(), waiter.native_id} <= ids
    finally:
        stop.set()
        waiter.join()
    assert all(seconds >= 0 for seconds in seen.values())


def test_a_process_cpu_grows_as_it_works_and_a_gone_one_reads_zero() -> None:
    before = threadcpu.process_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert threadcpu.process_seconds(os.getpid()) > before
    assert threadcpu.process_seconds(2**22 + 1) == 0.0  # above Linux's largest pid
