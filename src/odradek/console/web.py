"""The console's aiohttp side: routes, sessions and access control, on a node's HTTP server or on its own.

`add_console(app, node)` adds the console's routes to the node's HTTP application (the one serving /metrics)
at `/`; `create_app(settings)` makes an application of its own, which `serve` runs for `odradek console`.
The console adds no middleware (the node's other routes stay as they are): every console handler is wrapped
by `Console.endpoint`, which finds the browser's session from its signed cookie, sends people who must log in
to the login form, checks the CSRF token of every POST (a REST endpoint also takes a JSON body instead),
turns a ConsoleError into a page saying what failed, and sets headers that keep pages from being framed or
running anything but the console's own script.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from odradek.console import assets
from odradek.console.cluster import ClusterClient, ConsoleError, RawCluster
from odradek.console.html import Html, html, join, notice, url
from odradek.console.schema_registry import RegistryClient
from odradek.console.session import COOKIE, Session, Sessions
from odradek.console.settings import ConsoleSettings

log = logging.getLogger(__name__)

WORKER_THREADS = 8  # the confluent-kafka calls of every session share these
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
NAVIGATION = (("/", "Overview"), ("/topics", "Topics"), ("/schemas", "Schemas"), ("/groups", "Consumer groups"),
              ("/transactions", "Transactions"), ("/quorum", "Quorum"), ("/links", "Links"),
              ("/balancer", "Balancer"), ("/security", "ACLs & users"))
CONSOLE_KEY: web.AppKey[Console] = web.AppKey("odradek_console")


@dataclass
class Context:
    """What a page handler gets: the request, the session, the cluster as this person reaches it."""

    request: web.Request
    console: Console
    session: Session
    cluster: ClusterClient  # None only on the login and logout pages

    @property
    def csrf(self) -> str:
        return self.console.sessions.csrf_token(self.session)

    @property
    def query(self):
        return self.request.query

    async def form(self) -> dict[str, str]:
        data = await self.request.post()
        return {k: v for k, v in data.items() if isinstance(v, str)}

    def flash(self, text: str, kind: str = "info") -> None:
        self.session.flash(text, kind)

    def redirect(self, location: str, message: str | None = None, kind: str = "info") -> web.Response:
        if message:
            self.flash(message, kind)
        return web.Response(status=303, headers={"Location": location})

    def page(self, title: str, body: Html, *, active: str = "", status: int = 200) -> web.Response:
        return web.Response(text=self.console.layout(title, body, self.session, self.csrf, active), status=status,
                            content_type="text/html", charset="utf-8")

    def fragment(self, body: Html) -> web.Response:
        return web.Response(text=str(body), content_type="text/html", charset="utf-8")


Handler = Callable[[Context], Awaitable[web.StreamResponse]]


class Console:
    """The console's state: settings, the worker threads, the sessions, and the cluster clients."""

    def __init__(self, settings: ConsoleSettings, title: str = "Odradek console",
                 registry_port: Callable[[], int | None] | None = None):
        self.settings = settings
        self.title = title
        self.executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="console")
        # the schema registry of the Schemas pages; None: not configured (no Schemas in the navigation)
        self.registry = RegistryClient(settings.schema_registry, port=registry_port) \
            if settings.schema_registry else None
        self.sessions = Sessions(on_end=self._session_ended)
        self._shared: ClusterClient | None = None  # everyone's, when nobody logs in
        self._closing: set[asyncio.Task] = set()

    # -----------------------------------------------------------------------------------------------
    # Clusters per identity

    def shared_cluster(self) -> ClusterClient:
        if self._shared is None:
            self._shared = ClusterClient(self.settings, self.settings.client_properties(), self.executor)
        return self._shared

    async def log_in(self, session: Session, username: str, password: str, mechanism: str) -> None:
        """Check the credentials with a request of their own (a failed SASL login answers at once), then give
        the session clients that log in as that user."""
        if mechanism not in self.settings.login_mechanisms:
            raise ConsoleError(f"the console does not log in with {mechanism}")
        properties = self.settings.client_properties(username, password, mechanism)
        probe = RawCluster(self.settings.bootstrap, properties, self.settings.timeout_s)
        try:
            await probe.metadata([])
        finally:
            await probe.close()
        if session.cluster is not None:
            self._close_later(session.cluster)
        session.user, session.mechanism = username, mechanism
        session.cluster = ClusterClient(self.settings, properties, self.executor, user=username)

    def _session_ended(self, session: Session) -> None:
        if session.cluster is not None and session.cluster is not self._shared:
            self._close_later(session.cluster)
        session.cluster = None

    def _close_later(self, cluster: ClusterClient) -> None:
        try:
            task = asyncio.get_running_loop().create_task(cluster.close())
        except RuntimeError:  # no loop: the process is ending
            return
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for session in self.sessions.all():
            self.sessions.end(session)
        if self._shared is not None:
            await self._shared.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        if self.registry is not None:
            await self.registry.close()
        self.executor.shutdown(wait=False, cancel_futures=True)

    # -----------------------------------------------------------------------------------------------
    # Requests

    def endpoint(self, handler: Handler, *, kind: str = "page", public: bool = False):
        """`handler` behind the session, login and CSRF checks; kind is page, fragment, api or rest (how a
        failure is answered; rest: the REST API's JSON errors, and a JSON body stands for the CSRF token)."""

        async def handle(request: web.Request) -> web.StreamResponse:
            cookie_sid = self.sessions.session_id(request.cookies.get(COOKIE))
            session = self.sessions.get(request.cookies.get(COOKIE)) or self.sessions.new()
            if session.cluster is None and not self.settings.login_required:
                session.cluster = self.shared_cluster()
            if session.cluster is None and not public:
                response = self._login_needed(request, kind)
            elif request.method == "POST" and not (kind == "rest" and _json_body(request)) \
                    and not await self._csrf_ok(request, session):
                response = self._refused(request, session, kind)
            else:
                context = Context(request, self, session, session.cluster)
                try:
                    response = await handler(context)
                except ConsoleError as exc:
                    response = self._failed(context, str(exc), kind)
                except web.HTTPException:
                    raise
                except Exception as exc:  # a bug, or a client library error nobody translated: said, and logged
                    log.exception("console request %s %s failed", request.method, request.path_qs)
                    response = self._failed(context, f"the console failed ({exc!r}); its log has the details", kind)
            if self.sessions.alive(session):
                if session.id != cookie_sid:
                    response.set_cookie(COOKIE, self.sessions.cookie_value(session), httponly=True,
                                        samesite="Strict", path="/", secure=request.secure)
            elif cookie_sid is not None:
                response.del_cookie(COOKIE, path="/")
            response.headers.update(SECURITY_HEADERS)
            return response

        return handle

    async def _csrf_ok(self, request: web.Request, session: Session) -> bool:
        token = request.headers.get("X-CSRF-Token")
        if token is None:
            data = await request.post()
            token = data.get("csrf") if isinstance(data.get("csrf"), str) else None
        return self.sessions.check_csrf(session, token)

    def _login_needed(self, request: web.Request, kind: str) -> web.StreamResponse:
        if kind == "rest":
            return rest_error(401, "log in first: POST /login with the username, password and mechanism fields "
                                   "(docs/console.md, REST API)")
        if kind != "page" or request.method != "GET":
            return web.json_response({"error": "log in first"}, status=401)
        return web.Response(status=303, headers={"Location": url("/login", next=request.path_qs)})

    def _refused(self, request: web.Request, session: Session, kind: str) -> web.StreamResponse:
        if kind == "rest":
            return rest_error(403, "send the request body as Content-Type: application/json (or with the session's "
                                   "CSRF token)")
        text = "this form expired or did not come from the console (CSRF check failed); reload the page and retry"
        if kind != "page":
            return web.json_response({"error": text}, status=403)
        return web.Response(text=self.layout("Refused", notice(text, "error"), session,
                                             self.sessions.csrf_token(session)),
                            status=403, content_type="text/html", charset="utf-8")

    def _failed(self, context: Context, text: str, kind: str) -> web.StreamResponse:
        if kind == "rest":
            return rest_error(502, text)
        if kind == "api":
            return web.json_response({"error": text}, status=502)
        if kind == "fragment":
            return context.fragment(notice(text, "error"))
        back = _same_origin_referer(context.request) if context.request.method == "POST" else None
        if back:  # back to the form, saying why
            return context.redirect(back, text, "error")
        return context.page("Error", notice(text, "error"), status=502)

    # -----------------------------------------------------------------------------------------------
    # Layout

    def layout(self, title: str, body: Html, session: Session, csrf: str, active: str = "") -> str:
        nav = join(html('<a href="{}"{}>{}</a>', path, Html(' class="active"') if path == active else "", label)
                   for path, label in NAVIGATION if path != "/schemas" or self.registry is not None
                   ) if session.cluster is not None else Html("")
        if session.user is not None:
            who = html('<form method="post" action="/logout" class="who">{} · <input type="hidden" name="csrf" '
                       'value="{}"><button type="submit" class="link" id="logout">log out</button></form>',
                       session.user, csrf)
        elif self.settings.login_required:
            who = Html("")
        else:
            who = html('<span class="who">{}</span>', self.settings.bootstrap)
        flashes = join(notice(text, kind) for kind, text in session.take_flashes())
        return str(html('<!doctype html><html lang="en"><head><meta charset="utf-8">'
                        '<meta name="viewport" content="width=device-width, initial-scale=1">'
                        '<title>{} · {}</title><link rel="stylesheet" href="/assets/console.css">'
                        '<script src="/assets/console.js" defer></script></head><body>'
                        '<header><a class="brand" href="/">{}</a><nav>{}</nav>{}</header>'
                        '<main><h1>{}</h1>{}{}</main></body></html>',
                        title, self.title, self.title, nav, who, title, flashes, body))


def rest_error(status: int, message: str) -> web.Response:
    """A REST API error: the HTTP status and a one-line message, as JSON."""
    return web.json_response({"error_code": status, "message": message}, status=status)


def _json_body(request: web.Request) -> bool:
    """Whether a request says its body is JSON, which makes it safe from cross-site request forgery without a
    token: another site can make a browser POST here only as a form (urlencoded, multipart or text/plain) or with
    fetch, which must first ask this server with a CORS preflight before it sends any other Content-Type, and the
    console answers no preflight. (The REST API's DELETE is safe for the same reason: no browser sends one to
    another site without a preflight.)"""
    return request.content_type == "application/json"


def _same_origin_referer(request: web.Request) -> str | None:
    referer = request.headers.get("Referer")
    if not referer:
        return None
    parts = urlsplit(referer)
    if parts.netloc and parts.netloc != request.host:
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


# ---------------------------------------------------------------------------------------------------
# Login


async def login_form(context: Context) -> web.StreamResponse:
    console = context.console
    if context.session.cluster is not None and context.session.user is not None:
        return context.redirect(_next_path(context.query.get("next")))
    return context.page("Log in", login_body(console.settings, context.csrf, context.query.get("next", "/")))


def login_body(settings: ConsoleSettings, csrf: str, next_path: str, username: str = "",
               mechanism: str | None = None) -> Html:
    if not settings.login_mechanisms:
        return notice(f"The cluster connection needs a SASL login the console cannot do: {settings.note}", "error")
    mechanisms = [(m, m) for m in settings.login_mechanisms]
    from odradek.console.html import button, field, form, hidden, select, text_input

    body = join([
        field("User", text_input("username", username, required=True, id="username")),
        field("Password", text_input("password", "", required=True, kind="password", id="password")),
        field("Mechanism", select("mechanism", mechanisms, mechanism or settings.login_mechanisms[0]))
        if len(mechanisms) > 1
        else hidden("mechanism", mechanisms[0][0]),
        hidden("next", next_path), button("Log in", id="login"),
    ])
    return join([html('<p>The cluster at {} takes SASL logins: log in as a user of the cluster. What you see and '
                      'may change is what its ACLs allow that user.</p>', settings.bootstrap),
                 form("/login", csrf, body, classes="login")])


async def login_submit(context: Context) -> web.StreamResponse:
    form = await context.form()
    username, password = form.get("username", "").strip(), form.get("password", "")
    mechanism = form.get("mechanism") or (context.console.settings.login_mechanisms or ("",))[0]
    next_path = _next_path(form.get("next"))
    try:
        if not username or not password:
            raise ConsoleError("enter a user name and a password")
        await context.console.log_in(context.session, username, password, mechanism)
    except ConsoleError as exc:
        await asyncio.sleep(0.5)  # a little friction for password guessing
        body = join([notice(f"login failed: {exc}", "error"),
                     login_body(context.console.settings, context.csrf, next_path, username, mechanism)])
        return context.page("Log in", body, status=401)
    context.console.sessions.renew(context.session)
    return context.redirect(next_path, f"logged in as {username}")


async def logout(context: Context) -> web.StreamResponse:
    context.console.sessions.end(context.session)
    return web.Response(status=303, headers={"Location": "/login"})


def _next_path(value: str | None) -> str:
    """Only a path of this site (never //other.host or a scheme) is somewhere to go after logging in."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


async def asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    found = assets.ASSETS.get(name)
    if found is None:
        raise web.HTTPNotFound()
    content_type, text = found
    return web.Response(text=text, content_type=content_type, charset="utf-8",
                        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"})


# ---------------------------------------------------------------------------------------------------
# Mounting


def add_routes(app: web.Application, console: Console) -> None:
    from odradek.console import balancer, links, pages, schemas

    app[CONSOLE_KEY] = console
    e = console.endpoint
    router = app.router
    router.add_get("/assets/{name}", asset)
    router.add_get("/login", e(login_form, public=True))
    router.add_post("/login", e(login_submit, public=True))
    router.add_post("/logout", e(logout, public=True))
    for method, path, handler, kind in (*pages.ROUTES, *schemas.ROUTES, *links.ROUTES, *balancer.ROUTES):
        router.add_route(method, path, e(handler, kind=kind))

    async def close(_: web.Application) -> None:
        await console.close()

    app.on_cleanup.append(close)


def add_console(app: web.Application, node) -> None:
    """Serve the console at `/` of the node's HTTP application. The console reaches the cluster as a client
    of the node's own client listener; from `node` it reads only that listener's address and security, and
    its schema.registry.listener (the Schemas pages show the node's own registry)."""
    from odradek.console.settings import from_node_config

    config = getattr(node, "config", node)
    settings = from_node_config(config)
    if not settings.login_required and not _loopback_only(config):
        log.warning("The web console on metrics.listener is open to anyone who can reach that port, with the rights "
                    "of a client of this node's %s listener (no login without SASL)", settings.bootstrap)
    registry = getattr(node, "registry_server", None)  # its port, when the setting named port 0
    add_routes(app, Console(settings, registry_port=(lambda: registry.port) if registry is not None else None))


def _loopback_only(config) -> bool:
    from odradek.config import parse_metrics_listener

    try:
        host, _ = parse_metrics_listener(config["metrics.listener"])
    except Exception:
        return True  # not the node's HTTP port: nothing to warn about here
    return is_loopback(host)


def is_loopback(host: str) -> bool:
    """Whether an HTTP listener's host is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(settings: ConsoleSettings) -> web.Application:
    app = web.Application()
    add_routes(app, Console(settings))
    return app


async def serve(settings: ConsoleSettings, host: str, port: int, announce: Callable[[str], None] = print) -> None:
    """Run the console until SIGTERM or SIGINT (or cancelled); `announce` gets its URL once it listens (port 0:
    a free port). Stopping closes the console's cluster clients."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(number, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass
    runner = web.AppRunner(create_app(settings), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        shown = f"[{host}]" if ":" in host else host
        announce(f"http://{shown}:{bound}/")
        await stop.wait()
    finally:
        await runner.cleanup()

