"""`memsync demo` (what `make demo` runs) on the suite's Redis and Neo4j: it plays its sample
conversation through workers of its own and ends by giving memory back, one agent's assembled
context and a query's recall, each resting on the conversation's messages."""

from __future__ import annotations

import pytest

from memsync.settings import Settings
from tests.integration.test_operations import cli
from workers.local import services

pytestmark = pytest.mark.integration


def test_the_demo_ends_with_a_context_and_a_recall(
    worker: services.Service, settings: Settings
) -> None:
    done = cli(settings, "demo", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    context_at = out.index("== what Travel Agent is told before answering in #ch-trip")
    recall_at = out.index("== Finance recalls 'what is the budget' in #ch-trip")
    assert context_at < recall_at
    context = out[context_at:recall_at]
    assert "[system]" in context and " tokens)" in context
    # Every recalled item cites the demo's own message ids; the budget is among them.
    items = [line for line in out[recall_at:].splitlines()[1:] if "(evidence: " in line]
    assert items and any("budget" in line.lower() for line in items), out[recall_at:]
    # The services were the suite's: the demo stops only the two workers it started.
    assert out.rstrip().endswith("stopped what the demo started: worker, worker")
