"""The sync task on a real worker reads both payload forms: a turn's jobs as one item (what
ingest sends) and one item an agent (what a dead-letter replay or an older ingest sends). A
malformed turn item is dead-lettered one agent at a time, so nothing is lost and each agent's
letter replays on its own."""

from __future__ import annotations

import pytest
import redis

from bench.syncload import workload
from memsync.settings import SYNC_QUEUE, Settings
from pipeline.errors import PoisonPayload
from pipeline.graph.reader import tenant_counts
from pipeline.graph.store import GraphStore
from pipeline.ingest import ingest_turns
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.records import group_jobs
from tests.datasets import TESTS_DATA_DIR
from tests.integration.report import send_task
from tests.integration.test_operations import wait_for
from workers.local import services
from workers.state.deadletter import DeadLetterStore, letters_for

pytestmark = pytest.mark.integration


def test_both_forms_are_written_and_a_bad_turn_item_is_dead_lettered_per_agent(
    worker: services.Service, settings: Settings, graph: GraphStore, tenant: str
) -> None:
    events = [validate_event(e) for e in workload(TESTS_DATA_DIR, turns=3, seed=6, tenant=tenant)]
    turns = group_jobs(ingest_turns(events, {}, DirectoryTrustPolicy("open", {})).jobs)
    assert [len(turn.agents) for turn in turns] == [3, 3, 3]
    one_per_agent = [job.model_dump(mode="json") for job in turns[0].jobs()]
    bad = turns[2].model_dump(mode="json")
    bad["messages"][0]["role"] = "robot"
    store = DeadLetterStore(redis.Redis.from_url(settings.broker_url))
    # What a sync worker of an older release files when it refuses a turn item: the whole item.
    store.put(
        letters_for(
            task="memsync.sync",
            queue=SYNC_QUEUE,
            stage="sync",
            payload=[turns[1].model_dump(mode="json")],
            error=PoisonPayload("invalid sync job: agent: Field required"),
            permanent=True,
            attempts=1,
            worker="older",
        )
    )
    assert [x.event_id for x in store.entries() if x.tenant == tenant] == [turns[1].event_id]
    send_task(
        settings.broker_url,
        "memsync.sync",
        [*one_per_agent, turns[1].model_dump(mode="json"), bad],
        queue=SYNC_QUEUE,
    )

    expected = 3 * (len(turns[0].messages) + len(turns[1].messages))
    wait_for(lambda: tenant_counts(graph, tenant)["observed"] == expected, timeout=90)
    # The bad item's three agents are filed, and the older worker's letter goes once its item
    # is written (as its replay would do): the sets differ until both have happened.
    wanted = sorted(a.id for a in turns[2].agents)

    def filed() -> list[str]:
        return sorted(x.agent_id or "-" for x in store.entries() if x.tenant == tenant)

    wait_for(lambda: filed() == wanted, timeout=30)
    letters = [x for x in store.entries() if x.tenant == tenant]
    assert {(x.event_id, x.stage, x.error_type) for x in letters} == {
        (turns[2].event_id, "sync", "PoisonPayload")
    }
    assert all("messages.0.role" in x.error for x in letters), letters
    # Each letter is one agent's job (a one-item list, as a replay sends it).
    items = [x.payload[0] for x in letters]
    assert all(len(x.payload) == 1 for x in letters)
    assert all("agent" in item and "agents" not in item for item in items)
    assert tenant_counts(graph, tenant)["observed"] == expected
