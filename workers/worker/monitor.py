"""The Celery app monitors attach to: `celery -A workers.worker.monitor flower`.

Flower reads queue lengths by the broker URL's scheme, which memsync's own transport (named by
import path) hides; this app carries the same queues and settings on kombu's Redis transport,
and defines no tasks, so a monitor never loads them.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from workers.worker import runtime
from workers.worker.config import monitor_config


def _config() -> dict[str, Any]:
    return monitor_config(runtime.settings())


app = Celery("memsync")
app.add_defaults(_config)
