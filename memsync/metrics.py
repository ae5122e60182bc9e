"""Prometheus metrics for the producer side, read from a Producer at scrape time.

The producer runs inside the platform's process, so memsync adds no server there: register the
collector on the registry the platform already exposes (prometheus-client's default one unless
told), and its scrape shows what this process emitted, published, spooled and had refused.

    from memsync.metrics import register_producer
    register_producer(producer)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from memsync.producer import Producer

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
