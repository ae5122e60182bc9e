"""The memory inspector in a real browser: `memsync serve` over the session's Redis, Neo4j and
worker, turns emitted for real, and headless Chromium (Debian's, driven by Selenium) logging
in, reading an agent's facts, commitments and a channel's timeline, and replaying dead letters.

Set MEMSYNC_INSPECTOR_SCREENSHOT=docs/inspector.png to save the agent page for the README.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, WebDriverException
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from memsync.settings import INGEST_QUEUE, Settings
from pipeline.errors import ConfigurationError, GraphUnavailable
from pipeline.graph.directory import grant_trust
from pipeline.graph.reader import agent_facts
from pipeline.graph.store import GraphStore
from pipeline.graph.writer import verify_fact
from tests.integration.report import send_task
from tests.integration.serving import start_serve, wait_healthy
from tests.integration.test_spine import DEVON, SARAH, TRAVEL, emit_all, event, msg
from workers.local import services
from workers.state.deadletter import DeadLetter, DeadLetterStore, letters_for
from workers.state.ledger import Ledger

pytestmark = pytest.mark.integration

WAIT_SECONDS = 90.0
CHANNEL = {"id": "ch-trip", "kind": "group", "title": "Trip planning"}
XSS = "<img src=x onerror=alert(document.domain)> what is the hotel budget?"
SARAH_AISLE = "Sarah (@sarah) prefers aisle seat"
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


@dataclass(frozen=True)
class World:
    url: str
    token: str
    tenant: str
    invalid: str  # dead letter of an invalid event sent past the producer
    outage: str  # dead letter of a valid turn whose retries ran out while Neo4j was away


def _chromium() -> tuple[str, str]:
    """Debian's chromium and chromedriver; installed here if missing (as root), else a failure
    that says how to get them: this test never skips."""
    try:
        return services.ensure_chromium()
    except (ConfigurationError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"the inspector's browser test needs Chromium: {exc} (or run `make browser`)")


def _turns(tenant: str) -> list[Any]:
    return [
        event(
            tenant,
            "ev-trip",
            CHANNEL,
            [DEVON, SARAH, TRAVEL],
            [
                msg("m1", "user", "u-sarah", "I prefer an aisle seat", 1),
                msg("m2", "user", "u-devon", "I prefer a window seat", 2),
                msg("m3", "user", "u-devon", "Actually I prefer an aisle seat now", 3),
                msg("m4", "user", "u-devon", "Sarah, I'll send the hotel list by Friday", 4),
                msg("m5", "user", "u-devon", "@sarah is allergic to penicillin", 5),
                msg("m6", "user", "u-sarah", XSS, 6),
                msg("m7", "assistant", "a-travel", "Noted, Devon: aisle seat.", 7),
            ],
        )
    ]


def _wait(what: str, check: Callable[[], bool], timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


@pytest.fixture(scope="module")
def world(
    settings: Settings,
    graph: GraphStore,
    ledger: Ledger,
    worker: services.Service,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    tenant = f"inspect-{uuid.uuid4().hex[:8]}"
    token = f"tok-{uuid.uuid4().hex}"
    # Devon owns the agent; in strict mode Sarah must be someone he trusts for the group.
    grant_trust(graph, tenant, "u-devon", "u-sarah", "team")
    emit_all(settings, ledger, _turns(tenant))
    # Confirmed through the API (`memsync facts verify`), so the page has all three sources.
    [aisle] = [f for f in agent_facts(graph, tenant, "a-travel") if f.text == SARAH_AISLE]
    assert verify_fact(graph, aisle.key)

    client = redis.Redis.from_url(settings.broker_url)
    store = DeadLetterStore(client)
    bad = event(
        tenant, "ev-bad", CHANNEL, [DEVON, TRAVEL], [msg("x1", "user", "u-nobody", "hi", 8)]
    )
    send_task(settings.broker_url, "memsync.ingest", [bad])  # past the producer, which refuses it
    # What a worker writes when a valid turn's retries run out during a Neo4j outage (the same
    # code path, workers.state.deadletter.letters_for): replaying it now must succeed.
    late = event(
        tenant,
        "ev-late",
        CHANNEL,
        [SARAH, TRAVEL],
        [msg("m8", "user", "u-sarah", "I prefer vegetarian meals", 9)],
    )
    [outage] = letters_for(
        task="memsync.ingest",
        queue=INGEST_QUEUE,
        stage="ingest",
        payload=[late],
        error=GraphUnavailable("Neo4j unavailable: connection refused"),
        permanent=False,
        attempts=settings.max_retries + 1,
        worker="memsync-test@outage",
    )
    store.put([outage])
    _wait("the invalid event's dead letter", lambda: _letter(store, tenant, "ev-bad") is not None)
    invalid = _letter(store, tenant, "ev-bad")
    assert invalid is not None and "sender_id" in invalid.error

    root = tmp_path_factory.mktemp("inspector")
    process, url, log = start_serve(settings, root, token)
    try:
        wait_healthy(url, process, log)
        yield World(url, token, tenant, invalid.id, outage.id)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        client.close()
    text = log.read_text(errors="replace")
    assert process.returncode == 0, text[-3000:]
    assert token not in text and "Traceback" not in text


def _letter(store: DeadLetterStore, tenant: str, event_id: str) -> DeadLetter | None:
    found = [x for x in store.entries() if x.tenant == tenant and x.event_id == event_id]
    return found[0] if found else None


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    binary, driver_path = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    # The driver is named, so Selenium Manager never looks for one on the network.
    driver = webdriver.Chrome(options=options, service=DriverService(executable_path=driver_path))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver: WebDriver, world: World, path: str) -> None:
    driver.get(world.url + path)
    _no_alert(driver)


def _no_alert(driver: WebDriver) -> None:
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    text = alert.text
    alert.dismiss()
    raise AssertionError(f"a script ran in the page: alert({text!r})")


def _reload_until(
    driver: WebDriver, what: str, check: Callable[[WebDriver], bool], timeout: float = WAIT_SECONDS
) -> None:
    """Reload until `check` holds: the pages have no script, so news shows on a reload."""

    def again() -> bool:
        driver.refresh()
        _no_alert(driver)
        return check(driver)

    _wait(what, lambda: check(driver) or again(), timeout)


def _click(driver: WebDriver, element: WebElement, done: str | Callable[[WebDriver], bool]) -> None:
    """Click a link or button and wait for the page it leads to: one whose title starts with
    `done`, or for which `done` holds."""
    check = done if callable(done) else lambda d: d.title.startswith(done)

    def arrived() -> bool:
        try:
            return check(driver)
        except WebDriverException:  # the old page went away under the check
            return False

    element.click()
    _wait(f"the page after a click ({done})", arrived, 30)
    _no_alert(driver)


def _text(driver: WebDriver, selector: str) -> str:
    return "\n".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, selector))


def _login(driver: WebDriver, world: World) -> None:
    _open(driver, world, "/inspect")
    if driver.title.startswith("Log in"):
        driver.find_element(By.NAME, "token").send_keys(world.token)
        _click(driver, driver.find_element(By.ID, "login"), "Overview")
    assert driver.title.startswith("Overview"), driver.page_source[:2000]


def _row(driver: WebDriver, table: str, text: str) -> WebElement:
    """The first row of the table whose first cell is `text` or, failing that, holds it."""
    rows = driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    exact = [r for r in rows if r.find_element(By.TAG_NAME, "td").text == text]
    found = exact or [r for r in rows if text in r.text]
    main = driver.find_element(By.TAG_NAME, "main").text
    assert found, f"no row of #{table} holds {text!r}:\n{main}"
    return found[0]


def _agent_path(world: World) -> str:
    return f"/inspect/agent?tenant={world.tenant}&agent=a-travel"


def test_without_the_token_pages_send_to_login_and_scripts_get_401(
    world: World, browser: WebDriver
) -> None:
    with httpx.Client(base_url=world.url, timeout=30.0, follow_redirects=False) as anonymous:
        page = anonymous.get(_agent_path(world))
        assert page.status_code == 303
        assert page.headers["location"].startswith("/inspect/login?next=%2Finspect%2Fagent")
        wrong = anonymous.get(_agent_path(world), headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        replay = anonymous.post("/inspect/deadletters/replay", data={"id": world.outage})
        assert replay.status_code == 401
    with httpx.Client(base_url=world.url, timeout=30.0) as script:
        scripted = script.get(
            _agent_path(world), headers={"Authorization": f"Bearer {world.token}"}
        )
        assert scripted.status_code == 200 and "Travel Agent (@travel)" in scripted.text
        assert "script-src" not in scripted.headers["content-security-policy"]

    browser.delete_all_cookies()
    _open(browser, world, _agent_path(world))
    assert browser.title.startswith("Log in"), browser.title
    browser.find_element(By.NAME, "token").send_keys("not-the-token")
    _click(browser, browser.find_element(By.ID, "login"), lambda d: "not right" in _text(d, "main"))
    browser.find_element(By.NAME, "token").send_keys(world.token)
    # Back where the visit began, now with a session.
    _click(browser, browser.find_element(By.ID, "login"), "Travel Agent (@travel)")
    assert browser.current_url == world.url + _agent_path(world)
    cookie = browser.get_cookie("memsync_inspector")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"


def test_the_overview_lists_the_tenants_agents_and_the_queues(
    world: World, browser: WebDriver
) -> None:
    _login(browser, world)
    _open(browser, world, f"/inspect?tenant={world.tenant}")
    main = browser.find_element(By.TAG_NAME, "main").text
    for figure in ("ingest", "sync", "unsettled turns", "oldest unsettled (lag)", "dead letters"):
        assert figure in main
    assert f"dead letters of {world.tenant}" in main
    agent = _row(browser, "agents", "a-travel")
    assert "Travel Agent (@travel)" in agent.text
    _click(browser, agent.find_element(By.LINK_TEXT, "a-travel"), "Travel Agent (@travel)")


def test_the_agent_page_shows_facts_with_provenance_supersession_and_commitments(
    world: World, browser: WebDriver
) -> None:
    _login(browser, world)
    _open(browser, world, _agent_path(world))
    window = _row(browser, "facts", "Devon (@devon) prefers window seat")
    assert "old" in (window.get_attribute("class") or "")
    assert "superseded" in window.text
    replaced_by = window.find_element(By.CSS_SELECTOR, ".superseded-by a")
    assert replaced_by.text == "Devon (@devon) prefers aisle seat"
    struck = window.find_element(By.CSS_SELECTOR, "td.text")
    assert struck.value_of_css_property("text-decoration-line") == "line-through"
    current = _row(browser, "facts", "Devon (@devon) prefers aisle seat")
    assert "current" in current.text and "old" not in (current.get_attribute("class") or "")
    # The link leads to the fact that replaced it.
    anchor = (replaced_by.get_attribute("href") or "").rsplit("#", 1)[-1]
    assert anchor == current.get_attribute("id")
    # Provenance: who said it, how far to trust it, where it was learnt, and from which message.
    assert "self-stated" in current.text and "ch-trip" in current.text and "m3" in current.text
    sarah = _row(browser, "facts", SARAH_AISLE)
    assert "verified" in sarah.text and "m1" in sarah.text
    peer = _row(browser, "facts", "Sarah (@sarah)'s allergy is penicillin")
    cells = [c.text for c in peer.find_elements(By.TAG_NAME, "td")]
    assert cells[1:4] == ["Sarah (@sarah)", "peer-stated, unverified", "Devon (@devon)"]
    assert "m5" in peer.text
    commitment = _row(browser, "commitments", "send the hotel list")
    cells = [c.text for c in commitment.find_elements(By.TAG_NAME, "td")]
    assert cells[1] == "open" and cells[2] == "Devon (@devon)" and cells[3] == "Sarah (@sarah)"
    assert "m4" in commitment.text
    _row(browser, "channels", "ch-trip")
    shot = os.environ.get("MEMSYNC_INSPECTOR_SCREENSHOT")
    if shot:
        browser.set_window_size(1400, 1100)
        assert browser.save_screenshot(str(Path(shot).resolve()))


def test_the_channel_timeline_labels_speakers_and_keeps_message_text_inert(
    world: World, browser: WebDriver
) -> None:
    _login(browser, world)
    _open(browser, world, _agent_path(world))
    link = _row(browser, "channels", "ch-trip").find_element(By.LINK_TEXT, "ch-trip")
    _click(browser, link, "Channel Trip planning")
    rows = browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    speakers = [r.find_element(By.CSS_SELECTOR, "td.speaker").text for r in rows]
    assert speakers == [
        "Sarah (@sarah)",
        "Devon (@devon)",
        "Devon (@devon)",
        "Devon (@devon)",
        "Devon (@devon)",
        "Sarah (@sarah)",
        "Travel Agent (@travel)",
    ]
    ids = [r.find_element(By.TAG_NAME, "code").text for r in rows]
    assert ids == ["m1", "m2", "m3", "m4", "m5", "m6", "m7"]
    # The attempted markup is shown as the text it is, and is nowhere in the DOM as an element.
    assert rows[5].find_element(By.CSS_SELECTOR, "td.msg").text == XSS
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert browser.find_elements(By.TAG_NAME, "script") == []
    _no_alert(browser)
    whole_channel = browser.find_element(By.LINK_TEXT, "show the whole channel")
    _click(browser, whole_channel, lambda d: "agent=" not in d.current_url)
    whole = browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    assert len(whole) == 7 and "Travel Agent (@travel)" in whole[0].text


def test_dead_letters_replay_from_the_page(
    world: World, browser: WebDriver, settings: Settings
) -> None:
    _login(browser, world)
    _open(browser, world, f"/inspect/deadletters?tenant={world.tenant}")
    invalid = browser.find_element(By.ID, f"dl-{world.invalid}")
    assert "memsync.ingest" in invalid.text and "InvalidEvent" in invalid.text
    assert "sender_id" in invalid.text and "permanent" in invalid.text
    outage = browser.find_element(By.ID, f"dl-{world.outage}")
    assert "GraphUnavailable" in outage.text and "retryable" in outage.text
    assert str(settings.max_retries + 1) in [
        c.text for c in outage.find_elements(By.TAG_NAME, "td")
    ]

    # The invalid event goes back to its queue and fails again: its attempts add up.
    _click(
        browser,
        invalid.find_element(By.TAG_NAME, "button"),
        lambda d: f"Replayed {world.invalid}" in _text(d, ".notice"),
    )

    def attempts(driver: WebDriver, entry: str) -> int:
        found = driver.find_elements(By.ID, f"dl-{entry}")
        return int(found[0].find_elements(By.TAG_NAME, "td")[5].text) if found else 0

    _reload_until(
        browser, "the invalid event to fail again", lambda d: attempts(d, world.invalid) == 2
    )

    # The turn that met an outage is written on replay, and its entry goes.
    _click(
        browser,
        browser.find_element(By.ID, f"dl-{world.outage}").find_element(By.TAG_NAME, "button"),
        lambda d: f"Replayed {world.outage}" in _text(d, ".notice"),
    )
    _reload_until(
        browser,
        "the replayed entry to be removed",
        lambda d: not d.find_elements(By.ID, f"dl-{world.outage}"),
    )
    _open(browser, world, _agent_path(world))
    _reload_until(
        browser,
        "the replayed turn's fact on the agent page",
        lambda d: "Sarah (@sarah) prefers vegetarian meals" in d.find_element(By.ID, "facts").text,
    )
    _open(browser, world, f"/inspect/channel?tenant={world.tenant}&channel=ch-trip&agent=a-travel")
    assert "m8" in browser.find_element(By.ID, "timeline").text
