"""A real `memsync serve` process for integration tests: started with a token and a spool of
its own, and waited on until /v1/health answers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from memsync.settings import Settings
from workers.cli.demo import worker_env
from workers.local import services

MEMSYNC = Path(sys.executable).parent / "memsync"
START_SECONDS = 120.0


def start_serve(
    settings: Settings, root: Path, token: str
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """`memsync serve` on a free port: the process, its URL and its log (under `root`)."""
    port = services.free_port()
    env = worker_env(settings)
    env["MEMSYNC_API_TOKEN"] = token
    env["MEMSYNC_SPOOL_DIR"] = str(root / "spool")  # the server's producer spools alone
    log = root / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(MEMSYNC), "serve", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=services.PROJECT_ROOT,
        )
    return process, f"http://127.0.0.1:{port}", log


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    with httpx.Client(base_url=url, timeout=5.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"memsync serve exited:\n{log.read_text(errors='replace')}")
            try:
                if client.get("/v1/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.2)
    raise AssertionError(f"memsync serve not healthy:\n{log.read_text(errors='replace')[-3000:]}")
