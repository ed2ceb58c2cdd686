"""Client quota enforcement: byte rates, request time, controller mutations and connection creation rates, applied
as Kafka 4's brokers apply them (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599, KIP-612), over network/quotas.py.

A room of its own on top of the broker, reached through two hooks and nothing else:

- the dispatcher, while any user or client-id quota is configured (`active`): `begin` sees each client request
  once it is decoded and returns a RequestQuota when a quota applies to the client (else None); the dispatcher
  then calls the handler through its `handle` and gives its `finish` the response body before encoding it.
  Produce counts the request's size; Fetch the response's size, its max_bytes capped beforehand at what one
  quota window allows, and a throttled fetch answered empty (and not counted); every request the time its
  handler runs on the event loop (request_percentage); CreateTopics, CreatePartitions and DeleteTopics the
  partitions they create or delete (controller_mutation_rate: newer versions refuse a topic with
  THROTTLING_QUOTA_EXCEEDED once the client's token bucket is empty, older ones only throttle). A throttle
  goes into the response's throttle_time_ms, and the connection is muted for as long (KIP-219).
- the acceptor of each client listener awaits `admit_connection` for a new connection: max.connection.creation.rate
  makes it wait, an address over its connection_creation_rate is refused (its socket closed after the throttle).

Who a client is: its connection's principal name ("User:alice" -> "alice"; "ANONYMOUS" on unauthenticated
listeners, as Kafka's quota entities name it) and the request header's client id. Requests between brokers
(follower fetches, transaction markers, AddPartitionsToTxn verification) are exempt, as Kafka's cluster
actions are. The quotas come from the metadata image; the node calls `reload` when its ClientQuotaRecords change.
Everything is measured on the node that serves the client, as in Kafka, except that Kafka measures controller
mutations on the active controller; Odradek's forwarding to the controller does not carry the principal, so the
broker the request reached measures them (on one node the same thing).
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import logging
import math
import socket
import time
from collections import Counter

from odradek.network.quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    INT_MAX,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    ConnectionQuotas,
    MutationQuota,
    QuotaConfigs,
)
from odradek.network.server import Connection, Deferred
from odradek.protocol.errors import ErrorCode
from odradek.protocol.file_region import FileRegion

log = logging.getLogger(__name__)

PRODUCE, FETCH, CREATE_TOPICS, DELETE_TOPICS, ADD_PARTITIONS_TO_TXN, WRITE_TXN_MARKERS, CREATE_PARTITIONS = (
    0, 1, 19, 20, 24, 27, 37)
# The versions from which a mutation quota refuses topics (KIP-599); older ones are only throttled.
STRICT_SINCE = {CREATE_TOPICS: 6, DELETE_TOPICS: 5, CREATE_PARTITIONS: 3}
RESULTS = {CREATE_TOPICS: "topics", DELETE_TOPICS: "responses", CREATE_PARTITIONS: "results"}
THROTTLED = "The throttling quota has been exceeded."
EXPIRY_INTERVAL_MS = 30_000  # how often idle measurements are dropped, as Kafka's metrics reaper runs
ZERO_UUID = bytes(16)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class QuotaEnforcement:
    def __init__(self, node):
        self.node = node
        config = node.config
        window_count, window_ms = config["quota.window.num"], config["quota.window.size.seconds"] * 1000
        self.configs = QuotaConfigs()
        self.clients = ClientQuotas(self.configs, window_count=window_count, window_ms=window_ms,
                                    controller_window_count=config["controller.quota.window.num"],
                                    controller_window_ms=config["controller.quota.window.size.seconds"] * 1000)
        self.connections = ConnectionQuotas(self.configs, window_count=window_count, window_ms=window_ms)
        self.active = False  # a user or client-id quota is configured: the dispatcher shows us its requests
        self._keys: frozenset[str] = frozenset()  # the user and client-id quota keys configured for anyone
        self._addresses: dict[str, str | None] = {}  # host names of ip entities -> the address each resolved to
        self._lookups: set[asyncio.Task] = set()
        self._clients_expired_at = self._connections_expired_at = monotonic_ms()

    def reload(self) -> None:
        """Take the client quotas of the metadata image (after a ClientQuotaRecord, a snapshot, at start)."""
        configs = QuotaConfigs()
        keys = set()
        for pairs, values in self.node.image.client_quotas.items():
            entity = dict(pairs)
            if entity.get(IP) is not None and not _is_address(entity[IP]):
                address = self._address_of(entity[IP])
                if address is None:
                    continue
                entity = {IP: address}
            elif IP not in entity:
                keys.update(values)
            for key, value in values.items():
                configs.alter(entity, key, math.inf if math.isnan(value) else value)  # Kafka: NaN never throttles
        self.configs = self.clients.configs = self.connections.configs = configs
        self._keys = frozenset(keys)
        self.active = bool(keys)

    def _address_of(self, host: str) -> str | None:
        """The address of an ip entity's host name, as Kafka resolves it when it applies the quota. The lookup
        runs off the event loop, once per name; the quota applies from when it answers (a reload)."""
        if host not in self._addresses:
            self._addresses[host] = None
            lookup = asyncio.get_running_loop().create_task(self._resolve(host))
            self._lookups.add(lookup)
            lookup.add_done_callback(self._lookups.discard)
        return self._addresses[host]

    async def _resolve(self, host: str) -> None:
        try:
            found = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, ValueError) as exc:
            log.warning("Ignoring the connection_creation_rate of ip %s: it does not resolve (%s)", host, exc)
            return
        self._addresses[host] = found[0][4][0]
        self.reload()

    # requests

    def begin(self, ctx, request: dict, size: int) -> RequestQuota | None:
        """A request of `size` bytes, decoded: what its client's quotas do to it, or None if none applies."""
        api_key = ctx.api_key
        if api_key == WRITE_TXN_MARKERS or api_key == ADD_PARTITIONS_TO_TXN and ctx.api_version >= 4 or \
                api_key == FETCH and _replica_id(ctx.api_version, request) >= 0:
            return None  # between brokers: exempt
        user = ctx.connection.principal.partition(":")[2]
        client_id = ctx.client_id or ""
        clients, keys = self.clients, self._keys
        now = monotonic_ms()
        if now - self._clients_expired_at >= EXPIRY_INTERVAL_MS:
            self._clients_expired_at = now
            clients.expire_idle(now)
        throttle_ms, fetch_capped, mutations = 0, False, None
        if api_key == PRODUCE and PRODUCER_BYTE_RATE in keys:
            throttle_ms = clients.record("produce", user, client_id, size, now)
        elif api_key == FETCH and CONSUMER_BYTE_RATE in keys:
            largest = clients.largest_unthrottled("fetch", user, client_id)
            if largest is not None:  # more would certainly be throttled, and emptied on every retry
                fetch_capped = True
                request["max_bytes"] = min(request["max_bytes"], int(min(largest, INT_MAX)))
                request["min_bytes"] = min(request["min_bytes"], request["max_bytes"])
        elif api_key in STRICT_SINCE and CONTROLLER_MUTATION_RATE in keys and \
                clients.configs.quota_for(user, client_id, CONTROLLER_MUTATION_RATE)[0] is not None:
            mutations = clients.mutation_quota(user, client_id, ctx.api_version >= STRICT_SINCE[api_key], now)
        timed = REQUEST_PERCENTAGE in keys and not (api_key == PRODUCE and request.get("acks") == 0) and \
            clients.configs.quota_for(user, client_id, REQUEST_PERCENTAGE)[0] is not None  # acks=0: exempt, as Kafka
        if not (throttle_ms or fetch_capped or mutations or timed):
            return None
        if throttle_ms:
            _mute(ctx.connection, throttle_ms)
        return RequestQuota(self, ctx, user, client_id, throttle_ms, fetch_capped, mutations, timed,
                            request.get("session_epoch", -1) if fetch_capped else -1)

    # connections

    async def admit_connection(self, listener: str, address: str) -> float:
        """Count a new connection of a client listener: wait while the node is over max.connection.creation.rate
        (the inter-broker listener only when it is the node's only one), then 0.0 to admit it, or the seconds
        after which to close it when its address is over its connection_creation_rate."""
        connections, config = self.connections, self.node.config
        connections.max_connection_creation_rate = self.node.controller.dynamic["max.connection.creation.rate"]
        if listener != config.inter_broker_listener or len(config.listeners) == 1:
            delay_ms = connections.accept_delay_ms(monotonic_ms())
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
        now = monotonic_ms()
        if now - self._connections_expired_at >= EXPIRY_INTERVAL_MS:
            self._connections_expired_at = now
            connections.expire_idle(now)
        refused_ms = connections.ip_throttle_ms(address, now)
        if refused_ms:
            log.debug("Delaying closing of connection from %s for %d ms (connection_creation_rate)", address,
                      refused_ms)
        return refused_ms / 1000


class RequestQuota:
    """One request's dealings with its client's quotas, from QuotaEnforcement.begin."""

    __slots__ = ("enforcement", "ctx", "user", "client_id", "throttle_ms", "fetch_capped", "mutations", "timed",
                 "session_epoch", "busy_s")

    def __init__(self, enforcement: QuotaEnforcement, ctx, user: str, client_id: str, throttle_ms: int,
                 fetch_capped: bool, mutations: MutationQuota | None, timed: bool, session_epoch: int):
        self.enforcement = enforcement
        self.ctx = ctx
        self.user = user
        self.client_id = client_id
        self.throttle_ms = throttle_ms  # what begin measured (produce bytes); the connection is already muted
        self.fetch_capped = fetch_capped
        self.mutations = mutations
        self.timed = timed
        self.session_epoch = session_epoch
        self.busy_s = 0.0  # handler time on the event loop, for request_percentage

    def handle(self, handler, ctx, request: dict):
        """Run the handler (as the dispatcher would), timing it, and by topic under a strict mutation quota."""
        if self.mutations is not None:
            mutate = self._mutate(handler, ctx, request)
            return _Timed(mutate, self) if self.timed else mutate
        if not self.timed:
            return handler(ctx, request)
        start = time.perf_counter()
        try:
            result = handler(ctx, request)
        finally:
            self.busy_s += time.perf_counter() - start
        if isinstance(result, Deferred):
            return Deferred(_Timed(result.awaitable, self))
        return _Timed(result, self) if inspect.isawaitable(result) else result

    def finish(self, body: dict | None) -> dict | None:
        """The response body about to be encoded (None: no response): record what is measured at the answer,
        set the throttle time, mute the connection."""
        clients = self.enforcement.clients
        now = monotonic_ms()
        throttle_ms = 0
        if self.timed:
            throttle_ms = clients.record("request", self.user, self.client_id, self.busy_s * 1000, now)
        if self.fetch_capped and body is not None and body.get("error_code") == ErrorCode.NONE:
            size = _fetch_size(body)
            throttle_ms = max(throttle_ms, clients.record("fetch", self.user, self.client_id, size, now))
            if throttle_ms > 0:  # answered empty, so its bytes do not count
                clients.record("fetch", self.user, self.client_id, -size, now, enforce=False)
                body = {**body, "responses": [], "session_id": body["session_id"] if self.session_epoch > 0 else 0}
        if self.mutations is not None:
            throttle_ms = max(throttle_ms, self.mutations.throttle_ms(now))
        if throttle_ms > 0:
            _mute(self.ctx.connection, throttle_ms)
        throttle_ms = max(throttle_ms, self.throttle_ms)
        if throttle_ms > 0 and body is not None and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(body["throttle_time_ms"], throttle_ms)
        return body

    async def _mutate(self, handler, ctx, request: dict) -> dict:
        """CreateTopics, CreatePartitions or DeleteTopics under a controller mutation quota. Kafka's controller
        checks the quota topic by topic: a strict quota refuses each topic once the bucket is below zero, so the
        request is handled a topic at a time (the topics named more than once together: they are refused as
        duplicates). The partitions of each topic that succeeds are taken from the bucket."""
        api_key, mutations = ctx.api_key, self.mutations
        image = self.enforcement.node.image
        items_key = "topic_names" if api_key == DELETE_TOPICS and ctx.api_version < 6 else "topics"
        results_key = RESULTS[api_key]
        items = request[items_key]
        if ctx.api_version < STRICT_SINCE[api_key]:
            counts = [_partitions_changed(api_key, image, item) for item in items]
            response = await _answer(handler(ctx, request))
            self._take(api_key, counts, response[results_key])
            return response
        names = [_name_of(item) for item in items]
        repeated = {name for name, count in Counter(names).items() if count > 1 and name is not None}
        groups: list[list] = []
        by_name: dict[str, list] = {}
        for item, name in zip(items, names, strict=True):
            if name in repeated:
                if name not in by_name:
                    by_name[name] = []
                    groups.append(by_name[name])
                by_name[name].append(item)
            else:
                groups.append([item])
        answered: dict | None = None
        results: list[dict] = []
        for group in groups:
            if mutations.record(0, monotonic_ms()) == ErrorCode.THROTTLING_QUOTA_EXCEEDED:
                results += [_refused(api_key, image, item) for item in group]
                continue
            counts = [_partitions_changed(api_key, image, item) for item in group]
            answered = await _answer(handler(ctx, {**request, items_key: group}))
            self._take(api_key, counts, answered[results_key])
            results += answered[results_key]
        return {**(answered or {"throttle_time_ms": 0}), results_key: results}

    def _take(self, api_key: int, counts: list[int], results: list[dict]) -> None:
        if len(counts) != len(results):
            return
        for count, result in zip(counts, results, strict=True):
            if result["error_code"] == ErrorCode.NONE:
                if api_key == CREATE_TOPICS:
                    count = max(result.get("num_partitions", 0), 0)
                self.mutations.record(count, monotonic_ms())


class _Timed:
    """Awaits another awaitable, adding the time each of its steps runs to its RequestQuota's busy time: the time
    a request's handler keeps the event loop, not the time it waits."""

    __slots__ = ("_awaitable", "_quota")

    def __init__(self, awaitable, quota: RequestQuota):
        self._awaitable = awaitable
        self._quota = quota

    def __await__(self):
        steps = self._awaitable.__await__()
        quota = self._quota
        value, error = None, None
        while True:
            start = time.perf_counter()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                quota.busy_s += time.perf_counter() - start
                return done.value
            except BaseException:
                quota.busy_s += time.perf_counter() - start
                raise
            quota.busy_s += time.perf_counter() - start
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:  # cancellation, or what the awaited future raised
                value, error = None, exc


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _mute(connection: Connection, throttle_ms: int) -> None:
    until = time.monotonic() + throttle_ms / 1000
    if until > connection.muted_until:
        connection.muted_until = until


async def _answer(result):
    return await result if inspect.isawaitable(result) else result


def _replica_id(version: int, request: dict) -> int:
    return request["replica_state"]["replica_id"] if version >= 15 else request.get("replica_id", -1)


def _fetch_size(body: dict) -> int:
    """The size of a fetch response: its records, and about what the fields around them take."""
    size = 16
    for topic in body["responses"]:
        size += 24 + len(topic.get("topic") or "")
        for partition in topic["partitions"]:
            records = partition["records"]
            size += 52 + (records.size if isinstance(records, FileRegion) else len(records or b""))
    return size


def _name_of(item) -> str | None:
    return item if isinstance(item, str) else item.get("name")


def _topic_of(image, item):
    if isinstance(item, str):
        return image.topics.get(item)
    if item.get("name") is not None:
        return image.topics.get(item["name"])
    return image.topics_by_id.get(item.get("topic_id", ZERO_UUID))


def _partitions_changed(api_key: int, image, item) -> int:
    """The partitions a topic's creation, growth or deletion changes, as the image stands before it."""
    if api_key == CREATE_TOPICS:
        return 0  # taken from the result, which knows the defaults it was created with
    topic = _topic_of(image, item)
    current = len(topic.partitions) if topic is not None else 0
    if api_key == CREATE_PARTITIONS:
        return max(item["count"] - current, 0)
    return current


def _refused(api_key: int, image, item) -> dict:
    """A topic's result when the strict mutation quota refuses it."""
    error = {"error_code": ErrorCode.THROTTLING_QUOTA_EXCEEDED, "error_message": THROTTLED}
    if api_key == CREATE_TOPICS:
        return {"name": item["name"], "topic_id": ZERO_UUID, **error, "num_partitions": -1, "replication_factor": -1,
                "configs": None}
    if api_key == CREATE_PARTITIONS:
        return {"name": item["name"], **error}
    topic = _topic_of(image, item)
    return {"name": _name_of(item) if topic is None else topic.name,
            "topic_id": topic.topic_id if topic is not None else (ZERO_UUID if isinstance(item, str)
                                                                    else item.get("topic_id", ZERO_UUID)), **error}
