"""The memory inspector without services: escaping and rendering, its login, sessions and CSRF,
and replay through workers.cli.replay. Redis is fakeredis; Neo4j points at port 1, so a page
that reads the graph answers 503 (as an HTML page, not a traceback)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlencode

import fakeredis
import pytest
from celery import Celery
from fastapi.testclient import TestClient

from memsync import http
from memsync.settings import INGEST_QUEUE
from pipeline.errors import InvalidEvent
from pipeline.graph.inspection import (
    AgentMemory,
    AgentRecord,
    ChannelRecord,
    CommitmentRecord,
    FactRecord,
    SummaryRecord,
    TimelineEntry,
)
from schemas.recall import Change
from tests.unit.offline import offline_settings
from workers.cli.serve import _graph
from workers.inspector import memory as memory_pages
from workers.inspector.auth import COOKIE, SESSION_SECONDS, Sessions, safe_next
from workers.inspector.html import CONTENT_SECURITY_POLICY, STYLE, Html, escape, href, join, tag
from workers.inspector.routes import inspector_router
from workers.state.deadletter import DeadLetterStore, letters_for

TOKEN = "inspector-token-for-tests"
XSS = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
NOW = datetime(2026, 12, 1, tzinfo=UTC)


# -- escaping and rendering -----------------------------------------------------------------------


def test_text_is_escaped_and_markup_is_kept() -> None:
    assert escape(XSS) == (
        "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
    )
    assert escape(None) == ""
    made = tag("b", XSS)
    assert isinstance(made, Html) and escape(made) == made  # never escaped twice
    assert tag("p", made, " & ", 3) == f"<p>{made} &amp; 3</p>"
    assert tag("a", "x", href='/"><script>', class_="c") == (
        '<a href="/&quot;&gt;&lt;script&gt;" class="c">x</a>'
    )
    assert tag("input", name="n", value="'v'", required=True, hidden=None) == (
        '<input name="n" value="&#x27;v&#x27;" required>'
    )
    assert join(["<a>", tag("i", "b")], " <> ") == "&lt;a&gt; &lt;&gt; <i>b</i>"


def test_tag_and_attribute_names_are_code_only() -> None:
    with pytest.raises(ValueError):
        tag("img onerror=x")
    with pytest.raises(ValueError):
        tag("a", **{"on click": "x"})


def test_links_stay_on_the_site_and_encode_their_values() -> None:
    assert href("/inspect/agent", tenant="a&b", agent="x y/z", empty="") == (
        "/inspect/agent?tenant=a%26b&agent=x+y%2Fz"
    )
    for outside in ("https://evil.example/", "//evil.example", "javascript:alert(1)"):
        with pytest.raises(ValueError):
            href(outside)
    assert safe_next("/inspect/agent?agent=a") == "/inspect/agent?agent=a"
    for target in ("//evil.example", "https://evil.example", "/inspect\\@evil", None, ""):
        assert safe_next(target) == "/inspect"


def test_the_policy_allows_no_script_and_only_the_pages_own_style() -> None:
    assert "script-src" not in CONTENT_SECURITY_POLICY
    assert CONTENT_SECURITY_POLICY.startswith("default-src 'none'")
    digest = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in CONTENT_SECURITY_POLICY


def _fact(key: str, text: str, **changes: Any) -> FactRecord:
    fields: dict[str, Any] = {
        "key": key,
        "kind": "preference",
        "predicate": "prefers",
        "value": text,
        "text": text,
        "source": "peer_stated",
        "confidence": 0.8,
        "stated_at": NOW - timedelta(days=2),
        "last_confirmed": NOW - timedelta(days=1),
        "expires_at": NOW + timedelta(days=300),
        "superseded_at": None,
        "stated_by": "Sarah (@sarah)",
        "about": ["Devon (@devon)"],
        "superseded_by_key": None,
        "superseded_by_text": None,
        "evidence": ["m-1"],
        "learnt_in": ["ch-1"],
    }
    return FactRecord.model_validate({**fields, **changes})


def test_the_agent_page_marks_superseded_and_expired_facts_and_escapes_them() -> None:
    memory = AgentMemory(
        agent=AgentRecord(id="a-1", label="Travel (@travel)", tenant="acme"),
        facts=[
            _fact(
                "f-old",
                "aisle seats",
                superseded_at=NOW,
                superseded_by_key="f-new",
                superseded_by_text="window seats",
            ),
            _fact("f-new", "window seats", source="self_stated"),
            _fact("f-gone", XSS, expires_at=NOW - timedelta(days=1)),
        ],
        commitments=[
            CommitmentRecord(
                key="c-1",
                text="send the forecast",
                status="open",
                due=None,
                opened_at=NOW,
                closed_at=None,
                source="self_stated",
                owed_by="Devon (@devon)",
                owed_to="Sarah (@sarah)",
                evidence=["m-2"],
                learnt_in=["ch-1"],
                changed=[
                    Change(
                        was="budget is 2000",
                        now=f"budget is {XSS}",
                        evidence=["m-9"],
                        said_in="ch-2",
                    )
                ],
            ),
        ],
        summaries=[
            SummaryRecord(
                channel_id="ch-1",
                channel_title="Trip",
                text=f"plan {XSS}",
                version=3,
                covers_until=NOW,
            ),
        ],
        channels=[ChannelRecord(id="ch-1", kind="group", title="Trip", episodes=3)],
    )
    html = memory_pages.agent("acme", memory, NOW)
    old = re.search(r'<tr id="fact-0" class="fact old">.*?</tr>', html)
    assert old is not None
    assert "superseded" in old.group() and 'href="#fact-1"' in old.group()
    assert "window seats" in old.group()
    assert '<tr id="fact-1" class="fact">' in html and "self-stated" in html
    assert "peer-stated, unverified" in html
    gone = re.search(r'<tr id="fact-2" class="fact old">.*?</tr>', html)
    assert gone is not None and "expired" in gone.group()
    assert "<img" not in html and "<script" not in html and "&lt;img src=x" in html
    assert "Devon (@devon)" in html and "Sarah (@sarah)" in html
    assert "/inspect/channel?tenant=acme&amp;channel=ch-1&amp;agent=a-1" in html
    owed = re.search(r'<table id="commitments">.*?</table>', html)
    assert owed is not None and "later in #ch-2, &quot;budget is 2000&quot; became" in owed.group()
    summary = re.search(r'<table id="summaries">.*?</table>', html)
    assert summary is not None and "<td>3</td>" in summary.group() and "plan &lt;img" in html


def test_the_timeline_shows_speaker_labels_and_message_text_inert() -> None:
    entries = [
        TimelineEntry(
            id="m-1",
            role="human",
            content=XSS,
            speaker_label="Devon (@devon)",
            speaker_id="u-1",
            created_at=NOW,
            observers=["Travel (@travel)"],
        ),
    ]
    html = memory_pages.channel(
        "acme", ChannelRecord(id="ch-1", kind="group", title="<b>"), entries, None
    )
    assert "Devon (@devon)" in html and "Channel &lt;b&gt;" in html
    assert "<img" not in html and "<script" not in html


# -- the routes: auth, sessions, CSRF, replay -----------------------------------------------------


class FakeCelery:
    """Records what replay sends, instead of a broker."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append({"name": name, **options})


class Rig:
    def __init__(self, client: TestClient, store: DeadLetterStore, celery: FakeCelery) -> None:
        self.client = client
        self.store = store
        self.celery = celery


def _rig(tmp_path: Path, token: str | None) -> Iterator[Rig]:
    broker = fakeredis.FakeRedis()
    store = DeadLetterStore(broker)
    event = {"schema_version": 1, "event_id": "e-bad", "tenant": "acme", "note": XSS}
    store.put(
        letters_for(
            task="memsync.ingest",
            queue=INGEST_QUEUE,
            stage="ingest",
            payload=[event],
            error=InvalidEvent("messages", f"missing {XSS}", "e-bad", "acme"),
            permanent=True,
            attempts=1,
            worker="w-1",
        )
    )
    celery = FakeCelery()
    router = inspector_router(Sessions(token), store, broker, lambda: cast(Celery, celery), _graph)
    app = http.create_app(offline_settings(tmp_path, token), extra_routers=[router])
    with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as client:
        yield Rig(client, store, celery)


@pytest.fixture()
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from _rig(tmp_path, TOKEN)


@pytest.fixture()
def open_rig(tmp_path: Path) -> Iterator[Rig]:
    yield from _rig(tmp_path, None)


def _login(rig: Rig) -> None:
    answer = rig.client.post(
        "/inspect/login",
        content="token=" + TOKEN + "&next=%2Finspect%2Fdeadletters",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/inspect/deadletters"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie and "Path=/inspect" in cookie
    assert f"Max-Age={SESSION_SECONDS}" in cookie


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None, html
    return found.group(1)


def _form(**fields: str) -> dict[str, Any]:
    return {
        "content": urlencode(fields),
        "headers": {"Content-Type": "application/x-www-form-urlencoded"},
    }


def test_a_page_visit_without_a_session_goes_to_the_login_form(rig: Rig) -> None:
    answer = rig.client.get("/inspect/deadletters?tenant=acme")
    assert answer.status_code == 303
    assert (
        answer.headers["location"] == "/inspect/login?next=%2Finspect%2Fdeadletters%3Ftenant%3Dacme"
    )
    form = rig.client.get(answer.headers["location"])
    assert form.status_code == 200 and 'type="password"' in form.text
    assert form.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert form.headers["cache-control"] == "no-store"
    # A wrong bearer header is a 401 (a script's mistake), a wrong token at the form too.
    assert rig.client.get("/inspect", headers={"Authorization": "Bearer nope"}).status_code == 401
    wrong = rig.client.post("/inspect/login", **_form(token="nope", next="/inspect"))
    assert wrong.status_code == 401 and "not right" in wrong.text
    assert "set-cookie" not in wrong.headers
    # POSTs are refused, not redirected.
    assert rig.client.post("/inspect/deadletters/replay", **_form(id="x")).status_code == 401


def test_the_bearer_header_is_accepted_and_pages_stay_out_of_openapi(rig: Rig) -> None:
    answer = rig.client.get("/inspect/deadletters", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200
    assert "e-bad" in answer.text and "&lt;img" in answer.text and "<img" not in answer.text
    assert "/inspect" not in str(rig.client.app.openapi())  # type: ignore[attr-defined]


def test_a_tampered_or_expired_cookie_is_no_session(rig: Rig) -> None:
    sessions = Sessions(TOKEN)
    good = sessions.issue()
    assert sessions.session_of(good) is not None
    assert sessions.session_of(good[:-1] + ("0" if good[-1] != "0" else "1")) is None
    assert sessions.session_of(sessions.issue(now=0)) is None
    assert Sessions("another-token").session_of(good) is None  # a new token ends sessions
    # Its signature's last two characters changed (a signature ending in "00" gets "11").
    tampered = good[:-2] + ("00" if good[-2:] != "00" else "11")
    rig.client.cookies.set(COOKIE, tampered, path="/inspect")
    assert rig.client.get("/inspect/deadletters").status_code == 303


def test_replay_needs_the_sessions_csrf_token_and_reuses_dlq_replay(rig: Rig) -> None:
    _login(rig)
    listing = rig.client.get("/inspect/deadletters")
    assert listing.status_code == 200, listing.text
    letter = rig.store.entries()[0]
    token = _csrf(listing.text)
    assert rig.client.post("/inspect/deadletters/replay", **_form(id=letter.id)).status_code == 403
    forged = _form(id=letter.id, csrf="0" * 64)
    assert rig.client.post("/inspect/deadletters/replay", **forged).status_code == 403
    cross = _form(id=letter.id, csrf=token)
    cross["headers"]["Origin"] = "http://evil.example"
    assert rig.client.post("/inspect/deadletters/replay", **cross).status_code == 403
    assert rig.celery.sent == []

    done = rig.client.post("/inspect/deadletters/replay", **_form(id=letter.id, csrf=token))
    assert done.status_code == 303
    assert done.headers["location"] == (f"/inspect/deadletters?replayed={letter.id}&outcome=sent")
    [sent] = rig.celery.sent
    assert sent["name"] == "memsync.ingest" and sent["queue"] == INGEST_QUEUE
    assert sent["args"] == (letter.payload,)
    assert sent["headers"]["memsync_dlq_entry"] == letter.id
    shown = rig.client.get(done.headers["location"])
    assert f"Replayed {letter.id}: sent back to {INGEST_QUEUE}" in shown.text

    gone = rig.client.post("/inspect/deadletters/replay", **_form(id="no-such", csrf=token))
    assert rig.client.get(gone.headers["location"]).text.count("No dead letter no-such") == 1


def test_a_graph_outage_is_a_page_that_says_so(rig: Rig) -> None:
    _login(rig)
    answer = rig.client.get("/inspect/agent?tenant=acme&agent=a-1")
    assert answer.status_code == 503
    assert "did not answer" in answer.text and "Traceback" not in answer.text


def test_without_a_token_pages_are_open_but_replay_still_needs_csrf(open_rig: Rig) -> None:
    assert open_rig.client.get("/inspect/login").status_code == 303
    listing = open_rig.client.get("/inspect/deadletters")
    assert listing.status_code == 200
    assert COOKIE in listing.headers["set-cookie"]  # the session its CSRF token is bound to
    letter = open_rig.store.entries()[0]
    refused = open_rig.client.post("/inspect/deadletters/replay", **_form(id=letter.id))
    assert refused.status_code == 403
    token = _csrf(listing.text)
    done = open_rig.client.post("/inspect/deadletters/replay", **_form(id=letter.id, csrf=token))
    assert done.status_code == 303 and len(open_rig.celery.sent) == 1
