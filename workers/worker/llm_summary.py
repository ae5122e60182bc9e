"""The `llm` summarizer: folds episodes into a channel summary through the same
OpenAI-compatible endpoint, client code, retries and rate limit as the `llm` extractor.

The model's text is bounded here, never trusted to respect the budget: a summary longer than
MEMSYNC_SUMMARY_MAX_TOKENS is cut at a line boundary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.summarize import EpisodeText, episode_tokens, fit_lines
from workers.worker.llm import LLMError, RateLimit, post_chat, with_retries

INSTRUCTIONS = (
    "You keep a rolling summary of one conversation channel for an AI agent. You get the "
    "previous summary (or null) and the next messages, each with its speaker label and time. "
    'Return a JSON object {"summary": "..."}: the updated summary as short lines in time '
    "order, each starting with the speaker label. Keep every decision, identifier (ids, codes, "
    "URLs, emails, handles, flight numbers, versions), number, date, amount, commitment (who "
    "owes what to whom, by when) and open question, verbatim where you can; drop small talk. "
    "Never invent anything. Stay under {max_tokens} tokens: when space runs out, drop resolved "
    "or minor points first, commitments and decisions last."
)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    summary: str = Field(max_length=200_000)


class LLMSummarizer:
    """Summarizer backed by an OpenAI-compatible /chat/completions endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        max_tokens: int,
        chunk_tokens: int,
        timeout: float = 30.0,
        rate_limit: RateLimit | None = None,
        attempts: int = 4,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.max_tokens = max_tokens
        # A rebuild reads the whole history: it is fed to the model this many tokens at a time.
        self.chunk_tokens = chunk_tokens
        self.timeout = timeout
        self.rate_limit = rate_limit or RateLimit(5.0)
        self._call = with_retries(self._post, attempts)

    def fold(self, previous: str | None, episodes: Sequence[EpisodeText]) -> str:
        if not episodes:
            return fit_lines(previous or "", self.max_tokens)
        return fit_lines(self._call(self._request(previous, episodes)), self.max_tokens)

    def rebuild(self, episodes: Sequence[EpisodeText]) -> str:
        """From raw episodes alone: folded chunk by chunk from nothing, never from the old text."""
        summary: str | None = None
        for chunk in chunks(episodes, self.chunk_tokens):
            summary = self.fold(summary, chunk)
        return summary or ""

    def _request(self, previous: str | None, episodes: Sequence[EpisodeText]) -> dict[str, Any]:
        context = {
            "previous_summary": previous,
            "messages": [
                {
                    "speaker": e.speaker_label,
                    "at": e.created_at.isoformat(),
                    "text": e.content,
                }
                for e in episodes
            ],
        }
        return {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {
                    "role": "system",
                    "content": INSTRUCTIONS.replace("{max_tokens}", str(self.max_tokens)),
                },
                {"role": "user", "content": json.dumps(context)},
            ],
        }

    def _post(self, body: dict[str, Any]) -> str:
        content = post_chat(
            self.url, body, api_key=self.api_key, timeout=self.timeout, rate_limit=self.rate_limit
        )
        try:
            return _Answer.model_validate_json(content).summary.strip()
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in error["loc"])
            # A model that strays from the format may do better on a second try.
            raise LLMError(f"summary answer invalid at {field}: {error['msg']}") from exc


def chunks(episodes: Sequence[EpisodeText], tokens: int) -> list[list[EpisodeText]]:
    """Episodes in consecutive runs of about `tokens` each (a longer episode is a run alone)."""
    runs: list[list[EpisodeText]] = []
    current: list[EpisodeText] = []
    size = 0
    for episode in episodes:
        cost = episode_tokens(episode)
        if current and size + cost > tokens:
            runs.append(current)
            current, size = [], 0
        current.append(episode)
        size += cost
    if current:
        runs.append(current)
    return runs
