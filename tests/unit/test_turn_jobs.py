"""The sync task's payload: a turn's jobs travel as one TurnJobs item and come back the same."""

from __future__ import annotations

import json

from bench.syncload import workload
from memsync.message import payload_repr
from pipeline.ingest import ingest_turns
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.records import SyncJob, TurnJobs, group_jobs, job_items
from tests.datasets import TESTS_DATA_DIR


def _jobs(turns: int = 60) -> list[SyncJob]:
    events = [validate_event(e) for e in workload(TESTS_DATA_DIR, turns=turns, seed=4)]
    return ingest_turns(events, {}, DirectoryTrustPolicy("open", {})).jobs


def test_a_turns_jobs_round_trip_through_json_as_one_item_a_turn() -> None:
    jobs = _jobs()
    grouped = group_jobs(jobs)
    assert len(grouped) == len({job.event_id for job in jobs}) == 60
    assert {len(turn.agents) for turn in grouped} == {3}
    wire = json.loads(json.dumps([turn.model_dump(mode="json") for turn in grouped]))
    back = [job for item in wire for job in TurnJobs.model_validate(item).jobs()]
    assert back == jobs
    assert [job.model_dump(mode="json") for job in back] == [
        job.model_dump(mode="json") for job in jobs
    ]
    # Smaller on the wire than one item per agent, the point of it.
    assert len(json.dumps(wire)) < 0.5 * len(json.dumps([j.model_dump(mode="json") for j in jobs]))


def test_jobs_that_differ_beyond_their_agent_are_not_folded() -> None:
    first, second, *_ = _jobs(1)
    fewer = second.model_copy(update={"messages": second.messages[:1]})
    grouped = group_jobs([first, fewer])
    assert [len(turn.agents) for turn in grouped] == [1, 1]
    assert [job for turn in grouped for job in turn.jobs()] == [first, fewer]


def test_a_refused_item_splits_into_one_job_item_an_agent() -> None:
    [turn] = group_jobs(_jobs(1))
    item = turn.model_dump(mode="json")
    split = job_items(item)
    assert [part["agent"]["id"] for part in split] == [a.id for a in turn.agents]
    assert all("agents" not in part for part in split)
    assert [SyncJob.model_validate(part) for part in split] == turn.jobs()
    assert job_items({"tenant": "t"}) == [{"tenant": "t"}]
    assert job_items("junk") == ["junk"]


def test_the_repr_names_each_turns_agents_never_text() -> None:
    [turn] = group_jobs(_jobs(1))
    shown = payload_repr([turn.model_dump(mode="json")])
    keys = "+".join(agent.key for agent in turn.agents)
    assert shown == f"<1 item: {turn.event_id!r}@{keys}>"
    assert turn.messages[0].content not in shown
