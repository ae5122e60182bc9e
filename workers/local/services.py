"""Local Redis and Neo4j on loopback, installed from Debian and Maven Central."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

from memsync.settings import FOLD_QUEUE, INGEST_QUEUE, SYNC_QUEUE
from pipeline.errors import ConfigurationError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NEO4J_DIR = PROJECT_ROOT / "deploy" / "neo4j"
NEO4J_READY = "memsync-neo4j ready"
JAVA_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) readable by its owner only: service data holds turns."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_uid == os.getuid():  # one someone else owns was chosen deliberately
        path.chmod(0o700)
    return path


def _require_loopback(host: str) -> None:
    if host not in {"127.0.0.1", "localhost", "::1"}:
        raise ConfigurationError(f"local services bind to loopback only, not {host!r}")


# -- installation ---------------------------------------------------------------------------------


def ensure_redis() -> str:
    """Path of redis-server, installing Debian's package when it is missing and we are root."""
    found = shutil.which("redis-server")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ConfigurationError(
            "redis-server is missing; install it (apt-get install redis-server)"
        )
    apt_install("redis-server")
    found = shutil.which("redis-server")
    if not found:
        raise ConfigurationError("redis-server still missing after apt-get install")
    # Debian's package may start a system instance on 6379; ours are separate processes.
    return found


APT_LISTS = Path("/var/lib/apt/lists")
APT_LISTS_FRESH_SECONDS = 3600.0


def _apt_lists_fresh() -> bool:
    """Whether apt-get update ran within the hour (`make deps` then `make browser` on a fresh
    machine would otherwise refresh the lists twice)."""
    try:
        newest = max(f.stat().st_mtime for f in APT_LISTS.glob("*_Packages*"))
    except (OSError, ValueError):  # no lists yet
        return False
    return time.time() - newest < APT_LISTS_FRESH_SECONDS


def apt_install(*packages: str) -> None:
    """Install Debian packages (as root), refreshing the package lists first unless fresh."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not _apt_lists_fresh():
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        check=True,
        env=env,
    )


# Debian's names: the browser and the matching WebDriver (the inspector's browser test).
CHROMIUM_PACKAGES = ("chromium", "chromium-driver")


def find_chromium() -> tuple[str, str] | None:
    """Paths of Debian's chromium and chromedriver, or None unless both are there."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def ensure_chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installing Debian's packages when missing (as root)."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ConfigurationError(
            "chromium and chromedriver are missing; install them "
            "(apt-get install chromium chromium-driver)"
        )
    apt_install(*CHROMIUM_PACKAGES)
    found = find_chromium()
    if not found:
        raise ConfigurationError("chromium or chromedriver still missing after apt-get install")
    return found


def neo4j_version() -> str:
    pom = (NEO4J_DIR / "pom.xml").read_text()
    start = pom.index("<neo4j.version>") + len("<neo4j.version>")
    return pom[start : pom.index("</neo4j.version>")]


def ensure_neo4j(state_dir: Path) -> str:
    """Classpath of the embedded Neo4j launcher: jars copied by Maven, launcher compiled once."""
    if not (NEO4J_DIR / "pom.xml").is_file():
        raise ConfigurationError(f"{NEO4J_DIR} not found: local Neo4j needs a memsync checkout")
    home = state_dir / "neo4j" / neo4j_version()
    lib, classes = home / "lib", home / "classes"
    marker = lib / ".complete"
    if not marker.exists():
        lib.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "mvn", "-B", "-q", "-f", str(NEO4J_DIR / "pom.xml"),
                "dependency:copy-dependencies", f"-DoutputDirectory={lib}",
                "-DincludeScope=runtime",
            ],
            check=True,
        )  # fmt: skip
        marker.touch()
    source = NEO4J_DIR / "Launcher.java"
    compiled = classes / "Launcher.class"
    if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-d", str(classes), "-cp", f"{lib}/*", str(source)],
            check=True,
        )
    return f"{classes}{os.pathsep}{lib}/*"


# -- processes ------------------------------------------------------------------------------------


@dataclass
class Service:
    """A started local service: its process, address and log file."""

    name: str
    host: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self, timeout: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start_redis(
    host: str, port: int, data_dir: Path, *, aof: bool = False, detach: bool = False
) -> Service:
    """Start redis-server on loopback and wait until it answers commands (an open port is not
    enough: while it replays its AOF, Redis refuses every command with LOADING)."""
    _require_loopback(host)
    binary = ensure_redis()
    private_dir(data_dir)
    log_path = data_dir / "redis.log"
    args = [
        binary, "--bind", host, "--port", str(port), "--dir", str(data_dir),
        "--protected-mode", "yes", "--daemonize", "no", "--save", "",
        "--appendonly", "yes" if aof else "no", "--appendfsync", "everysec",
        "--logfile", str(log_path),
    ]  # fmt: skip
    process = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=detach,
    )
    service = Service("redis", host, port, process, log_path)
    _wait(service, lambda: redis_ready(host, port), timeout=60)
    return service


def redis_ready(host: str, port: int) -> bool:
    """True once Redis answers PING (False while it is down or still loading its data)."""
    client = redis.Redis(host=host, port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def start_neo4j(
    host: str,
    port: int,
    data_dir: Path,
    state_dir: Path,
    *,
    heap_mb: int = 1024,
    page_cache_mb: int = 384,
    detach: bool = False,
) -> Service:
    """Start the embedded Neo4j launcher with Bolt on loopback and wait for its ready line."""
    _require_loopback(host)
    classpath = ensure_neo4j(state_dir)
    private_dir(data_dir)
    log_path = data_dir / "launcher.log"
    args = [
        "java", f"-Xms{min(heap_mb, 512)}m", f"-Xmx{heap_mb}m", "-XX:+UseG1GC", *JAVA_OPENS,
        "-cp", classpath, "Launcher",
        "--data", str(data_dir / "db"), "--host", host, "--port", str(port),
        "--page-cache-mb", str(page_cache_mb),
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, start_new_session=detach
        )
    service = Service("neo4j", host, port, process, log_path)
    _wait(service, lambda: NEO4J_READY in service.log_tail(200), timeout=180)
    return service


def _wait(service: Service, ready: object, timeout: float) -> None:
    assert callable(ready)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if service.process.poll() is not None:
            raise ConfigurationError(
                f"{service.name} exited with {service.process.returncode} while starting:\n"
                f"{service.log_tail()}"
            )
        time.sleep(0.2)
    service.kill()
    raise ConfigurationError(
        f"{service.name} not ready after {timeout:.0f}s:\n{service.log_tail()}"
    )


def start_worker(
    env: dict[str, str],
    log_path: Path,
    *,
    concurrency: int = 2,
    name: str = "memsync",
    detach: bool = False,
    queues: Sequence[str] = (INGEST_QUEUE, SYNC_QUEUE, FOLD_QUEUE),
) -> Service:
    """Start a real `celery worker` process on these queues (by default ingest, sync and fold) and
    wait until it is ready."""
    args = [
        sys.executable, "-m", "celery", "-A", "workers.worker.app", "worker",
        "-Q", ",".join(queues), "-c", str(concurrency), "-n", f"{name}@%h",
        "--loglevel", "INFO", "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=PROJECT_ROOT,
            start_new_session=detach,
        )
    service = Service("worker", "", 0, process, log_path)
    _wait(service, lambda: " ready." in service.log_tail(400), timeout=120)
    return service
