"""Request dispatch: parse the header, check the version, decode, call the API's handler, encode the response.

A handler is `handle(ctx, request) -> dict | Awaitable[dict] | Deferred | None` registered with the version
range the broker supports; None means no response (Produce with acks=0), a Deferred an answer that waits
while the connection goes on (network/server.py). While client quotas are configured, `quotas` sees each
request before its handler and its response body before it is encoded (broker/quota_enforcement.py).
While the node has an authorizer, `authorization` stands between the dispatcher and the handlers, quotas included
(broker/authorization/). A response observer of an API sees its response bodies before they are encoded
(the Fetch bytes sent, metrics/broker_topic.py).
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.request_context import RequestContext
from odradek.network.server import CloseConnection, Connection, Deferred
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import encode_response_header, parse_request_header
from odradek.protocol.messages import API_BY_KEY
from odradek.protocol.schema import MalformedMessage

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
FETCH_API_KEY = 1


@dataclass(frozen=True)
class Route:
    api_key: int
    min_version: int
    max_version: int
    handle: Callable
    advertised_min: int | None = None  # what ApiVersions reports, when it differs (librdkafka needs Produce v0-2 listed)


class Dispatcher:
    def __init__(self, routes: list[Route], quotas=None, authorization=None):
        self.routes = {route.api_key: route for route in routes}
        self.quotas = quotas  # client quota enforcement (broker/quota_enforcement.py); consulted while `active`
        self.authorization = authorization  # broker/authorization/; consulted while its node has an authorizer
        # api key -> observer(ctx, request, response body) called before a response is encoded (metrics' bytes out)
        self.response_observers: dict[int, Callable] = {}

    def advertised_versions(self) -> list[dict]:
        return [{"api_key": r.api_key,
                 "min_version": r.min_version if r.advertised_min is None else r.advertised_min,
                 "max_version": r.max_version}
                for r in sorted(self.routes.values(), key=lambda r: r.api_key)]

    def __call__(self, connection: Connection, frame: bytearray):
        view = memoryview(frame)
        try:
            header = parse_request_header(view)
        except (MalformedMessage, ValueError) as exc:
            raise CloseConnection(f"malformed request header: {exc}") from None
        if connection.authenticator is not None:  # a SASL listener: only the SASL exchange until it succeeds
            refusal = connection.authenticator.refusal(header.api_key, int(time.monotonic() * 1000))
            if refusal is not None:
                raise CloseConnection(refusal)
        route = self.routes.get(header.api_key)
        if route is None:
            raise CloseConnection(f"unsupported api key {header.api_key} (client {header.client_id!r})")
        ctx = RequestContext(header.api_key, header.api_version, header.correlation_id, header.client_id, connection)
        if not route.min_version <= header.api_version <= route.max_version:
            if header.api_key == API_VERSIONS_KEY:
                # KIP-511: answer in v0 with ApiVersions' own range (all Kafka sends) so the client retries with
                # a version this node knows.
                return self._encode(ctx, 0, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": [
                    v for v in self.advertised_versions() if v["api_key"] == API_VERSIONS_KEY]})
            raise CloseConnection(f"unsupported version {header.api_version} of api key {header.api_key} "
                                  f"(client {header.client_id!r})")
        api = API_BY_KEY[header.api_key]
        try:
            request = api.decode_request(header.api_version, view, header.body_offset)
        except (MalformedMessage, ValueError, IndexError) as exc:
            raise CloseConnection(f"malformed {api.name} v{header.api_version} request "
                                  f"(correlation id {header.correlation_id}, client {header.client_id!r}): {exc}") from None
        quota = self.quotas.begin(ctx, request, len(frame)) if self.quotas is not None and self.quotas.active else None
        handle = route.handle if quota is None else functools.partial(quota.handle, route.handle)
        if self.authorization is not None and self.authorization.node.authorizer is not None:
            # Outside the quota, as in Kafka: what a principal may not do is refused as such, never throttled.
            handle = functools.partial(self.authorization.handle, handler=handle)
        try:
            result = handle(ctx, request)
        except CloseConnection:  # the handler's verdict on a request Kafka would not parse
            raise
        except Exception:
            log.exception("%s v%d request failed (correlation id %d, client %r)", api.name, header.api_version,
                          header.correlation_id, header.client_id)
            raise CloseConnection("internal error while handling the request") from None
        observer = self.response_observers.get(header.api_key)
        if isinstance(result, Deferred):
            return Deferred(self._finish(ctx, result.awaitable, quota, request, observer))
        if inspect.isawaitable(result):
            return self._finish(ctx, result, quota, request, observer)
        if quota is not None:
            result = quota.finish(result)
        if result is None:
            return None
        if observer is not None:
            observer(ctx, request, result)
        return self._encode(ctx, header.api_version, result)

    async def _finish(self, ctx: RequestContext, pending, quota=None, request=None, observer=None):
        try:
            result = await pending
        except Exception:
            log.exception("%s v%d request failed (correlation id %d, client %r)", API_BY_KEY[ctx.api_key].name,
                          ctx.api_version, ctx.correlation_id, ctx.client_id)
            raise CloseConnection("internal error while handling the request") from None
        if quota is not None:
            result = quota.finish(result)
        if result is None:
            return None
        if observer is not None:
            observer(ctx, request, result)
        return self._encode(ctx, ctx.api_version, result)

    @staticmethod
    def _encode(ctx: RequestContext, version: int, body: dict) -> list:
        header = encode_response_header(ctx.api_key, version, ctx.correlation_id)
        parts = API_BY_KEY[ctx.api_key].encode_response(version, body)
        if parts and isinstance(parts[0], bytes | bytearray):
            return [header + parts[0], *parts[1:]]
        return [header, *parts]
