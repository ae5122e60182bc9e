"""The `llm` extractor: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
llama.cpp server) returns JSON, validated by pydantic and turned into the same MemoryItems.

The model proposes; memsync decides provenance. `source` is computed here from who spoke about
whom (never taken from the model), ids must name the turn's own participants and messages, and
anything else is dropped. Calls have a timeout, tenacity retries for 429/5xx/timeouts, and one
rate limit shared by every caller in the process.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from pipeline.errors import PermanentError, RetryableError
from pipeline.extract import memory_item
from schemas.memory import MemoryItem, MemoryKind
from schemas.records import AttributedMessage, ChannelRef, ResolvedTurn, Speaker

INSTRUCTIONS = (
    "You extract long-term memory from a chat turn for one AI agent. Return a JSON object "
    '{"items": [...]}, each item with: kind (preference|fact|agreement|commitment|closure), '
    'message_id (the message it comes from), subject_id (a participant id, or "channel" for '
    "an agreement), predicate (snake_case, e.g. prefers, dislikes, lives_in, allergy, agreed, "
    "commitment, closes, cancels), value, topic (seat, food, hotel, schedule, travel, price, "
    "terms, work, health or null), negated, hedged, owed_to_id (for commitments: the participant "
    "owed, or null for the channel), due (ISO 8601 or null). Extract only what is stated; "
    "questions and small talk give nothing."
)


class LLMError(RetryableError):
    """The endpoint failed in a way worth retrying (timeout, 429, 5xx)."""


class LLMRejected(PermanentError):
    """The endpoint refused the request (4xx other than 429) or answered with unusable JSON."""


class _Proposal(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: MemoryKind
    message_id: str
    subject_id: str
    predicate: str = Field(min_length=1, max_length=64)
    value: str = Field(max_length=500)
    topic: str | None = None
    negated: bool = False
    hedged: bool = False
    owed_to_id: str | None = None
    due: datetime | None = None


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    items: list[_Proposal] = Field(default_factory=list, max_length=200)


class RateLimit:
    """At most `per_second` calls a second, shared by every thread that holds this object."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second if per_second > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


class LLMExtractor:
    """Extractor backed by an OpenAI-compatible /chat/completions endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        rate_limit: RateLimit | None = None,
        attempts: int = 4,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.rate_limit = rate_limit or RateLimit(5.0)
        self._call = with_retries(self._post, attempts)

    def extract(self, turn: ResolvedTurn, agent: Speaker) -> list[MemoryItem]:
        if not turn.messages:
            return []
        answer = self._call(self._request(turn, agent))
        return proposals_to_items(answer, turn)

    def _request(self, turn: ResolvedTurn, agent: Speaker) -> dict[str, Any]:
        people = [{"id": p.id, "label": p.label, "kind": p.kind} for p in turn.participants]
        # Keys escape ':' inside ids, so the id is looked up, never cut out of the key.
        ids = {p.key: p.id for p in turn.participants}
        lines = [
            {"message_id": m.id, "speaker_id": ids.get(m.speaker_key), "text": m.content}
            for m in turn.messages
        ]
        context = {
            "agent_id": agent.id,
            "channel": {"id": turn.channel.id, "kind": turn.channel.kind},
            "participants": people,
            "messages": lines,
        }
        return {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": json.dumps(context)},
            ],
        }

    def _post(self, body: dict[str, Any]) -> _Answer:
        content = post_chat(
            self.url, body, api_key=self.api_key, timeout=self.timeout, rate_limit=self.rate_limit
        )
        try:
            return _Answer.model_validate_json(content)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in error["loc"])
            # A model that strays from the format may do better on a second try.
            raise LLMError(f"model answer invalid at {field}: {error['msg']}") from exc


T = TypeVar("T")


def with_retries(
    call: Callable[[dict[str, Any]], T], attempts: int
) -> Callable[[dict[str, Any]], T]:
    """`call` retried on LLMError (timeouts, 429, 5xx, unusable answers) with jittered backoff;
    shared by every OpenAI-compatible client (the extractor, the summarizer)."""
    return retry(
        retry=retry_if_exception_type(LLMError),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2),
        reraise=True,
    )(call)


def post_chat(
    url: str, body: dict[str, Any], *, api_key: str | None, timeout: float, rate_limit: RateLimit
) -> str:
    """POST one chat-completions request (after the rate limit); the assistant message's text.

    Raises LLMError for what may pass (timeouts, 429, 5xx, invalid JSON) and LLMRejected for
    what will not (other 4xx, a body that is no chat-completions answer).
    """
    rate_limit.wait()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(  # noqa: S310 (the URL is the operator's setting)
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            payload = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the response's socket
        if exc.code == 429 or exc.code >= 500:
            raise LLMError(f"LLM endpoint answered {exc.code}") from exc
        raise LLMRejected(f"LLM endpoint answered {exc.code}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise LLMError(f"LLM endpoint unreachable: {exc}") from exc
    except ValueError as exc:
        raise LLMError(f"LLM endpoint sent invalid JSON: {exc}") from exc
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMRejected(f"not a chat-completions answer: {exc!r}") from exc
    if not isinstance(content, str):
        # A model that answered without text (null content) may do better on a second try.
        raise LLMError(f"model answer has no text (content is {type(content).__name__})")
    return content


def proposals_to_items(answer: _Answer, turn: ResolvedTurn) -> list[MemoryItem]:
    """Keep proposals that name this turn's messages and participants; provenance is ours."""
    people = {p.id: p for p in turn.participants}
    speakers = {p.key: p for p in turn.participants}
    messages: dict[str, AttributedMessage] = {m.id: m for m in turn.messages}
    items: list[MemoryItem] = []
    for proposal in answer.items:
        message = messages.get(proposal.message_id)
        speaker = speakers.get(message.speaker_key) if message else None
        if message is None or speaker is None:
            continue
        subject: Speaker | ChannelRef
        if proposal.subject_id == "channel" or proposal.kind == "agreement":
            subject, subject_label = turn.channel, turn.channel.title or turn.channel.id
        elif proposal.subject_id in people:
            subject = people[proposal.subject_id]
            subject_label = subject.label
        else:
            continue
        items.append(
            memory_item(
                proposal.kind,
                speaker=speaker,
                subject=subject,
                message=message,
                predicate=proposal.predicate,
                value=proposal.value,
                text=f"{subject_label} {proposal.predicate.replace('_', ' ')} {proposal.value}",
                topic=proposal.topic,
                negated=proposal.negated,
                hedged=proposal.hedged,
                owed_to=people.get(proposal.owed_to_id or ""),
                due=proposal.due,
            )
        )
    return items
