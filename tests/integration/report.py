"""Helpers shared by integration tests: the fault report, and raw task sends to a given broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memsync.settings import INGEST_QUEUE
from workers.worker.app import app

FAULT_REPORT: list[str] = []
REPORT_FILE = Path(__file__).resolve().parents[2] / ".memsync" / "fault-report.txt"


def report_fault(name: str, figures: str) -> None:
    """Record one fault test's figures for the terminal summary and the report file."""
    line = f"{name}: {figures}"
    FAULT_REPORT.append(line)
    REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
    with REPORT_FILE.open("a") as out:
        out.write(line + "\n")


def send_task(broker_url: str, name: str, payload: Any, queue: str = INGEST_QUEUE) -> None:
    """Put a task message straight onto a queue of this broker, bypassing the producer."""
    with app.connection_for_write(url=broker_url) as connection:
        app.send_task(
            name,
            args=(payload,),
            queue=queue,
            producer=app.amqp.Producer(connection, auto_declare=False),
        )
