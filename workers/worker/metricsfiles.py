"""Where the prefork pool's metrics are kept: set up before prometheus-client is imported.

prometheus-client chooses its storage when first imported (in-process, or files shared by the
pool's children when PROMETHEUS_MULTIPROC_DIR is set), so `memsync worker` calls this before it
imports the Celery app; this module must not import prometheus-client itself.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Final

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"


def prepare_directory(configured: Path | None) -> Path:
    """Point prometheus-client's multiprocess mode at an empty directory and return it.

    Must run before prometheus-client is first imported in the process (it picks its storage
    then). A configured directory loses its metric files: an earlier run's would add their
    counts. Without one, a fresh temporary directory is made (`remove_directory` at exit).
    """
    if configured is None:
        directory = Path(tempfile.mkdtemp(prefix="memsync-metrics-"))
    else:
        directory = configured
        directory.mkdir(parents=True, exist_ok=True)
        # Only prometheus-client's own files: the directory may be shared with anything.
        for stale in directory.glob("*.db"):
            stale.unlink()
    os.environ[MULTIPROC_ENV] = str(directory)
    return directory


def remove_directory(directory: Path) -> None:
    """Delete a temporary metrics directory made by `prepare_directory`."""
    shutil.rmtree(directory, ignore_errors=True)
