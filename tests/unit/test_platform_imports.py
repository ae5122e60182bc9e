"""A platform that imports memsync to emit loads nothing of the worker side.

Checked in a fresh interpreter, since this test session has long imported Celery and workers/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WORKER_SIDE = (
    "celery",
    "workers",
    "workers.worker.app",
    "workers.worker.tasks",
    "pipeline.extract",
    "pipeline.english.rules",
    "dateparser",
    "neo4j",
    # The HTTP API is an optional extra: emitting must work without it installed.
    "fastapi",
    "uvicorn",
    "starlette",
    "memsync.http",
)

# Port 1 refuses connections at once: the batch is spooled after a real publish attempt, so the
# modules a publish loads (kombu's Redis transport, the message builder) are loaded too.
SCRIPT = """
import json, sys
from pathlib import Path
import memsync

event = {
    "schema_version": 1,
    "event_id": "evt-platform",
    "tenant": "acme",
    "channel": {"id": "ch-1", "kind": "dm"},
    "participants": [
        {"id": "u-1", "kind": "human", "display_name": "Devon", "handle": "devon"},
        {"id": "a-1", "kind": "agent", "display_name": "Travel", "handle": "travel"},
    ],
    "messages": [
        {"id": "m-1", "role": "human", "sender_id": "u-1", "content": "window seats please",
         "created_at": "2026-11-29T10:00:00Z"},
    ],
}
settings = memsync.Settings(
    broker_url="redis://127.0.0.1:1/0", spool_dir=Path(sys.argv[1]), publish_timeout=0.5
)
producer = memsync.Producer(settings)
emitted = producer.emit(event)
flushed = producer.close(timeout=30)
print(json.dumps({
    "emitted": emitted,
    "flushed": flushed,
    "spooled": producer.spool_status().events,
    "failures": producer.counters["publish_failures"],
    "modules": sorted(sys.modules),
}))
"""


def test_emitting_through_memsync_loads_nothing_of_the_worker_side(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "spool")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["emitted"] == "evt-platform"
    assert report["flushed"] is True
    # The publish was attempted and failed, so the publishing path ran before the check below.
    assert report["failures"] >= 1
    assert report["spooled"] == 1
    loaded = set(report["modules"])
    assert sorted(name for name in WORKER_SIDE if name in loaded) == []
    assert sorted(name for name in loaded if name.split(".")[0] in {"celery", "workers"}) == []


def test_memsync_exports_the_platform_api() -> None:
    import memsync

    assert {"Producer", "Settings", "emit_turn"} <= set(memsync.__all__)
    for name in memsync.__all__:
        assert getattr(memsync, name) is not None


READING_SCRIPT = """
import json, sys
import memsync
plain = sorted(sys.modules)
import memsync.reading, pipeline.graph.context, pipeline.graph.search
print(json.dumps({"plain": plain, "reading": sorted(sys.modules)}))
"""


def test_reading_through_memsync_loads_nothing_of_the_worker_side() -> None:
    done = subprocess.run(
        [sys.executable, "-c", READING_SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # `import memsync` alone defers the graph side (the Neo4j driver) to the first read...
    assert "neo4j" not in report["plain"]
    # ...and the read side, once loaded, brings in no Celery, worker or extraction module.
    loaded = set(report["reading"])
    assert "neo4j" in loaded
    assert sorted(name for name in WORKER_SIDE if name != "neo4j" and name in loaded) == []
    assert sorted(name for name in loaded if name.split(".")[0] in {"celery", "workers"}) == []
    import memsync

    assert {"recall", "arecall", "build_context", "abuild_context", "Memory"} <= set(
        memsync.__all__
    )
