"""Browser sessions: a signed cookie naming a session kept in memory, CSRF tokens, and who is logged in.

The cookie is `<session id>.<HMAC-SHA256 of it>` under a key made when the console starts (so sessions end
when it restarts); it carries nothing else. The session (in this process only) holds the logged-in user's
cluster connection, never written anywhere. Every form that changes something carries the session's CSRF
token, an HMAC of its id under the same key, so another site cannot make a logged-in browser submit it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

COOKIE = "odradek_console"
IDLE_TIMEOUT_S = 60 * 60  # a session nobody used for an hour ends
MAX_SESSIONS = 1000


@dataclass
class Session:
    id: str
    user: str | None = None  # who logged in; None when the console needs no login
    mechanism: str | None = None
    cluster: object | None = None  # the ClusterClient with this user's credentials
    last_seen: float = 0.0
    flashes: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) shown once on the next page

    def flash(self, text: str, kind: str = "info") -> None:
        self.flashes.append((kind, text))

    def take_flashes(self) -> list[tuple[str, str]]:
        flashes, self.flashes = self.flashes, []
        return flashes


class Sessions:
    def __init__(self, key: bytes | None = None, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic, on_end: Callable[[Session], None] | None = None):
        self.key = key or secrets.token_bytes(32)
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self.on_end = on_end
        self._sessions: dict[str, Session] = {}

    def _mac(self, purpose: bytes, text: str) -> str:
        return hmac.new(self.key, purpose + b"\0" + text.encode(), hashlib.sha256).hexdigest()

    def cookie_value(self, session: Session) -> str:
        return f"{session.id}.{self._mac(b'cookie', session.id)}"

    def session_id(self, cookie: str | None) -> str | None:
        """The session id a cookie names, if its signature is ours."""
        if not cookie or "." not in cookie:
            return None
        sid, _, mac = cookie.rpartition(".")
        if not hmac.compare_digest(mac, self._mac(b"cookie", sid)):
            return None
        return sid

    def csrf_token(self, session: Session) -> str:
        return self._mac(b"csrf", session.id)

    def check_csrf(self, session: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token, self.csrf_token(session))

    def get(self, cookie: str | None) -> Session | None:
        """The live session the cookie names (touched), or None."""
        self.expire()
        sid = self.session_id(cookie)
        session = self._sessions.get(sid) if sid else None
        if session is not None:
            session.last_seen = self.clock()
        return session

    def new(self) -> Session:
        self.expire()
        while len(self._sessions) >= MAX_SESSIONS:  # the least recently used goes first, anonymous ones before
            anonymous = [s for s in self._sessions.values() if s.user is None]
            self.end(min(anonymous or self._sessions.values(), key=lambda s: s.last_seen))
        session = Session(secrets.token_urlsafe(24), last_seen=self.clock())
        self._sessions[session.id] = session
        return session

    def renew(self, session: Session) -> Session:
        """A new id for the same session (after a login, so an id known before it is worth nothing)."""
        self._sessions.pop(session.id, None)
        session.id = secrets.token_urlsafe(24)
        self._sessions[session.id] = session
        return session

    def alive(self, session: Session) -> bool:
        return self._sessions.get(session.id) is session

    def end(self, session: Session) -> None:
        if self._sessions.pop(session.id, None) is not None and self.on_end is not None:
            self.on_end(session)

    def expire(self) -> None:
        now = self.clock()
        for session in [s for s in self._sessions.values() if now - s.last_seen > self.idle_timeout_s]:
            self.end(session)

    def all(self) -> list[Session]:
        return list(self._sessions.values())
