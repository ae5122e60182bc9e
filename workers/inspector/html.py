"""Safe HTML building for the inspector: every value is escaped unless it is already `Html`.

Memory content is untrusted user text, so markup is only ever made by `tag` (which escapes
text children and attribute values) and pages carry a Content-Security-Policy that allows no
script and only the one stylesheet below, by hash.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Final
from urllib.parse import quote, urlencode


class Html(str):
    """Markup that is already safe: built by `tag` or `join`, never from raw input."""

    __slots__ = ()


def escape(value: object) -> Html:
    """Text as HTML: `&`, `<`, `>`, `"` and `'` become entities (an Html value stays as is)."""
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], separator: str = "") -> Html:
    """The parts escaped (unless Html) and joined; the separator is escaped too."""
    return Html(escape(separator).join(_children(parts)))


def _children(children: Iterable[object]) -> list[Html]:
    out: list[Html] = []
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, str | int | float):
            out.append(escape(child))
        elif isinstance(child, Iterable):
            out.extend(_children(child))
        else:
            out.append(escape(child))
    return out


_VOID: Final = frozenset({"br", "hr", "input", "meta", "img", "link"})
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def tag(name: str, /, *children: object, **attributes: str | int | bool | None) -> Html:
    """`<name attr="value">children</name>`: attribute names are code (`class_` for class,
    `data_x` for data-x); values and text children are escaped."""
    if not name or not set(name) <= _NAME_CHARS:
        raise ValueError(f"not a tag name: {name!r}")
    parts = [name]
    for key, value in attributes.items():
        attr = key.rstrip("_").replace("_", "-")
        if not set(attr) <= _NAME_CHARS:
            raise ValueError(f"not an attribute name: {key!r}")
        if value is None or value is False:
            continue
        parts.append(attr if value is True else f'{attr}="{escape(value)}"')
    opening = f"<{' '.join(parts)}>"
    if name in _VOID:
        return Html(opening)
    return Html(f"{opening}{''.join(_children(children))}</{name}>")


def href(path: str, **query: str | None) -> str:
    """A same-site link: the path's segments percent-encoded, empty query values left out.

    The result is still text: `tag` escapes it as an attribute value.
    """
    if not path.startswith("/") or path.startswith("//"):
        raise ValueError(f"links stay on this site: {path!r}")
    encoded = quote(path, safe="/")
    params = {k: v for k, v in query.items() if v is not None and v != ""}
    return f"{encoded}?{urlencode(params)}" if params else encoded


def when(value: datetime | float | None) -> str:
    """A time as UTC `YYYY-MM-DD HH:MM:SS`, or '-' for none."""
    if value is None:
        return "-"
    moment = datetime.fromtimestamp(value, UTC) if isinstance(value, int | float) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float) -> str:
    """A duration for people: 42s, 3m 20s, 2h 5m, 3d 4h."""
    total = int(value)
    if total < 60:
        return f"{max(0.0, value):.0f}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


class Cell(Html):
    """A table cell built by `cell` (kept as is by `row`)."""

    __slots__ = ()


def cell(*children: object, **attributes: str | int | bool | None) -> Cell:
    return Cell(tag("td", *children, **attributes))


def row(*cells: object, **attributes: str | int | bool | None) -> Html:
    """A table row; anything not made by `cell` becomes a plain, escaped cell."""
    return tag("tr", [c if isinstance(c, Cell) else cell(c) for c in cells], **attributes)


def table(headers: Iterable[str], rows: Iterable[Html], **attributes: str) -> Html:
    """A table of rows made by `row`."""
    head = tag("thead", tag("tr", [tag("th", h) for h in headers]))
    return tag("table", head, tag("tbody", list(rows)), **attributes)


def badge(text: str, kind: str) -> Html:
    """A small coloured label (kind: one of the CSS classes below, e.g. ok, warn, bad, muted)."""
    return tag("span", text, class_=f"badge {kind}")


STYLE: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d2b3a;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.2rem;
align-items:center}
header a{color:#cfe3ff;text-decoration:none}header strong{font-size:1.05rem}
main{padding:1rem 1.2rem;max-width:1200px}
h1{font-size:1.3rem;margin:.2rem 0 .8rem}h2{font-size:1.05rem;margin:1.4rem 0 .5rem}
table{border-collapse:collapse;width:100%;background:#fff;margin-bottom:.5rem}
th,td{border:1px solid #dde1e6;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
tr.old td{color:#6b7480;background:#fafafa}tr.old td.text{text-decoration:line-through}
.badge{display:inline-block;padding:0 .4rem;border-radius:.6rem;font-size:.8rem;margin-right:.2rem}
.ok{background:#dff3e4;color:#145a2a}.warn{background:#fff1cc;color:#6b4b00}
.bad{background:#fde0df;color:#8a1c16}.muted{background:#e8eaed;color:#4a525c}
.info{background:#dfeafd;color:#173f7a}
.meta{color:#5b6570;font-size:.85rem}.speaker{font-weight:600}
code{font-size:.85rem;background:#eef1f4;padding:0 .2rem;border-radius:.2rem}
.msg{white-space:pre-wrap;word-break:break-word}
.cards{display:flex;gap:.8rem;flex-wrap:wrap}
.card{background:#fff;border:1px solid #dde1e6;border-radius:.4rem;padding:.5rem .8rem;
min-width:9rem}
.card b{display:block;font-size:1.3rem}
form.inline{display:inline}button{cursor:pointer}
.notice{background:#dfeafd;border:1px solid #b7cdf5;padding:.5rem .8rem;border-radius:.4rem}
.error{background:#fde0df;border-color:#f2b8b5}
input[type=text],input[type=password]{padding:.3rem;min-width:16rem}
"""

_STYLE_HASH: Final = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()

# No script at all, the one stylesheet by hash, forms only back to this site, never framed.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; "
    f"style-src 'sha256-{_STYLE_HASH}'; "
    "img-src 'self'; "
    "form-action 'self'; "
    "frame-ancestors 'none'; "
    "base-uri 'none'"
)

SECURITY_HEADERS: Final[Mapping[str, str]] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # Not no-referrer: under it a browser sends `Origin: null`, which the replay check refuses.
    "Referrer-Policy": "same-origin",
    # Pages hold what people said: no shared or browser cache keeps a copy.
    "Cache-Control": "no-store",
}


def page(title: str, body: object, *, nav: Iterable[tuple[str, str]] = ()) -> Html:
    """A whole document: the header with links (text, href), then the body."""
    links = [tag("a", text, href=target) for text, target in nav]
    return Html(
        "<!doctype html>"
        + tag(
            "html",
            tag(
                "head",
                tag("meta", charset="utf-8"),
                tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
                tag("title", f"{title} · memsync inspector"),
                Html(f"<style>{STYLE}</style>"),
            ),
            tag(
                "body",
                tag("header", tag("strong", "memsync inspector"), links),
                tag("main", body),
            ),
            lang="en",
        )
    )
