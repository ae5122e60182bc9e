"""The monitor app's broker URL has the scheme Flower reads; the worker app's does not."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import urlsplit

from celery import Celery

from memsync.settings import Settings
from workers.worker.config import celery_config, monitor_config

TASK_MODULES = {"workers.worker.tasks", "workers.worker.embedding", "workers.worker.folding"}


def _scheme(config: dict[str, object]) -> str:
    app = Celery("probe", set_as_current=False)
    app.conf.update(config)
    with app.connection() as connection:
        return urlsplit(connection.as_uri()).scheme


def test_monitors_see_a_redis_url_where_workers_name_their_transport() -> None:
    settings = Settings(broker_url="redis://127.0.0.1:1/0")
    assert _scheme(celery_config(settings)) != "redis"  # the import path, which Flower refuses
    assert _scheme(monitor_config(settings)) == "redis"
    # The same queues and delivery settings otherwise.
    worker, monitor = celery_config(settings), monitor_config(settings)
    worker.pop("broker_transport")
    assert worker == monitor


def test_the_monitor_app_loads_no_task_module() -> None:
    # In a fresh interpreter: this one may have imported the tasks for other tests.
    probe = (
        "import sys, workers.worker.monitor; print(sorted(m for m in sys.modules if m in "
        f"{sorted(TASK_MODULES)!r}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
