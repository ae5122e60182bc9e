"""Pure parts of the reliability machinery: dead-letter identity, durations, delivery checks."""

from __future__ import annotations

import pytest
from celery.exceptions import Reject

from memsync.settings import Settings
from pipeline.errors import GraphUnavailable, InvalidEvent
from workers.cli.replay import parse_duration
from workers.local.services import free_port
from workers.state.deadletter import identify, letter_id, letters_for
from workers.worker import runtime
from workers.worker.config import celery_config, delivery_problems
from workers.worker.tasks import ingest


def test_sync_letters_split_per_job_with_their_own_key() -> None:
    jobs = [
        {"tenant": "acme", "event_id": "e1", "agent": {"id": "a-x", "key": "acme:a-x"}},
        {"tenant": "acme", "event_id": "e2", "agent": {"id": "a-x", "key": "acme:a-x"}},
    ]
    letters = letters_for(
        task="memsync.sync",
        queue="memsync.sync",
        stage="sync",
        payload=jobs,
        error=GraphUnavailable("down"),
        permanent=False,
        attempts=4,
        worker="w1",
    )
    assert [x.idempotency_key for x in letters] == ["acme:e1:a-x:sync", "acme:e2:a-x:sync"]
    assert [x.payload for x in letters] == [[jobs[0]], [jobs[1]]]
    assert letters[0].id == letter_id("acme:e1:a-x:sync") != letters[1].id
    assert letters[0].error_type == "GraphUnavailable" and letters[0].attempts == 4
    assert "GraphUnavailable: down" in letters[0].traceback


def test_unidentifiable_payloads_get_a_stable_content_key() -> None:
    first = identify("ingest", {"not": "an event"})
    again = identify("ingest", {"not": "an event"})
    other = identify("ingest", {"not": "the same"})
    assert first == again and first != other
    assert first["idempotency_key"].startswith("unidentified:")
    [letter] = letters_for(
        task="memsync.ingest",
        queue="memsync.ingest",
        stage="ingest",
        payload={"not": "a list"},
        error=InvalidEvent("<event>", "bad"),
        permanent=True,
        attempts=1,
        worker="",
    )
    assert letter.payload == {"not": "a list"} and letter.permanent


def test_event_letters_keep_schema_version_and_ids() -> None:
    event = {"schema_version": 2, "event_id": "e9", "tenant": "t1"}
    ident = identify("ingest", event)
    assert ident == {
        "stage": "ingest",
        "tenant": "t1",
        "event_id": "e9",
        "schema_version": 2,
        "idempotency_key": "t1:e9:ingest",
    }


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800), ("2w", 1209600)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_parse_duration_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


def test_default_delivery_settings_are_sound() -> None:
    assert delivery_problems(celery_config(Settings())) == []


def test_visibility_timeout_must_cover_task_time_and_countdown() -> None:
    conf = celery_config(
        Settings(visibility_timeout=800, task_time_limit=300, retry_backoff_max=600)
    )
    problems = delivery_problems(conf)
    assert len(problems) == 2  # broker and result-backend transport options both checked
    assert all("MEMSYNC_VISIBILITY_TIMEOUT" in p and "900" in p for p in problems)


def test_retry_settings_reach_both_tasks() -> None:
    conf = celery_config(Settings(max_retries=2, retry_backoff_max=30))
    assert conf["task_annotations"]["memsync.sync"] == {"max_retries": 2, "retry_backoff_max": 30}
    assert conf["task_annotations"]["memsync.ingest"]["max_retries"] == 2
    assert conf["broker_transport_options"]["visibility_timeout"] == 3600
    assert conf["accept_content"] == ["json"] and conf["task_acks_late"] is True


def test_unwritable_dead_letter_store_requeues_instead_of_acking() -> None:
    """With Redis unreachable the task rejects its message with requeue: it is not acked away."""
    runtime.configure(Settings(broker_url=f"redis://127.0.0.1:{free_port()}/0", broker_timeout=0.5))
    try:
        with pytest.raises(Reject) as info:
            ingest.dead_letter([{"tenant": "t", "event_id": "e1"}], InvalidEvent("x", "bad"))
        assert info.value.requeue is True  # type: ignore[attr-defined]  # missing from the stubs
    finally:
        runtime.configure(Settings())
        runtime.close()
