"""Signed session cookies, CSRF tokens, session expiry."""

from odradek.console.session import Sessions


def test_cookie_round_trip_and_tampering():
    sessions = Sessions(key=b"k" * 32)
    session = sessions.new()
    cookie = sessions.cookie_value(session)
    assert sessions.get(cookie) is session
    sid, _, mac = cookie.rpartition(".")
    assert sessions.get(f"{sid}x.{mac}") is None
    assert sessions.get(f"{sid}.{'0' * len(mac)}") is None
    assert sessions.get("garbage") is None and sessions.get(None) is None
    assert Sessions(key=b"j" * 32).session_id(cookie) is None  # another console's key


def test_csrf_token_is_per_session():
    sessions = Sessions()
    a, b = sessions.new(), sessions.new()
    assert sessions.check_csrf(a, sessions.csrf_token(a))
    assert not sessions.check_csrf(a, sessions.csrf_token(b))
    assert not sessions.check_csrf(a, None) and not sessions.check_csrf(a, "")


def test_idle_sessions_end_and_renewal_changes_the_id():
    now = [0.0]
    ended = []
    sessions = Sessions(idle_timeout_s=10, clock=lambda: now[0], on_end=ended.append)
    session = sessions.new()
    old_cookie = sessions.cookie_value(session)
    sessions.renew(session)
    assert sessions.get(old_cookie) is None
    assert sessions.get(sessions.cookie_value(session)) is session
    now[0] = 11
    assert sessions.get(sessions.cookie_value(session)) is None
    assert ended == [session]


def test_flashes_show_once():
    session = Sessions().new()
    session.flash("done")
    assert session.take_flashes() == [("info", "done")]
    assert session.take_flashes() == []
