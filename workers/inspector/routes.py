"""The inspector's routes under /inspect: login, overview, agent, channel, dead letters and
replay (the only thing it changes). Reads go through pipeline.graph.inspection and the
dead-letter store; replay through workers.cli.replay, exactly as `memsync dlq replay` does."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final
from urllib.parse import parse_qs, urlsplit

import redis
from celery import Celery
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from memsync.http.wire import ApiError
from pipeline.errors import DeadLetterUnavailable, GraphUnavailable
from pipeline.graph import inspection
from pipeline.graph.reader import list_agents
from pipeline.graph.store import GraphStore
from workers.cli.replay import ReplayReport, replay
from workers.inspector import memory as memory_pages
from workers.inspector import pages
from workers.inspector.auth import LOGIN_PATH, NotAllowed, Sessions, Viewer, safe_next
from workers.inspector.html import SECURITY_HEADERS, Html, href
from workers.state.backlog import Backlog, read_backlog
from workers.state.deadletter import DeadLetter, DeadLetterStore

log = logging.getLogger("memsync.inspector")

MAX_FORM_BYTES: Final = 16_384
MAX_LETTERS: Final = 500
OUTCOMES: Final = frozenset({"sent", "skipped", "missing"})

# Graph or Redis away: a page that says so (503), not a traceback.
_OUTAGES: Final = (GraphUnavailable, DeadLetterUnavailable, redis.RedisError, OSError)


class Inspector:
    """The handlers, over the stores they read: `celery_app` gives the app replay sends with
    (built on first use), `graph` finds the Neo4j store of the serving app."""

    def __init__(
        self,
        sessions: Sessions,
        deadletters: DeadLetterStore,
        broker: redis.Redis,
        celery_app: Callable[[], Celery],
        graph: Callable[[Request], GraphStore],
    ) -> None:
        self.sessions = sessions
        self.deadletters = deadletters
        self.broker = broker
        self.celery_app = celery_app
        self.graph = graph

    def router(self) -> APIRouter:
        """Every route under /inspect, none of them in the API's OpenAPI document."""
        router = APIRouter(prefix=pages.BASE, include_in_schema=False)
        router.add_api_route("/login", self.login_form, methods=["GET"])
        router.add_api_route("/login", self.login, methods=["POST"])
        router.add_api_route("", self.overview, methods=["GET"])
        router.add_api_route("/agent", self.agent, methods=["GET"])
        router.add_api_route("/channel", self.channel, methods=["GET"])
        router.add_api_route("/deadletters", self.list_deadletters, methods=["GET"])
        router.add_api_route("/deadletters/replay", self.replay_one, methods=["POST"])
        return router

    # -- answers --------------------------------------------------------------------------------

    def allow(self, request: Request) -> Viewer:
        """The viewer, or a redirect to the login form (a page visit) or a 401 (anything else)."""
        try:
            return self.sessions.viewer(request)
        except NotAllowed as refused:
            if refused.login:
                query = f"?{request.url.query}" if request.url.query else ""
                location = href(LOGIN_PATH, next=request.url.path + query)
                headers = {"Location": location}
                raise ApiError(303, "login_required", "log in first", headers=headers) from None
            raise ApiError(
                401,
                "unauthorized",
                "a valid bearer token or inspector session is required",
                headers={"WWW-Authenticate": 'Bearer realm="memsync"'},
            ) from None

    def answer(
        self, viewer: Viewer | None, request: Request, content: Html, status: int = 200
    ) -> Response:
        headers = dict(SECURITY_HEADERS)
        response = HTMLResponse(str(content), status_code=status, headers=headers)
        if viewer is not None and viewer.new_cookie is not None:
            self.sessions.set_cookie(response, request, viewer.new_cookie)
        return response

    def down(
        self, viewer: Viewer, request: Request, exc: BaseException, tenant: str | None
    ) -> Response:
        log.warning("inspector: %s %s: %s", request.method, request.url.path, exc)
        what = "Neo4j or Redis did not answer; try again shortly."
        return self.answer(viewer, request, pages.unavailable(what, tenant), 503)

    # -- login ----------------------------------------------------------------------------------

    def login_form(self, request: Request, next: str | None = None) -> Response:
        if not self.sessions.required:
            return _redirect(safe_next(next))
        return self.answer(None, request, pages.login(safe_next(next)))

    async def login(self, request: Request) -> Response:
        form = await _form(request)
        target = safe_next(form.get("next"))
        if not self.sessions.required:
            return _redirect(target)
        if not self.sessions.token_matches(form.get("token", "")):
            log.warning("inspector: a login with a wrong token")
            return self.answer(None, request, pages.login(target, failed=True), status=401)
        response = _redirect(target)
        self.sessions.set_cookie(response, request, self.sessions.issue())
        return response

    # -- pages ----------------------------------------------------------------------------------

    def overview(self, request: Request, tenant: str | None = None) -> Response:
        viewer = self.allow(request)
        tenant = (tenant or "").strip() or None
        try:
            store = self.graph(request)
            known = inspection.tenants(store)
            agents = list_agents(store, tenant) if tenant else []
        except _OUTAGES as exc:
            return self.down(viewer, request, exc, tenant)
        backlog: Backlog | None = None
        mine: int | None = None
        try:
            backlog = read_backlog(self.broker, self.deadletters)
            if tenant:
                mine = sum(1 for x in self.deadletters.entries() if x.tenant == tenant)
        except _OUTAGES as exc:
            log.warning("inspector: broker figures unavailable: %s", exc)
        return self.answer(viewer, request, pages.overview(known, tenant, agents, backlog, mine))

    def agent(self, request: Request, agent: str, tenant: str = "default") -> Response:
        viewer = self.allow(request)
        try:
            memory = inspection.agent_memory(self.graph(request), tenant, agent)
        except _OUTAGES as exc:
            return self.down(viewer, request, exc, tenant)
        if memory is None:
            content = pages.missing(f"No agent {agent} in tenant {tenant}.", tenant)
            return self.answer(viewer, request, content, status=404)
        return self.answer(viewer, request, memory_pages.agent(tenant, memory, datetime.now(UTC)))

    def channel(
        self, request: Request, channel: str, tenant: str = "default", agent: str | None = None
    ) -> Response:
        viewer = self.allow(request)
        agent = agent or None
        try:
            store = self.graph(request)
            record = inspection.channel(store, tenant, channel)
            entries = inspection.timeline(store, tenant, channel, agent) if record else []
        except _OUTAGES as exc:
            return self.down(viewer, request, exc, tenant)
        if record is None:
            content = pages.missing(f"No channel {channel} in tenant {tenant}.", tenant)
            return self.answer(viewer, request, content, status=404)
        return self.answer(viewer, request, memory_pages.channel(tenant, record, entries, agent))

    def list_deadletters(
        self,
        request: Request,
        tenant: str | None = None,
        replayed: str | None = None,
        outcome: str | None = None,
    ) -> Response:
        viewer = self.allow(request)
        tenant = (tenant or "").strip() or None
        try:
            letters = self.deadletters.entries()
        except _OUTAGES as exc:
            return self.down(viewer, request, exc, tenant)
        total = len(letters)
        if tenant:
            letters = [x for x in letters if x.tenant == tenant]
        message = _replay_notice(replayed, outcome, {x.id: x for x in letters})
        csrf = self.sessions.csrf(viewer.session) if viewer.session is not None else None
        content = pages.deadletters(letters[:MAX_LETTERS], total, tenant, csrf, message)
        return self.answer(viewer, request, content)

    # -- the one change ---------------------------------------------------------------------------

    async def replay_one(self, request: Request) -> Response:
        """Replay one entry as `memsync dlq replay ID` does, then show the list again."""
        viewer = self.allow(request)
        form = await _form(request)
        refused = pages.unavailable("Cross-site request refused.", None)
        if not _same_origin(request):
            return self.answer(viewer, request, refused, status=403)
        # A bearer header cannot be sent by another site's page; a cookie can, so it needs the
        # form's token (SameSite=Strict already keeps it off cross-site requests in browsers).
        session = viewer.session
        if session is not None and not self.sessions.csrf_matches(session, form.get("csrf", "")):
            stale = pages.unavailable("The form is stale: reload the page and try again.", None)
            return self.answer(viewer, request, stale, status=403)
        entry_id = form.get("id", "")
        tenant = form.get("tenant") or None

        def send() -> ReplayReport:
            return replay(self.deadletters, self.celery_app(), [entry_id])

        try:
            report = await run_in_threadpool(send)
        except _OUTAGES as exc:
            return self.down(viewer, request, exc, tenant)
        outcome = "sent" if report.sent else "skipped" if report.skipped else "missing"
        log.info("inspector: replay of dead letter %s: %s", entry_id, outcome)
        base = f"{pages.BASE}/deadletters"
        return _redirect(href(base, tenant=tenant, replayed=entry_id, outcome=outcome))


def inspector_router(
    sessions: Sessions,
    deadletters: DeadLetterStore,
    broker: redis.Redis,
    celery_app: Callable[[], Celery],
    graph: Callable[[Request], GraphStore],
) -> APIRouter:
    """The inspector's router, to include into the API app."""
    return Inspector(sessions, deadletters, broker, celery_app, graph).router()


def _redirect(location: str) -> Response:
    return RedirectResponse(location, status_code=303, headers=dict(SECURITY_HEADERS))


def _replay_notice(
    entry_id: str | None, outcome: str | None, letters: dict[str, DeadLetter]
) -> Html | None:
    """What the last replay did, for the page it redirects to."""
    if not entry_id or outcome not in OUTCOMES:
        return None
    still = letters.get(entry_id)
    if outcome == "missing":
        return pages.notice(f"No dead letter {entry_id}: already replayed or purged.", error=True)
    if outcome == "skipped":
        why = still.unreplayable_reason if still is not None else None
        return pages.notice(f"Dead letter {entry_id} was not replayed: {why}.", error=True)
    if still is None:
        return pages.notice(f"Replayed {entry_id}: it succeeded and its entry is gone.")
    return pages.notice(
        f"Replayed {entry_id}: sent back to {still.queue} as a new task. The entry goes when the "
        f"task succeeds (reload to see); if it fails again its attempts go up "
        f"(now {still.attempts})."
    )


async def _form(request: Request) -> dict[str, str]:
    """A small urlencoded form (the last value of each field), refused when too large."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ApiError(413, "too_large", f"a form is at most {MAX_FORM_BYTES} bytes")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(422, "invalid_request", "not an urlencoded form") from None
    return {name: values[-1] for name, values in fields.items()}


def _same_origin(request: Request) -> bool:
    """An Origin header, when a browser sends one, names this server."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin != "null" and urlsplit(origin).netloc == host
