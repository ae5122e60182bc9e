"""The one settings object, read from MEMSYNC_* variables when an entry point builds it."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from platformdirs import user_data_dir
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

INGEST_QUEUE = "memsync.ingest"
SYNC_QUEUE = "memsync.sync"
# Embedding and summary folding run on their own queues (and workers), never on the sync path.
EMBED_QUEUE = "memsync.embed"
FOLD_QUEUE = "memsync.fold"
TASK_QUEUES = frozenset({INGEST_QUEUE, SYNC_QUEUE, EMBED_QUEUE, FOLD_QUEUE})


def _default_state_dir() -> Path:
    # In a checkout, local services live beside the code (git-ignored); else in the data dir.
    root = Path(__file__).resolve().parents[1]
    if (root / "deploy" / "neo4j" / "pom.xml").is_file():
        return root / ".memsync"
    return Path(user_data_dir("memsync"))


def _default_spool_dir() -> Path:
    return Path(user_data_dir("memsync")) / "spool"


class Settings(BaseSettings):
    """Everything memsync can be told, with defaults for a single machine."""

    model_config = SettingsConfigDict(env_prefix="MEMSYNC_", extra="ignore")

    broker_url: str = "redis://127.0.0.1:6379/0"
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr | None = None
    neo4j_database: str = "neo4j"
    trust_mode: Literal["strict", "open"] = "strict"
    extractor: Literal["rules", "llm"] = "rules"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout: float = Field(default=30.0, gt=0)
    llm_requests_per_second: float = Field(default=5.0, gt=0)
    lenses_file: Path | None = None
    spool_dir: Path = Field(default_factory=_default_spool_dir)
    state_dir: Path = Field(default_factory=_default_state_dir)

    # Producer: a bounded buffer and short socket timeouts so emit() never waits on the network.
    producer_buffer: int = Field(default=10_000, ge=1)
    producer_batch: int = Field(default=50, ge=1, le=1000)
    # Seconds the publisher waits for a batch to fill before sending what it has (emit() never
    # waits): at a steady rate, batches of turns rather than one-turn tasks.
    producer_linger: float = Field(default=0.05, ge=0, le=5)
    broker_timeout: float = Field(default=5.0, gt=0)

    # Workers.
    worker_concurrency: int = Field(default=2, ge=1)
    task_time_limit: int = Field(default=300, ge=10)
    visibility_timeout: int = Field(default=3600, ge=10)
    restore_interval: int = Field(default=10, ge=1)
    # Cost control (pipeline/activity.py): when set, an agent whose latest message in a channel
    # is older than this many seconds (by message time) gets no memory of the channel's turns
    # until it speaks again; each skip is counted (fanout.idle) and audited. Off by default.
    sync_idle_seconds: float | None = Field(default=None, gt=0)
    # A worker that takes both ingest and sync tasks writes an ingest batch's memories in the
    # ingest task itself instead of sending them on as a sync task (which is still sent if that
    # write fails); a worker on the ingest queue alone always sends them on.
    sync_in_ingest: bool = True
    # A turn unsettled this long after it was sent is sent again (see workers/worker/reconcile.py).
    reconcile_after: int = Field(default=4000, ge=5)
    reconcile_interval: int = Field(default=60, ge=1)
    # Worker liveness (workers/worker/heartbeat.py): each worker renews a key every interval that
    # expires after the TTL; a worker silent that long is dead, and its unacked messages go
    # back to their queues at the next sweep (TTL + one interval after a kill, not the
    # visibility timeout). The TTL must be at least twice the interval.
    heartbeat_interval: float = Field(default=10.0, ge=0.5)
    heartbeat_ttl: int = Field(default=30, ge=2)
    # A consumer that received nothing this long while its queues held messages and it had
    # room for more is deaf (e.g. after a broker restart) and is made to reconnect.
    consumer_deaf_after: float = Field(default=30.0, ge=1)
    max_retries: int = Field(default=8, ge=0)
    retry_backoff_max: int = Field(default=600, ge=1)
    names_cache_seconds: float = Field(default=300.0, ge=0)
    trust_cache_seconds: float = Field(default=30.0, ge=0)
    # Entries per worker process (least recently used evicted), so memory stays bounded.
    names_cache_size: int = Field(default=10_000, ge=1)
    trust_cache_size: int = Field(default=10_000, ge=1)
    neo4j_retry_seconds: float = Field(default=30.0, ge=0)
    neo4j_connect_timeout: float = Field(default=10.0, gt=0)

    # Read side: `minilm` (a transformer, about 80 texts/s), `wordllama` (static, thousands a
    # second, weaker meaning) or `none` (embeddings off: recall is then keyword-only).
    embedder: Literal["minilm", "wordllama", "none"] = "minilm"
    embed_batch: int = Field(default=256, ge=1, le=4096)
    # How many embed tasks may drain the backlog at once, across the cluster (each claims the
    # nodes it embeds): one per embed worker process is the useful most.
    embed_drainers: int = Field(default=8, ge=1, le=256)
    # Episode vectors that know their conversation (pipeline/graph/contextvectors.py): each
    # message is embedded with the pairs it forms with its neighbours, two embeddings a message.
    # Off: one embedding a message, each on its own (faster embedding, weaker recall).
    embed_context: bool = True
    # A reader's queries run MiniLM with int8 weights (pipeline/minilmgraph.py): about three
    # times as fast, the vector within about 0.01 of the float one in cosine. Stored vectors
    # are as the embed workers make them (below). False: queries in float as well.
    quantized_queries: bool = True
    # Embed workers run MiniLM with int8 weights too: about twice the texts a second, the
    # same rankings on the recall benchmarks; vectors are stored under the model name
    # "...+int8" (recall compares them with float ones; `memsync graph reembed` makes every
    # vector one kind). Off by default: stored vectors stay as they were.
    embed_quantized: bool = False
    # Whether facts and commitments learnt in a direct message may surface in another channel:
    # `never` (the default), or `same_people` (only when everyone in that channel, the agent
    # aside, was in the DM: the rule group-learnt memory always follows).
    dm_memory_policy: Literal["never", "same_people"] = "never"
    # A long-lived reader (the memsync package's Memory, `memsync serve`) keeps the vectors of
    # the agents it recalls for in memory, up to this many MB, so recall's cosine is one matrix
    # product instead of Neo4j reading each vector (pipeline/graph/vectorcache.py). 0: off.
    recall_vector_cache_mb: int = Field(default=512, ge=0)
    # A long-lived reader's MiniLM remembers the vectors of its latest this-many distinct query
    # texts: agents building context for the same message embed it once (a query costs 2-12 ms
    # of CPU, by core). 0: off.
    recall_query_vectors: int = Field(default=256, ge=0)
    # Rolling summaries: unsummarised episodes past this many tokens fold their oldest half into
    # the channel summary; every `summary_reanchor_every` folds it is rebuilt from the raw
    # episodes of the last `summary_reanchor_tokens` tokens it covers, so a re-anchor's cost (an
    # LLM summarizer's calls: about that over `summary_fold_tokens`) does not grow with the channel.
    summarizer: Literal["extractive", "llm"] = "extractive"
    summary_fold_tokens: int = Field(default=2000, ge=100)
    summary_max_tokens: int = Field(default=600, ge=50)
    summary_reanchor_every: int = Field(default=8, ge=1)
    summary_reanchor_tokens: int = Field(default=64000, ge=100)
    # Retention (pipeline/graph/retention.py): raw episodes older than this many days go once no
    # memory cites them and every observer's summary covers them (None: kept for ever). The
    # sweep also deletes expired facts; workers run it every `sweep_interval` seconds (0: off).
    episode_retention_days: float | None = Field(default=None, gt=0)
    sweep_interval: int = Field(default=3600, ge=0)
    # HTTP API (`memsync serve`): loopback unless told; a bearer token is required off loopback.
    serve_host: str = "127.0.0.1"
    serve_port: int = Field(default=8077, ge=1, le=65535)
    api_token: SecretStr | None = None

    # Observability: each worker serves /metrics, /livez and /readyz on this port (None: off;
    # 0: any free port, logged). The first `metrics_tenants` tenants a process sees get their
    # own metric label, the rest count as "other", so a label's values stay bounded.
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    metrics_dir: Path | None = None
    metrics_tenants: int = Field(default=20, ge=0, le=1000)
    log_format: Literal["text", "json"] = "text"
    # OpenTelemetry traces (the `tracing` extra): the producer's publish, each task and its
    # stages, one trace per batch. Exporter settings are OpenTelemetry's own OTEL_* variables.
    tracing: bool = False

    # Producer spool: where events wait while the broker is away.
    spool_max_events: int = Field(default=100_000, ge=1)
    spool_max_bytes: int = Field(default=512 * 1024 * 1024, ge=1024)
    publish_timeout: float = Field(default=2.0, gt=0)

    # Dead-letter store (workers/state/deadletter.py): past the cap the oldest entries are evicted;
    # with a TTL older ones are dropped (None keeps them until purged); larger payloads are
    # kept truncated and cannot be replayed (the default keeps every valid event whole).
    dlq_max_entries: int = Field(default=100_000, ge=1)
    dlq_ttl_seconds: float | None = Field(default=None, gt=0)
    dlq_payload_max_bytes: int = Field(default=2_200_000, ge=1024)

    # Local services (`memsync services`, the demo, the tests).
    neo4j_heap_mb: int = Field(default=1024, ge=256)
    neo4j_page_cache_mb: int = Field(default=384, ge=64)

    @property
    def neo4j_password_value(self) -> str | None:
        return self.neo4j_password.get_secret_value() if self.neo4j_password else None

    def as_env(self) -> dict[str, str]:
        """These settings as MEMSYNC_* variables, for a child process (a worker) to read back."""
        env: dict[str, str] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            env[f"MEMSYNC_{name.upper()}"] = str(value)
        return env

    def broker_address(self) -> tuple[str, int]:
        parts = urlsplit(self.broker_url)
        return parts.hostname or "127.0.0.1", parts.port or 6379

    def neo4j_address(self) -> tuple[str, int]:
        parts = urlsplit(self.neo4j_uri)
        return parts.hostname or "127.0.0.1", parts.port or 7687


# The test suite's own variables (MEMSYNC_TEST_BROKER_URL...) share the prefix but are no settings.
_NOT_SETTINGS_PREFIX = "MEMSYNC_TEST_"


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """MEMSYNC_* variables that name no setting, each with the closest real name (or None).

    Settings ignores unknown variables, so a misspelt one would otherwise be dropped silently.
    """
    known = sorted(f"MEMSYNC_{name.upper()}" for name in Settings.model_fields)
    found: list[tuple[str, str | None]] = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith("MEMSYNC_") or upper.startswith(_NOT_SETTINGS_PREFIX):
            continue
        if upper not in known:
            close = difflib.get_close_matches(upper, known, n=1, cutoff=0.6)
            found.append((name, close[0] if close else None))
    return found
