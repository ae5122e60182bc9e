"""The chaos driver: a private cluster, a steady producer process, seeded random faults, then an
exact audit of what the graph and the ledger hold against what the pure stages say they must.

Faults, one every 20-40 s (sometimes two at once): kill -9 of a worker's process group (then a
replacement), SIGSTOP of Neo4j for 5-15 s, Redis stopped and restarted on its AOF data, kill -9
of the producer (then a restart on the same spool, resuming the same stream). Any process that
exits without the schedule having killed it is an unplanned death: a failure, never replaced.
Delivery settings are the defaults; only addresses, the spool and the trust mode differ.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import redis

from memsync.settings import Settings
from tests.chaos import emitter, stream
from tests.integration.cluster import Cluster
from tests.integration.load import audit, expected_observed
from workers.cli.demo import worker_env
from workers.local import services
from workers.state.deadletter import DeadLetterStore
from workers.state.ledger import Ledger, TurnStatus

ROOT = Path(__file__).resolve().parents[2]
REPORT_FILE = ROOT / ".memsync" / "chaos-report.txt"
WORKERS = 2
KINDS = ("worker", "neo4j", "redis", "producer")
DOUBLE_CHANCE = 0.2
POLL = 0.5
EMITTER_START_TIMEOUT = 120.0
STATUS_POLL = 2.0
WORKER_STOP_TIMEOUT = 30.0
PY_SPY = Path(sys.executable).with_name("py-spy")
# Lines a worker writes when a pool child dies under it (nothing in the schedule does that:
# a group kill takes parent and children together).
CHILD_DEATH = re.compile(
    r"WorkerLostError|exited with 'signal|exited with 'exitcode|Hard time limit"
)


@dataclass(frozen=True)
class ChaosConfig:
    minutes: float
    seed: int
    root: Path
    rate: float = 20.0
    gap: tuple[float, float] = (20.0, 40.0)
    stop_seconds: tuple[float, float] = (5.0, 15.0)
    settle_timeout: float = 600.0


@dataclass
class Tracked:
    """A process the run watches: it may only exit when the schedule ends it."""

    role: str
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    planned: bool = False
    reported: bool = False


@dataclass
class ChaosResult:
    config: ChaosConfig
    faults: Counter[str] = field(default_factory=Counter)
    doubles: int = 0
    turns: int = 0
    reemitted: int = 0
    pairs: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    unsettled: int = 0
    dead_before_replay: int = 0
    dead_after_replay: int = 0
    unplanned: list[str] = field(default_factory=list)
    fault_errors: list[str] = field(default_factory=list)
    recovery_after_fault: float | None = None
    recovery_after_emit: float | None = None
    schedule_seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return (
            self.turns > 0
            and self.lost == self.duplicated == self.unexpected == self.unsettled == 0
            and self.dead_after_replay == 0
            and not self.unplanned
            and not self.fault_errors
        )

    def figures(self) -> str:
        c = self.config
        kinds = ", ".join(f"{k} {self.faults[k]}" for k in KINDS)
        recovery = (
            "never (unsettled turns)"
            if self.recovery_after_fault is None
            else f"{self.recovery_after_fault:.1f}s after the last fault began "
            f"({self.recovery_after_emit or 0:.1f}s after the last emit)"
        )
        lines = [
            f"chaos {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} seed={c.seed} minutes={c.minutes:g} "
            f"rate={c.rate:g}/s, default delivery settings, {WORKERS} workers x 2 processes",
            f"  faults: {sum(self.faults.values())} ({kinds}; {self.doubles} double) over "
            f"{self.schedule_seconds:.0f}s",
            f"  turns: {self.turns} ({self.reemitted} re-emitted after producer kills), "
            f"agent-episode pairs expected: {self.pairs}",
            f"  lost {self.lost}, duplicated {self.duplicated}, unexpected {self.unexpected}, "
            f"unsettled {self.unsettled}",
            f"  dead letters: {self.dead_before_replay} before replay, "
            f"{self.dead_after_replay} after",
            f"  unplanned deaths: {len(self.unplanned)}; fault errors: {len(self.fault_errors)}",
            *(f"    - {x}" for x in self.unplanned + self.fault_errors),
            f"  recovery: every turn written {recovery}",
            f"  verdict: {'CLEAN' if self.clean else 'FAILED'}",
        ]
        return "\n".join(lines)


class Chaos:
    """One run: start everything, run the schedule, settle, replay once, audit."""

    def __init__(self, config: ChaosConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.result = ChaosResult(config)
        self.cluster = Cluster(config.root)
        base = self.cluster.settings
        self.cluster.settings = Settings(
            broker_url=base.broker_url,
            neo4j_uri=base.neo4j_uri,
            spool_dir=base.spool_dir,
            trust_mode="open",  # the synthetic speakers have no owners or grants
        )
        self.settings = self.cluster.settings
        self.tenant = stream.tenant_for(config.seed)
        self.state = config.root / "emitter"
        self.tracked: list[Tracked] = []
        self.lock = threading.Lock()
        self.emitter: Tracked | None = None
        self.emitter_starts = 0
        self.last_fault_at = 0.0  # wall clock, when the last fault began
        self.neo4j_stopped = False

    # -- processes ----------------------------------------------------------------------------

    def track(self, role: str, service: services.Service, name: str) -> None:
        with self.lock:
            self.tracked.append(Tracked(role, name, service.process, service.log_path))

    def planned_end(self, process: subprocess.Popen[bytes]) -> None:
        """Mark a process as ended by the schedule, before the signal is sent."""
        with self.lock:
            for t in self.tracked:
                if t.process is process:
                    t.planned = True

    def check_deaths(self) -> None:
        with self.lock:
            for t in self.tracked:
                if t.planned or t.reported or t.process.poll() is None:
                    continue
                t.reported = True
                tail = services.Service(t.role, "", 0, t.process, t.log_path).log_tail(15)
                self.result.unplanned.append(
                    f"{t.role} {t.name} (pid {t.process.pid}) exited with "
                    f"{t.process.returncode}; log {t.log_path}:\n{tail}"
                )

    def start_worker(self) -> None:
        worker = self.cluster.start_worker()
        self.track("worker", worker, f"fault-{len(self.cluster.workers) - 1}")

    def start_redis(self) -> None:
        self.cluster.start_redis()
        assert self.cluster.redis is not None
        self.track("redis", self.cluster.redis, "redis")

    def start_emitter(self) -> None:
        self.emitter_starts += 1
        log_path = self.config.root / f"emitter-{self.emitter_starts}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "tests.chaos.emitter", "--seed", str(self.config.seed),
                    "--rate", str(self.config.rate), "--state", str(self.state),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=worker_env(self.settings),
                cwd=ROOT,
                start_new_session=True,  # its own group, so kill -9 takes it whole
            )  # fmt: skip
        self.emitter = Tracked("producer", f"emitter-{self.emitter_starts}", process, log_path)
        with self.lock:
            self.tracked.append(self.emitter)
        # Until its SIGTERM handler is installed a SIGTERM would kill it mid-stream: the end of
        # the schedule must not catch a producer restarted just before it still starting.
        deadline = time.monotonic() + EMITTER_START_TIMEOUT
        while emitter.READY not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the producer did not start: {log_path.read_text()!r}")
            time.sleep(0.1)

    # -- faults -------------------------------------------------------------------------------

    def kill_worker(self) -> None:
        live = [w for w in self.cluster.workers if w.process.poll() is None]
        victim = self.rng.choice(live)
        self.planned_end(victim.process)
        self.cluster.kill_worker(victim)
        self.start_worker()

    def stop_neo4j(self, seconds: float) -> None:
        assert self.cluster.neo4j is not None
        pid = self.cluster.neo4j.process.pid
        os.kill(pid, signal.SIGSTOP)
        self.neo4j_stopped = True
        try:
            time.sleep(seconds)  # the fault's length, drawn from the schedule
        finally:
            os.kill(pid, signal.SIGCONT)
            self.neo4j_stopped = False

    def restart_redis(self) -> None:
        assert self.cluster.redis is not None
        self.planned_end(self.cluster.redis.process)
        self.cluster.stop_redis()
        self.start_redis()

    def kill_producer(self) -> None:
        assert self.emitter is not None
        victim = self.emitter
        self.planned_end(victim.process)
        os.killpg(victim.process.pid, signal.SIGKILL)
        victim.process.wait(10)
        # Turns emitted after the last checkpoint are emitted again by the next incarnation.
        self.result.reemitted += emitter.emitted_high_water(self.state) - emitter.read_checkpoint(
            self.state
        )
        self.start_emitter()

    def fault(self, kind: str) -> Callable[[], None]:
        if kind == "worker":
            return self.kill_worker
        if kind == "redis":
            return self.restart_redis
        if kind == "producer":
            return self.kill_producer
        seconds = self.rng.uniform(*self.config.stop_seconds)
        return lambda: self.stop_neo4j(seconds)

    def inject(self, kinds: list[str]) -> list[threading.Thread]:
        self.last_fault_at = time.time()
        threads = []
        for kind in kinds:
            self.result.faults[kind] += 1
            action = self.fault(kind)

            def run(action: Callable[[], None] = action, kind: str = kind) -> None:
                try:
                    action()
                except Exception as exc:  # recorded: a fault the cluster could not recover from
                    self.result.fault_errors.append(f"{kind}: {type(exc).__name__}: {exc}")

            thread = threading.Thread(target=run, name=f"fault-{kind}", daemon=True)
            thread.start()
            threads.append(thread)
        print(f"[chaos] {time.strftime('%H:%M:%S')} fault: {' + '.join(kinds)}", flush=True)
        return threads

    def watch_while(self, threads: list[threading.Thread], until: float) -> None:
        """Check for unplanned deaths until `until` has passed and the threads have ended."""
        while time.monotonic() < until or any(t.is_alive() for t in threads):
            self.check_deaths()
            time.sleep(POLL)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> ChaosResult:
        try:
            self.start_everything()
            self.schedule()
            self.finish()
        finally:
            self.teardown()
        return self.result

    def start_everything(self) -> None:
        self.start_redis()
        self.cluster.start_neo4j()
        assert self.cluster.neo4j is not None
        self.track("neo4j", self.cluster.neo4j, "neo4j")
        self.cluster.init_graph()
        for _ in range(WORKERS):
            self.start_worker()
        self.start_emitter()

    def schedule(self) -> None:
        started = time.monotonic()
        end = started + self.config.minutes * 60
        while True:
            at = time.monotonic() + self.rng.uniform(*self.config.gap)
            if at > end:
                break
            kinds = [self.rng.choice(KINDS)]
            if self.rng.random() < DOUBLE_CHANCE:
                kinds.append(self.rng.choice([k for k in KINDS if k != kinds[0]]))
                self.result.doubles += 1
            self.watch_while([], at)
            self.watch_while(self.inject(kinds), 0)
        self.watch_while([], end)
        self.result.schedule_seconds = time.monotonic() - started

    def stop_emitter(self) -> float:
        """SIGTERM the producer and wait for its clean exit; returns the wall time it stopped."""
        assert self.emitter is not None
        victim = self.emitter
        self.planned_end(victim.process)
        victim.process.send_signal(signal.SIGTERM)
        try:
            code = victim.process.wait(emitter.DRAIN_TIMEOUT + 120)
        except subprocess.TimeoutExpired:
            victim.process.kill()
            code = victim.process.wait(10)
        if code != 0:
            tail = services.Service("producer", "", 0, victim.process, victim.log_path).log_tail()
            self.result.unplanned.append(f"producer did not stop cleanly (exit {code}):\n{tail}")
        return time.time()

    def finish(self) -> None:
        last_emit = self.stop_emitter()
        count = emitter.read_checkpoint(self.state)
        high = emitter.emitted_high_water(self.state)
        if high != count:
            self.result.fault_errors.append(f"emitted up to {high} but checkpointed {count}")
        self.result.turns = count
        turns = stream.turns(self.config.seed, count)
        expected = expected_observed(turns)
        self.result.pairs = len(expected)
        client = redis.Redis.from_url(self.settings.broker_url)
        ledger = Ledger(client)
        store = DeadLetterStore(client)
        keys = [(self.tenant, stream.event_id(i)) for i in range(count)]

        statuses = self.wait_settled(ledger, keys, complete=False)
        letters = [x for x in store.entries() if x.tenant == self.tenant]
        self.result.dead_before_replay = len(letters)
        if letters:
            replay = subprocess.run(
                [sys.executable, "-m", "workers.cli.main", "dlq", "replay", "--all"],
                env=worker_env(self.settings),
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                cwd=ROOT,
            )
            if replay.returncode != 0:
                self.result.fault_errors.append(f"dlq replay failed: {replay.stderr.strip()}")
            statuses = self.wait_settled(ledger, keys, complete=True)
        done_at = time.time()
        if all(s.complete for s in statuses):
            self.result.recovery_after_fault = done_at - self.last_fault_at
            self.result.recovery_after_emit = done_at - last_emit
        self.result.unsettled = sum(1 for s in statuses if not s.complete)
        self.result.dead_after_replay = sum(1 for x in store.entries() if x.tenant == self.tenant)
        client.close()

        found = audit(self.cluster.graph(), self.tenant, expected)
        self.result.lost = found.lost
        self.result.duplicated = found.duplicated
        self.result.unexpected = found.unexpected
        self.check_deaths()
        self.check_worker_logs()

    def wait_settled(
        self, ledger: Ledger, keys: list[tuple[str, str]], *, complete: bool
    ) -> list[TurnStatus]:
        """Poll the ledger until every turn is complete (or finished), or the deadline passes."""
        deadline = time.monotonic() + self.config.settle_timeout
        while True:
            self.check_deaths()
            statuses = ledger.statuses(keys)
            if all(s.complete if complete else s.finished for s in statuses):
                return statuses
            if time.monotonic() > deadline:
                return statuses
            time.sleep(STATUS_POLL)

    def check_worker_logs(self) -> None:
        for t in self.tracked:
            if t.role != "worker":
                continue
            text = t.log_path.read_text(errors="replace") if t.log_path.exists() else ""
            for line in text.splitlines():
                if CHILD_DEATH.search(line):
                    self.result.unplanned.append(f"worker {t.name} pool child: {line.strip()}")

    def teardown(self) -> None:
        if self.neo4j_stopped and self.cluster.neo4j is not None:
            os.kill(self.cluster.neo4j.process.pid, signal.SIGCONT)
        if self.emitter is not None and self.emitter.process.poll() is None:
            self.planned_end(self.emitter.process)
            self.emitter.process.kill()
            self.emitter.process.wait(10)
        live_workers = [w for w in self.cluster.workers if w.process.poll() is None]
        for t in self.tracked:
            self.planned_end(t.process)
        for worker in live_workers:
            worker.process.send_signal(signal.SIGTERM)
        for worker in live_workers:
            try:
                worker.process.wait(WORKER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                # A hung warm shutdown is the symptom; where each process is stuck is the cause.
                self.result.unplanned.append(
                    f"worker pid {worker.process.pid} still running {WORKER_STOP_TIMEOUT:g}s "
                    f"after SIGTERM; stacks:\n{stacks(worker.process.pid)}"
                )
                worker.process.kill()
                worker.process.wait(10)
        self.cluster.stop()
        for worker in live_workers:
            if worker.process.returncode != 0:
                self.result.unplanned.append(
                    f"worker pid {worker.process.pid} exited {worker.process.returncode} on a "
                    f"clean stop (expected 0):\n{worker.log_tail(15)}"
                )


def stacks(pid: int) -> str:
    """Python stacks of a process and its children, for a report on a hang (needs py-spy)."""
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(c) for c in children.read_text().split()]
    dumps = []
    for p in pids:
        dumps.append(thread_states(p))
        try:
            out = subprocess.run(
                [str(PY_SPY), "dump", "--native", "--pid", str(p)],
                check=False,
                capture_output=True,
                text=True,
                timeout=30,
            )
            dumps.append(out.stdout or out.stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
            dumps.append(f"pid {p}: no stack ({exc!r})")
    return "\n".join(dumps)


def thread_states(pid: int) -> str:
    """Each thread's kernel state and wait channel: a stopped, a GIL-starved and a sleeping
    thread look alike in a Python stack."""
    lines = [f"pid {pid} threads (tid state wchan):"]
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            stat = (task / "stat").read_text()
            state = stat[stat.rindex(")") + 2 :].split()[0]
            wchan = (task / "wchan").read_text().strip() or "-"
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        lines.append(f"  {task.name} {name} {state} {wchan}")
    return "\n".join(lines)


def report(result: ChaosResult) -> str:
    """The figures block, also appended to .memsync/chaos-report.txt."""
    text = result.figures()
    REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
    with REPORT_FILE.open("a") as out:
        out.write(text + "\n\n")
    return text


def run_chaos(config: ChaosConfig) -> ChaosResult:
    result = Chaos(config).run()
    print(report(result), flush=True)
    return result
