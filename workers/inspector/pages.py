"""The inspector's layout and its operator pages, as pure functions of what was read: the
overview, dead letters, login and errors (memory pages: workers/inspector/memory.py). Every
value goes through `workers.inspector.html`, which escapes it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pipeline.graph.reader import AgentSummary
from workers.inspector.html import (
    Html,
    badge,
    cell,
    href,
    join,
    page,
    row,
    seconds,
    table,
    tag,
    when,
)
from workers.state.backlog import Backlog
from workers.state.deadletter import DeadLetter

BASE = "/inspect"


def _nav(tenant: str | None) -> list[tuple[str, str]]:
    return [
        ("Overview", href(BASE, tenant=tenant)),
        ("Dead letters", href(f"{BASE}/deadletters", tenant=tenant)),
    ]


def layout(title: str, tenant: str | None, *body: object) -> Html:
    return page(title, list(body), nav=_nav(tenant))


def notice(text: str, *, error: bool = False) -> Html:
    return tag("p", text, class_="notice error" if error else "notice")


def meta(text: str) -> Html:
    return tag("span", text, class_="meta")


def ids(values: Iterable[str]) -> Html:
    return join((tag("code", v) for v in values), " ")


# -- overview -------------------------------------------------------------------------------------


def overview(
    tenants: Sequence[str],
    tenant: str | None,
    agents: Sequence[AgentSummary],
    backlog: Backlog | None,
    tenant_dead_letters: int | None,
) -> Html:
    """Queues and lag for the deployment, and the chosen tenant's agents."""
    cards: list[Html] = []
    if backlog is None:
        cards.append(notice("Redis did not answer: queue depths and lag are unknown.", error=True))
    else:
        figures = [(name.removeprefix("memsync."), str(n)) for name, n in backlog.queues.items()]
        figures += [
            ("unsettled turns", str(backlog.unsettled)),
            ("oldest unsettled (lag)", seconds(backlog.oldest_unsettled_seconds)),
            ("dead letters", str(backlog.dead_letters)),
        ]
        if tenant_dead_letters is not None:
            figures.append((f"dead letters of {tenant}", str(tenant_dead_letters)))
        cards.append(
            tag(
                "div",
                [tag("div", tag("b", v), meta(k), class_="card") for k, v in figures],
                class_="cards",
            )
        )
    chooser = tag(
        "form",
        tag("label", "Tenant ", tag("input", type="text", name="tenant", value=tenant or "")),
        " ",
        tag("button", "Show", type="submit"),
        method="get",
        action=BASE,
    )
    known = join((tag("a", t, href=href(BASE, tenant=t)) for t in tenants), " · ")
    body: list[object] = [
        tag("h1", "Overview"),
        tag("h2", "Queues and lag (whole deployment)"),
        cards,
        tag("h2", "Tenant"),
        chooser,
        tag("p", meta("Tenants with agents: "), known or meta("none yet")),
    ]
    if tenant:
        body.append(tag("h2", f"Agents of {tenant}"))
        if agents:
            body.append(
                table(
                    ["agent", "label", "episodes observed"],
                    (
                        row(
                            cell(
                                tag(
                                    "a", a.id, href=href(f"{BASE}/agent", tenant=tenant, agent=a.id)
                                )
                            ),
                            a.label or "",
                            a.observed,
                        )
                        for a in agents
                    ),
                    id="agents",
                )
            )
        else:
            body.append(notice(f"No agents in tenant {tenant}."))
    return layout("Overview", tenant, body)


# -- dead letters ---------------------------------------------------------------------------------


def _replay_form(letter: DeadLetter, csrf: str | None, tenant: str | None) -> Html:
    reason = letter.unreplayable_reason
    if reason is not None:
        return meta(f"not replayable: {reason}")
    fields: list[Html] = [tag("input", type="hidden", name="id", value=letter.id)]
    if csrf is not None:
        fields.append(tag("input", type="hidden", name="csrf", value=csrf))
    if tenant:
        fields.append(tag("input", type="hidden", name="tenant", value=tenant))
    return tag(
        "form",
        fields,
        tag("button", "Replay", type="submit", name="replay", value=letter.id),
        method="post",
        action=f"{BASE}/deadletters/replay",
        class_="inline",
    )


def deadletters(
    letters: Sequence[DeadLetter],
    total: int,
    tenant: str | None,
    csrf: str | None,
    message: Html | None,
) -> Html:
    """Failed work, oldest failure first, each replayable one with its Replay button."""
    shown = f"{len(letters)} shown of {total} stored"
    body: list[object] = [tag("h1", "Dead letters"), message, tag("p", meta(shown))]
    if tenant:
        body.append(
            tag(
                "p",
                meta(f"tenant {tenant} only · "),
                tag("a", "all tenants", href=href(f"{BASE}/deadletters")),
            )
        )
    rows = [
        row(
            when(x.last_failed_at),
            x.task,
            x.stage,
            cell(join([x.tenant or "-", x.event_id or "-", x.agent_id or ""], " / ")),
            cell(tag("b", x.error_type), ": ", x.error, class_="msg"),
            x.attempts,
            when(x.first_failed_at),
            cell(badge("permanent", "bad") if x.permanent else badge("retryable", "warn")),
            cell(_replay_form(x, csrf, tenant)),
            id=f"dl-{x.id}",
            class_="deadletter",
        )
        for x in letters
    ]
    if rows:
        body.append(
            table(
                [
                    "last failed",
                    "task",
                    "stage",
                    "tenant / event / agent",
                    "error",
                    "attempts",
                    "first failed",
                    "kind",
                    "",
                ],
                rows,
                id="deadletters",
            )
        )
    else:
        body.append(notice("No dead letters."))
    return layout("Dead letters", tenant, body)


# -- login and errors -----------------------------------------------------------------------------


def login(next_path: str, *, failed: bool = False) -> Html:
    form = tag(
        "form",
        tag("input", type="hidden", name="next", value=next_path),
        tag(
            "label",
            "API token ",
            tag(
                "input",
                type="password",
                name="token",
                autocomplete="current-password",
                required=True,
                autofocus=True,
            ),
        ),
        " ",
        tag("button", "Log in", type="submit", id="login"),
        method="post",
        action=f"{BASE}/login",
    )
    body: list[object] = [
        tag("h1", "Log in"),
        notice("That token is not right.", error=True) if failed else None,
        tag("p", "The inspector is behind the API's token (MEMSYNC_API_TOKEN)."),
        form,
    ]
    return page("Log in", body)


def missing(what: str, tenant: str | None) -> Html:
    return layout("Not found", tenant, tag("h1", "Not found"), notice(what, error=True))


def unavailable(what: str, tenant: str | None) -> Html:
    return layout("Unavailable", tenant, tag("h1", "Unavailable"), notice(what, error=True))
