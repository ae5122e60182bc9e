"""Who may look: the inspector's sessions, behind the API's own token (MEMSYNC_API_TOKEN).

A browser cannot send a bearer header when it navigates, so the token is posted once to a
login form and the answer is a session cookie (HttpOnly, SameSite=Strict) signed with a key
derived from the token: changing the token ends every session. The bearer header works too,
for scripts. Without a token (the loopback default) the pages are open, as the API is, but a
session cookie is still issued: replay needs a CSRF token bound to it in every form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Final

from fastapi import Request
from fastapi.responses import Response

COOKIE: Final = "memsync_inspector"
COOKIE_PATH: Final = "/inspect"
SESSION_SECONDS: Final = 12 * 3600
LOGIN_PATH: Final = "/inspect/login"


@dataclass(frozen=True)
class Viewer:
    """An allowed request: its session id (None when it came with the bearer header), and a
    cookie to set when the session was issued just now (open mode)."""

    session: str | None
    new_cookie: str | None = None

    @property
    def by_bearer(self) -> bool:
        return self.session is None


class NotAllowed(Exception):
    """No valid token or session: `login` says whether to send the browser to the login form
    (a page visit without any credentials) rather than answer 401."""

    def __init__(self, *, login: bool) -> None:
        super().__init__("a valid token or inspector session is required")
        self.login = login


class Sessions:
    """Issues and checks session cookies and their CSRF tokens (stateless, HMAC-signed)."""

    def __init__(self, token: str | None) -> None:
        self.token = token.encode() if token else None
        if self.token is not None:
            self._key = hmac.new(self.token, b"memsync-inspector-session", hashlib.sha256).digest()
        else:
            # Open mode: sessions only carry CSRF tokens, so they need to last one process only.
            self._key = secrets.token_bytes(32)

    @property
    def required(self) -> bool:
        """Whether a token is configured (and so a login is needed)."""
        return self.token is not None

    def token_matches(self, given: str) -> bool:
        """Constant time, so the timing of the answer says nothing about a guess."""
        if self.token is None:
            return True
        return hmac.compare_digest(given.encode(), self.token)

    def issue(self, now: float | None = None) -> str:
        """A new session cookie value: `id.issued.signature`."""
        sid = secrets.token_urlsafe(18)
        issued = str(int(time.time() if now is None else now))
        return f"{sid}.{issued}.{self._sign('session', sid, issued)}"

    def session_of(self, cookie: str | None, now: float | None = None) -> str | None:
        """The session id of a valid, unexpired cookie, else None."""
        if not cookie or len(cookie) > 200:
            return None
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        sid, issued, signature = parts
        if not hmac.compare_digest(signature, self._sign("session", sid, issued)):
            return None
        age = (time.time() if now is None else now) - int(issued)
        return sid if 0 <= age <= SESSION_SECONDS else None

    def csrf(self, session: str) -> str:
        return self._sign("csrf", session)

    def csrf_matches(self, session: str, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.csrf(session).encode())

    def _sign(self, *parts: str) -> str:
        message = "\x00".join(parts).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def viewer(self, request: Request) -> Viewer:
        """Who is asking, or NotAllowed."""
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, credentials = header.partition(" ")
            if scheme.lower() == "bearer" and self.token_matches(credentials.strip()):
                return Viewer(session=None)
            raise NotAllowed(login=False)  # a wrong header is a script's mistake: no redirect
        session = self.session_of(request.cookies.get(COOKIE))
        if session is not None:
            return Viewer(session=session)
        if not self.required:
            cookie = self.issue()
            return Viewer(session=self.session_of(cookie), new_cookie=cookie)
        raise NotAllowed(login=request.method in {"GET", "HEAD"})

    def set_cookie(self, response: Response, request: Request, value: str) -> None:
        response.set_cookie(
            COOKIE,
            value,
            max_age=SESSION_SECONDS,
            path=COOKIE_PATH,
            httponly=True,
            samesite="strict",
            # Plain HTTP on loopback is the default; behind TLS the cookie is marked Secure.
            secure=request.url.scheme == "https",
        )

    def clear_cookie(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")


def safe_next(target: str | None) -> str:
    """Where to go after login: a path of the inspector only (never another site)."""
    if (
        target
        and target.startswith(COOKIE_PATH)
        and not target.startswith("//")
        and "\\" not in target
        and all(ord(ch) > 0x20 for ch in target)
    ):
        return target
    return COOKIE_PATH
