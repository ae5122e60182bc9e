"""Reading memory back, for a platform: recall and build_context, sync and asyncio.

memory = memsync.Memory.from_settings(memsync.Settings())   # holds a Neo4j driver; close it
items = memory.recall(agent_id="a-travel", channel_id="ch-42", query="seat preference")
context = memory.build_context("a-travel", "ch-42", query="seat", budget_tokens=1500)
messages = context.render()     # system messages to put before the recent window

memsync.recall(...), memsync.build_context(...) and their asyncio forms memsync.arecall(...),
memsync.abuild_context(...) use one process-wide Memory built from MEMSYNC_* on first use.
The asyncio forms run the sync call in a worker thread (asyncio.to_thread): the Neo4j driver
is used synchronously and the event loop is never blocked by it.

The graph side (neo4j driver, search, context assembly) is imported on first use, so a
platform that only emits never loads it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final

from pydantic import ConfigDict, Field, TypeAdapter

from memsync.readstats import ReadStats
from memsync.settings import Settings
from schemas.context import Context
from schemas.event import Identifier, Tenant
from schemas.recall import MAX_EXCLUDED, RecallItem, RecallQuery

if TYPE_CHECKING:
    from types import TracebackType

    from pipeline.embedder import Embedder
    from pipeline.graph.store import GraphStore

# Kept equal to pipeline.context.DEFAULT_BUDGET_TOKENS (a unit test checks): importing it here
# would load the graph side for a platform that only emits.
DEFAULT_BUDGET_TOKENS: Final = 2000

_TENANT: TypeAdapter[str] = TypeAdapter(Tenant)
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
# Titled, so that a bad id is reported as the argument's ("1 validation error for recent_ids").
_RECENT_IDS: TypeAdapter[tuple[str, ...]] = TypeAdapter(
    Annotated[tuple[Identifier, ...], Field(max_length=MAX_EXCLUDED)],
    config=ConfigDict(title="recent_ids"),
)


class Memory:
    """Read access to the agents' memory over one graph connection and embedder.

    Built explicitly (`Memory(graph, embedder=..., dm_policy=...)`) or from settings
    (`Memory.from_settings`); the caller closes it (`close()` or a `with` block). Thread-safe:
    the driver pools connections and each call opens its own session. `stats` counts and times
    every call (memsync.metrics.register_reader exposes them).
    """

    def __init__(
        self,
        graph: GraphStore,
        *,
        embedder: Embedder | None = None,
        dm_policy: str = "never",
        owns_graph: bool = False,
    ) -> None:
        self.graph = graph
        self.embedder = embedder
        self.dm_policy = dm_policy
        self._owns_graph = owns_graph
        self.stats = ReadStats()

    @classmethod
    def from_settings(cls, settings: Settings) -> Memory:
        """A Memory with its own Neo4j driver and the configured embedder and DM policy."""
        from pipeline.embedder import make_embedder
        from pipeline.graph.store import GraphStore

        embedder = make_embedder(settings)
        graph = GraphStore.connect(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password_value,
            settings.neo4j_database,
            max_transaction_retry_time=settings.neo4j_retry_seconds,
            connection_timeout=settings.neo4j_connect_timeout,
            vector_cache_mb=settings.recall_vector_cache_mb,
        )
        return cls(
            graph,
            embedder=embedder,
            dm_policy=settings.dm_memory_policy,
            owns_graph=True,
        )

    def recall(self, request: RecallQuery | None = None, /, **fields: Any) -> list[RecallItem]:
        """What an agent remembers that answers a query, best first (a RecallQuery, or its
        fields as keywords: `recall(agent_id="a-1", query="seat", channel_id="ch-1")`)."""
        from pipeline.graph.search import recall

        with self.stats.timed("recall"):
            query = request if request is not None else RecallQuery.model_validate(fields)
            return recall(self.graph, query, embedder=self.embedder, dm_policy=self.dm_policy)

    def build_context(
        self,
        agent: str,
        channel: str,
        *,
        tenant: str = "default",
        query: str | None = None,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        recent_ids: Sequence[str] = (),
    ) -> Context:
        """What `agent` should be told before answering in `channel`, within `budget_tokens`
        (see pipeline/graph/context.py for what is included and pipeline/context.py for the
        order in which it is cut). `recent_ids`: the platform message ids of the recent window
        the rendering goes in front of; memories never repeat them."""
        from pipeline.graph.context import build_context

        with self.stats.timed("build_context"):
            return build_context(
                self.graph,
                _TENANT.validate_python(tenant),
                _IDENTIFIER.validate_python(agent),
                _IDENTIFIER.validate_python(channel),
                query=query,
                budget_tokens=budget_tokens,
                embedder=self.embedder,
                dm_policy=self.dm_policy,
                recent_ids=_RECENT_IDS.validate_python(tuple(recent_ids)),
            )

    async def arecall(
        self, request: RecallQuery | None = None, /, **fields: Any
    ) -> list[RecallItem]:
        """`recall` in a worker thread, for asyncio callers."""
        return await asyncio.to_thread(self.recall, request, **fields)

    async def abuild_context(
        self,
        agent: str,
        channel: str,
        *,
        tenant: str = "default",
        query: str | None = None,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        recent_ids: Sequence[str] = (),
    ) -> Context:
        """`build_context` in a worker thread, for asyncio callers."""
        return await asyncio.to_thread(
            self.build_context,
            agent,
            channel,
            tenant=tenant,
            query=query,
            budget_tokens=budget_tokens,
            recent_ids=recent_ids,
        )

    def close(self) -> None:
        """Close the graph connection if this Memory opened it."""
        if self._owns_graph:
            self.graph.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


_default: Memory | None = None
_default_pid: int | None = None
_default_lock = threading.Lock()


def default_memory() -> Memory:
    """The process-wide Memory, built from MEMSYNC_* on first use (again after a fork: a child
    never uses its parent's sockets) and closed at exit."""
    global _default, _default_pid
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            _default = Memory.from_settings(Settings())
            _default_pid = os.getpid()
            atexit.register(_default.close)
        return _default


def recall(request: RecallQuery | None = None, /, **fields: Any) -> list[RecallItem]:
    """`Memory.recall` on the process-wide Memory."""
    return default_memory().recall(request, **fields)


def build_context(
    agent: str,
    channel: str,
    *,
    tenant: str = "default",
    query: str | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    recent_ids: Sequence[str] = (),
) -> Context:
    """`Memory.build_context` on the process-wide Memory."""
    return default_memory().build_context(
        agent,
        channel,
        tenant=tenant,
        query=query,
        budget_tokens=budget_tokens,
        recent_ids=recent_ids,
    )


async def arecall(request: RecallQuery | None = None, /, **fields: Any) -> list[RecallItem]:
    """`recall` for asyncio callers (a worker thread over the sync driver)."""
    return await asyncio.to_thread(recall, request, **fields)


async def abuild_context(
    agent: str,
    channel: str,
    *,
    tenant: str = "default",
    query: str | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    recent_ids: Sequence[str] = (),
) -> Context:
    """`build_context` for asyncio callers (a worker thread over the sync driver)."""
    return await asyncio.to_thread(
        build_context,
        agent,
        channel,
        tenant=tenant,
        query=query,
        budget_tokens=budget_tokens,
        recent_ids=recent_ids,
    )
