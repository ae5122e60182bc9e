"""The Celery application: `celery -A workers.worker.app worker` and `memsync worker` both start it.

Configuration is applied lazily, when Celery first needs it, from the settings the entry point
installed (or from the environment then), so importing this module reads nothing.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from workers.worker import runtime
from workers.worker.config import celery_config
from workers.worker.embedding import EmbedStep
from workers.worker.exporter import ExporterStep
from workers.worker.heartbeat import HeartbeatStep
from workers.worker.reconcile import ReconcileStep
from workers.worker.sweeping import SweepStep


def _config() -> dict[str, Any]:
    return celery_config(runtime.settings())


app = Celery(
    "memsync",
    include=[
        "workers.worker.tasks",
        "workers.worker.embedding",
        "workers.worker.folding",
        "workers.worker.signals",
    ],
)
app.add_defaults(_config)
app.steps["worker"].add(ReconcileStep)
app.steps["worker"].add(SweepStep)
app.steps["worker"].add(HeartbeatStep)
app.steps["worker"].add(EmbedStep)
app.steps["worker"].add(ExporterStep)
