"""Per-process resources (settings, Neo4j driver, Redis client, caches), made after fork."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

import redis

from memsync.settings import Settings
from memsync.tracing import Tracing, available
from pipeline.errors import ConfigurationError
from pipeline.extract import Extractor, RulesExtractor
from pipeline.graph.directory import lookup_trust
from pipeline.graph.reader import label_owners as reader_label_owners
from pipeline.graph.reader import lookup_participants
from pipeline.graph.store import GraphStore
from pipeline.lens import BUILTIN_LENSES, Lens, parse_lenses
from pipeline.trust import DirectoryTrustPolicy, TrustPolicy, trusters
from schemas.event import TurnEvent
from schemas.records import KnownParticipant, LabelKey, TrustEntry
from workers.state.activity import ActivityLog
from workers.state.deadletter import DeadLetterStore
from workers.state.ledger import Ledger
from workers.worker.cache import TTLCache
from workers.worker.llm import LLMExtractor, RateLimit

if TYPE_CHECKING:
    from workers.worker.metrics import TenantLabels

_lock = threading.Lock()
_settings: Settings | None = None
_graph: GraphStore | None = None
_graph_pid: int | None = None
_redis: redis.Redis | None = None
_redis_pid: int | None = None
# Bounded and expiring; their size and lifetime are applied from settings on every use.
_names: TTLCache[str, KnownParticipant] = TTLCache(10_000, 300.0)
_trust: TTLCache[str, TrustEntry] = TTLCache(10_000, 30.0)
_lenses: dict[str, Lens] | None = None
_extractor: Extractor | None = None
_tenant_labels: TenantLabels | None = None
_tracing: Tracing | None = None
V = TypeVar("V")


def configure(settings: Settings) -> None:
    """Install the settings an entry point built; resources are rebuilt from them on next use."""
    global _settings
    with _lock:
        if _settings == settings:
            return
        _settings = settings
    close()
    reset()


def settings() -> Settings:
    global _settings
    with _lock:
        if _settings is None:
            _settings = Settings()
        return _settings


def graph() -> GraphStore:
    """This process's Neo4j driver; a forked child never reuses its parent's sockets."""
    global _graph, _graph_pid
    s = settings()
    with _lock:
        if _graph is not None and _graph.broken and _graph_pid == os.getpid():
            with contextlib.suppress(Exception):  # it is being discarded because it is broken
                _graph.close()
            _graph = None
        if _graph is None or _graph_pid != os.getpid():
            _graph = GraphStore.connect(
                s.neo4j_uri,
                s.neo4j_user,
                s.neo4j_password_value,
                s.neo4j_database,
                max_transaction_retry_time=s.neo4j_retry_seconds,
                connection_timeout=s.neo4j_connect_timeout,
            )
            _graph_pid = os.getpid()
        return _graph


def redis_client() -> redis.Redis:
    """This process's Redis client for the ledger and the dead-letter store (not the queues)."""
    global _redis, _redis_pid
    s = settings()
    with _lock:
        if _redis is None or _redis_pid != os.getpid():
            _redis = redis.Redis.from_url(
                s.broker_url,
                socket_timeout=s.broker_timeout,
                socket_connect_timeout=s.broker_timeout,
            )
            _redis_pid = os.getpid()
        return _redis


def ledger() -> Ledger:
    return Ledger(redis_client())


def activity() -> ActivityLog | None:
    """Agents' latest message times, when the idle window is on (MEMSYNC_SYNC_IDLE_SECONDS)."""
    window = settings().sync_idle_seconds
    return ActivityLog(redis_client(), window) if window is not None else None


def deadletters() -> DeadLetterStore:
    """The dead-letter store, bounded by the MEMSYNC_DLQ_* settings."""
    s = settings()
    return DeadLetterStore(
        redis_client(),
        max_entries=s.dlq_max_entries,
        ttl_seconds=s.dlq_ttl_seconds,
        payload_max_bytes=s.dlq_payload_max_bytes,
    )


def extractor() -> Extractor:
    """The configured extractor (MEMSYNC_EXTRACTOR): `rules` works offline; `llm` calls the
    OpenAI-compatible endpoint at MEMSYNC_LLM_BASE_URL, one per process so its rate limit is
    shared by every task the process runs."""
    global _extractor
    s = settings()
    if s.extractor == "rules":
        return RulesExtractor()
    with _lock:
        if _extractor is None:
            if not s.llm_base_url or not s.llm_model:
                raise ConfigurationError(
                    "MEMSYNC_EXTRACTOR=llm needs MEMSYNC_LLM_BASE_URL and MEMSYNC_LLM_MODEL"
                )
            _extractor = LLMExtractor(
                s.llm_base_url,
                s.llm_model,
                s.llm_api_key.get_secret_value() if s.llm_api_key else None,
                timeout=s.llm_timeout,
                rate_limit=RateLimit(s.llm_requests_per_second),
            )
        return _extractor


def lenses() -> dict[str, Lens]:
    """Built-in lenses, updated from MEMSYNC_LENSES_FILE when set (read once per process)."""
    global _lenses
    if _lenses is None:
        path = settings().lenses_file
        _lenses = parse_lenses(path.read_text()) if path else dict(BUILTIN_LENSES)
    return _lenses


def trust_policy(events: Sequence[TurnEvent]) -> TrustPolicy:
    """The configured trust rule, with the directory entries these events' agents need."""
    mode = settings().trust_mode
    if mode == "open":
        return DirectoryTrustPolicy(mode, {})
    return DirectoryTrustPolicy(mode, trust_entries(trusters(events)))


def trust_entries(keys: set[str]) -> dict[str, TrustEntry]:
    """Trust entries from a short-lived cache (MEMSYNC_TRUST_CACHE_SECONDS), else the graph.

    Owners known only from the graph are looked up too, so their grants count.
    """
    s = settings()
    found = _cached(_trust, keys, s.trust_cache_size, s.trust_cache_seconds)
    missing = keys - found.keys()
    if missing:
        fetched = lookup_trust(graph(), missing)
        owners = {e.owner for e in fetched.values() if e.owner} - keys - found.keys()
        if owners:
            fetched.update(lookup_trust(graph(), owners))
        for key in missing | owners:
            entry = fetched.get(key) or TrustEntry(key=key, trusted=frozenset())
            _trust.put(key, entry)
            found[key] = entry
    return found


def _cached(cache: TTLCache[str, V], keys: set[str], size: int, ttl: float) -> dict[str, V]:
    """The live entries among `keys`, under the bounds the settings give now."""
    cache.configure(size, ttl)
    return cache.get_many(keys)


def known_names(keys: set[str]) -> dict[str, KnownParticipant]:
    """Names for participants sent by id alone: from a short-lived cache, else from the graph."""
    s = settings()
    found = _cached(_names, keys, s.names_cache_size, s.names_cache_seconds)
    missing = keys - found.keys()
    if missing:
        fetched = lookup_participants(graph(), missing)
        for key, known in fetched.items():
            _names.put(key, known)
        found.update(fetched)
    return found


def label_owners(labels: set[LabelKey]) -> dict[LabelKey, str]:
    """Who already carries each (tenant, label) in the graph; not cached, since a stale answer
    would let a look-alike take a label someone else just got."""
    return reader_label_owners(graph(), labels)


def tracing() -> Tracing:
    """This process's tracing (a no-op unless MEMSYNC_TRACING is on)."""
    global _tracing
    enabled = settings().tracing
    with _lock:
        if _tracing is None or _tracing.enabled != (enabled and available()):
            _tracing = Tracing(enabled)
        return _tracing


def tenant_labels() -> TenantLabels:
    """This process's bounded tenant label for metrics (MEMSYNC_METRICS_TENANTS)."""
    global _tenant_labels
    # Imported here: prometheus-client must not load before `memsync worker` sets its storage.
    from workers.worker.metrics import TenantLabels

    limit = settings().metrics_tenants
    with _lock:
        if _tenant_labels is None or _tenant_labels.limit != limit:
            _tenant_labels = TenantLabels(limit)
        return _tenant_labels


def reset() -> None:
    """Forget inherited resources without closing them: after fork they belong to the parent."""
    global _graph, _graph_pid, _redis, _redis_pid, _lenses, _extractor
    with _lock:
        _graph, _graph_pid = None, None
        _redis, _redis_pid = None, None
        _lenses = None
        _extractor = None
        _names.clear()
        _trust.clear()


def close() -> None:
    """Close this process's driver cleanly (worker shutdown)."""
    global _graph, _graph_pid
    with _lock:
        graph_, pid = _graph, _graph_pid
        _graph, _graph_pid = None, None
    if graph_ is not None and pid == os.getpid():
        graph_.close()
