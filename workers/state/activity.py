"""Agents' latest message time per channel, in Redis, for the idle window (pipeline/activity.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import redis

from memsync import keys
from workers.state.redisfaults import redis_errors

# A channel nobody spoke in for this long (or the window, if longer) is forgotten: every agent
# in it is idle by then anyway.
MIN_TTL_SECONDS = 7 * 24 * 3600


class ActivityLog:
    """Read and raise (never lower) each agent's latest message time in each channel."""

    def __init__(self, client: redis.Redis, window_seconds: float) -> None:
        self.client = client
        self.window_seconds = window_seconds
        self.ttl = int(max(window_seconds, MIN_TTL_SECONDS))

    @redis_errors
    def last_spoke(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """(channel, agent) -> epoch seconds, for the pairs with a recorded message."""
        by_channel: dict[str, list[str]] = defaultdict(list)
        for channel, agent in sorted(set(pairs)):
            by_channel[channel].append(agent)
        if not by_channel:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for channel, agents in by_channel.items():
            pipe.zmscore(keys.channel_activity(channel), agents)
        found: dict[tuple[str, str], float] = {}
        for (channel, agents), scores in zip(by_channel.items(), pipe.execute(), strict=True):
            for agent, score in zip(agents, scores, strict=True):
                if score is not None:
                    found[(channel, agent)] = float(score)
        return found

    @redis_errors
    def record(self, spoke: Mapping[tuple[str, str], float]) -> None:
        """Raise each pair's time to the one given, if later (ZADD GT: replays never lower it)."""
        by_channel: dict[str, dict[str, float]] = defaultdict(dict)
        for (channel, agent), at in spoke.items():
            by_channel[channel][agent] = at
        if not by_channel:
            return
        pipe = self.client.pipeline(transaction=False)
        for channel, times in sorted(by_channel.items()):
            key = keys.channel_activity(channel)
            pipe.zadd(key, times, gt=True)
            pipe.expire(key, self.ttl)
        pipe.execute()
