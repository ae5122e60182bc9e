"""Prometheus metrics of what runs in the platform's process, read at scrape time: a Producer's
(what it emitted, published, spooled, had refused) and a Memory's (its calls, their times, its
vector cache).

The producer runs inside the platform's process, so memsync adds no server there: register the
collector on the registry the platform already exposes (prometheus-client's default one unless
told), and its scrape shows what this process emitted, published, spooled and had refused.

    from memsync.metrics import register_producer
    register_producer(producer)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from memsync.producer import Producer
from memsync.readstats import BUCKETS, ReadStats

if TYPE_CHECKING:
    from memsync.reading import Memory
    from pipeline.graph.vectorcache import VectorCache

# Producer counters and what each counts, exported as memsync_producer_turns_total{outcome}.
OUTCOMES: Final = {
    "emitted": "accepted by emit()",
    "buffer_full": "refused by emit() because the buffer was full",
    "published": "handed to the broker",
    "spooled": "written to the local spool while the broker was away",
    "spool_full": "batches that found the spool full",
    "refused": "refused by the broker for their content and set aside",
    "publish_failures": "failed publish attempts (the batch was spooled or retried)",
}


class ProducerCollector(Collector):
    """The producer's counters, its buffer and its spool, as of each scrape."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        turns = CounterMetricFamily(
            "memsync_producer_turns",
            "Turns by what the producer did with them (see memsync/metrics.py OUTCOMES)",
            labels=["outcome"],
        )
        counters = dict(self.producer.counters)
        for outcome in OUTCOMES:
            turns.add_metric([outcome], counters.get(outcome, 0))
        yield turns
        yield GaugeMetricFamily(
            "memsync_producer_pending",
            "Turns emitted but neither published nor spooled yet",
            value=self.producer.pending,
        )
        status = self.producer.spool_status()
        yield GaugeMetricFamily(
            "memsync_producer_spooled", "Turns waiting in the local spool", value=status.events
        )
        yield GaugeMetricFamily(
            "memsync_producer_spool_bytes", "Size of the local spool", value=status.bytes
        )


def register_producer(
    producer: Producer, registry: CollectorRegistry | None = None
) -> ProducerCollector:
    """Expose `producer` on `registry` (the default registry when None); returns the collector
    so it can be unregistered when the producer closes."""
    collector = ProducerCollector(producer)
    (registry if registry is not None else REGISTRY).register(collector)
    return collector


class ReaderCollector(Collector):
    """A reader's calls by outcome, their wall time, and its vector cache, as of each scrape."""

    def __init__(self, stats: ReadStats, vectors: VectorCache | None) -> None:
        self.stats = stats
        self.vectors = vectors

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        calls = CounterMetricFamily(
            "memsync_reader_calls",
            "recall and build_context calls by outcome (invalid: a request refused by field; "
            "error: anything else the call raised)",
            labels=["call", "outcome"],
        )
        seconds = HistogramMetricFamily(
            "memsync_reader_call_seconds",
            "Wall time of recall and build_context calls",
            labels=["call"],
        )
        for call, figures in sorted(self.stats.snapshot().items()):
            for outcome, count in figures.outcomes.items():
                calls.add_metric([call, outcome], count)
            cumulative, buckets = 0, []
            for bound, count in zip((*map(str, BUCKETS), "+Inf"), figures.counts, strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            seconds.add_metric([call], buckets, figures.seconds)
        yield calls
        yield seconds
        if self.vectors is None:
            return
        yield GaugeMetricFamily(
            "memsync_reader_vector_cache_bytes",
            "Memory the reader's vector cache holds",
            value=self.vectors.nbytes,
        )
        yield GaugeMetricFamily(
            "memsync_reader_vector_cache_limit_bytes",
            "What the vector cache may hold (MEMSYNC_RECALL_VECTOR_CACHE_MB)",
            value=self.vectors.max_bytes,
        )
        yield GaugeMetricFamily(
            "memsync_reader_vector_cache_scopes",
            "Agents' scopes held (messages; facts and commitments) by the vector cache",
            value=self.vectors.scopes,
        )


def register_reader(memory: Memory, registry: CollectorRegistry | None = None) -> ReaderCollector:
    """Expose `memory`'s calls and vector cache on `registry` (the default registry when None);
    returns the collector so it can be unregistered when the memory closes."""
    collector = ReaderCollector(memory.stats, memory.graph.vectors)
    (registry if registry is not None else REGISTRY).register(collector)
    return collector
