"""The Neo4j connection a process holds: one driver, the database name, and error translation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, overload

import neo4j
from neo4j import Driver, GraphDatabase
from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError

from pipeline.errors import GraphUnavailable
from pipeline.graph.vectorcache import VectorCache

# The driver's own default page of records per round trip (neo4j SessionConfig.fetch_size).
DEFAULT_FETCH_SIZE = 1000


@dataclass(frozen=True)
class GraphStore:
    """A driver plus the database it writes to. Create one per process, after any fork."""

    driver: Driver
    database: str
    # Set when a connection was left in an undefined state; the owner should build a new store.
    health: dict[str, bool] = field(default_factory=lambda: {"broken": False})
    # What recall last learnt of the search indexes, and when (pipeline/graph/search.py), so
    # that it asks the server again only every few seconds.
    index_status: dict[str, Any] = field(default_factory=dict)
    # The size of agents' search scopes, and when each was read (pipeline/graph/meaning.py).
    scope_sizes: dict[tuple[str, ...], tuple[float, dict[str, Any]]] = field(default_factory=dict)
    # Agents' vectors held for recall's cosine (pipeline/graph/vectorcache.py); off by default,
    # a reading process turns it on (`vector_cache_mb`).
    vectors: VectorCache = field(default_factory=lambda: VectorCache(0))

    @property
    def broken(self) -> bool:
        return self.health["broken"]

    @classmethod
    def connect(
        cls,
        uri: str,
        user: str,
        password: str | None,
        database: str,
        *,
        max_transaction_retry_time: float = 30.0,
        connection_timeout: float = 10.0,
        vector_cache_mb: int = 0,
    ) -> GraphStore:
        auth = (user, password) if password else None
        driver = GraphDatabase.driver(
            uri,
            auth=auth,
            max_transaction_retry_time=max_transaction_retry_time,
            connection_timeout=connection_timeout,
            connection_acquisition_timeout=connection_timeout * 3,
            # Schema hints ("property does not exist yet") would flood worker logs.
            notifications_min_severity="OFF",
        )
        return cls(
            driver=driver, database=database, vectors=VectorCache(vector_cache_mb * 1024 * 1024)
        )

    @contextmanager
    def session(
        self, *, write: bool = True, fetch_size: int | None = None
    ) -> Iterator[neo4j.Session]:
        """A session whose connection and transient failures surface as GraphUnavailable.

        `fetch_size`: records pulled per round trip, for reads that may stop early.
        """
        access = neo4j.WRITE_ACCESS if write else neo4j.READ_ACCESS
        try:
            with self.driver.session(
                database=self.database,
                default_access_mode=access,
                fetch_size=fetch_size if fetch_size is not None else DEFAULT_FETCH_SIZE,
            ) as session:
                yield session
        except (ServiceUnavailable, SessionExpired, TransientError) as exc:
            # Reaching here means the driver's own retries (for writes) are already spent.
            raise GraphUnavailable(f"Neo4j unavailable: {exc}") from exc
        except (BufferError, OSError) as exc:
            # A read interrupted mid-message (a task cancelled on broker loss, say) can leave a
            # pooled connection unusable; drop the whole driver and let the retry start afresh.
            self.health["broken"] = True
            raise GraphUnavailable(f"Neo4j connection in a bad state: {exc!r}") from exc

    def close(self) -> None:
        self.driver.close()


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@overload
def instant(value: int) -> datetime: ...
@overload
def instant(value: None) -> None: ...
def instant(value: int | None) -> datetime | None:
    """An instant read as microseconds since the epoch (cypher/instant.py `micros`), in UTC."""
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def native(value: Any) -> Any:
    """A value as the driver returned it, with its temporal values (at any depth of maps and
    lists) as Python's own."""
    if isinstance(value, dict):
        return {k: native(v) for k, v in value.items()}
    if isinstance(value, list):
        return [native(v) for v in value]
    return value.to_native() if hasattr(value, "to_native") else value
