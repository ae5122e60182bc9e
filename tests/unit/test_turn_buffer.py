"""The producer's buffer: bounded, batches in order, and a publisher woken once a batch."""

from __future__ import annotations

import threading

from memsync.buffer import TurnBuffer

# Long enough that a test passing through it would be noticed; the tests below never wait it out.
LONG = 60.0


class _CountingCondition(threading.Condition):
    """A condition that counts how often a waiter was asked to wake."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.notified = 0

    def notify(self, n: int = 1) -> None:
        self.notified += 1
        super().notify(n)


def _take_in_thread(
    buffer: TurnBuffer[int], **waits: float
) -> tuple[threading.Thread, list[object]]:
    taken: list[object] = []
    thread = threading.Thread(target=lambda: taken.append(buffer.take(**waits)), daemon=True)
    thread.start()
    return thread, taken


def test_a_full_buffer_refuses_the_next_item_and_keeps_the_rest() -> None:
    buffer: TurnBuffer[int] = TurnBuffer(capacity=3, batch=10)
    assert [buffer.put(i) for i in range(4)] == [True, True, True, False]
    assert buffer.take(idle=0, linger=0) == [0, 1, 2]
    assert buffer.put(9)


def test_batches_come_out_oldest_first_and_no_larger_than_a_batch() -> None:
    buffer: TurnBuffer[int] = TurnBuffer(capacity=100, batch=4)
    for i in range(10):
        buffer.put(i)
    assert buffer.take(idle=0, linger=0) == [0, 1, 2, 3]
    assert buffer.take(idle=0, linger=0) == [4, 5, 6, 7]
    assert buffer.take(idle=0, linger=0) == [8, 9]
    assert buffer.take(idle=0, linger=0) == []


def test_a_put_wakes_the_publisher_only_at_the_first_item_and_at_a_full_batch() -> None:
    buffer: TurnBuffer[int] = TurnBuffer(capacity=1000, batch=50)
    counting = _CountingCondition()
    buffer._ready = counting
    for i in range(120):
        buffer.put(i)
    # Item 1 (the publisher may be idle) and item 50 (a batch is ready); 120 puts in all.
    assert counting.notified == 2


def test_a_lingering_publisher_is_woken_by_a_full_batch() -> None:
    buffer: TurnBuffer[int] = TurnBuffer(capacity=100, batch=5)
    buffer.put(0)
    thread, taken = _take_in_thread(buffer, idle=LONG, linger=LONG)
    for i in range(1, 5):
        buffer.put(i)
    thread.join(timeout=LONG / 2)
    assert not thread.is_alive(), "a full batch did not end the linger"
    assert taken == [[0, 1, 2, 3, 4]]


def test_a_buffer_smaller_than_a_batch_ends_the_linger_when_full() -> None:
    # Emits would be refused (BufferFull) for the rest of a linger that waits for a batch the
    # buffer cannot hold.
    buffer: TurnBuffer[int] = TurnBuffer(capacity=3, batch=50)
    buffer.put(0)
    thread, taken = _take_in_thread(buffer, idle=LONG, linger=LONG)
    buffer.put(1)
    buffer.put(2)
    thread.join(timeout=LONG / 2)
    assert not thread.is_alive(), "a full buffer did not end the linger"
    assert taken == [[0, 1, 2]]


def test_an_idle_publisher_is_woken_by_the_first_item() -> None:
    buffer: TurnBuffer[int] = TurnBuffer(capacity=100, batch=5)
    thread, taken = _take_in_thread(buffer, idle=LONG, linger=0)
    buffer.put(7)
    thread.join(timeout=LONG / 2)
    assert not thread.is_alive(), "the first item did not wake the publisher"
    assert taken == [[7]]


def test_the_linger_ends_with_what_came() -> None:
    buffer: TurnBuffer[int] = TurnBuffer(capacity=100, batch=50)
    buffer.put(1)
    buffer.put(2)
    assert buffer.take(idle=LONG, linger=0.01) == [1, 2]


def test_close_wakes_the_publisher_which_takes_the_rest_then_stops() -> None:
    buffer: TurnBuffer[int] = TurnBuffer(capacity=100, batch=2)
    thread, taken = _take_in_thread(buffer, idle=LONG, linger=LONG)
    buffer.close()
    thread.join(timeout=LONG / 2)
    assert not thread.is_alive(), "close did not wake an idle publisher"
    assert taken == [None]

    buffer = TurnBuffer(capacity=100, batch=2)
    for i in range(3):
        buffer.put(i)
    buffer.close()
    assert buffer.take(idle=LONG, linger=LONG) == [0, 1]
    assert buffer.take(idle=LONG, linger=LONG) == [2]
    assert buffer.take(idle=LONG, linger=LONG) is None
