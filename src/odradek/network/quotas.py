"""Client quotas, sans-I/O: the configured quotas, their precedence, and the rates and throttle times Kafka derives.

No clocks: every call that measures takes `now_ms`, and nothing here sleeps or closes sockets; callers get the
throttle time (or error code) and act on it.

    configs = QuotaConfigs()
    if (error := validate_alteration(entity, ops)) is None:        # AlterClientQuotas, per entry
        for key, value in ops:
            configs.alter(entity, key, value)                     # value None removes the key
    configs.describe(components, strict)                          # DescribeClientQuotas, after validate_filter()

    quotas = ClientQuotas(configs)
    throttle_ms = quotas.record("produce", user, client_id, request_bytes, now_ms)
    max_bytes = quotas.largest_unthrottled("fetch", user, client_id)   # cap a fetch at it; if the fetch is then
    quotas.record("fetch", user, client_id, -size, now_ms, enforce=False)  # throttled, take it back, answer empty
    mutations = quotas.mutation_quota(user, client_id, api_version >= strict_since, now_ms)
    error = mutations.record(partition_count, now_ms)             # per topic; then mutations.throttle_ms(now_ms)

    connections = ConnectionQuotas(configs, max_connection_creation_rate)
    delay_ms = connections.accept_delay_ms(now_ms)                # the acceptor waits this long, then:
    refuse_ms = connections.ip_throttle_ms(ip, now_ms)            # > 0: refused, close the socket after it

Semantics follow Kafka 4 (ClientQuotaManager and its request and controller-mutation variants, ConnectionQuotas in
SocketServer, ClientQuotaControlManager and ClientQuotasImage):

- Entities are dicts {type: name}, types "user", "client-id" and "ip"; a None name is that type's default entity.
  user/client-id entities take producer_byte_rate, consumer_byte_rate, request_percentage and
  controller_mutation_rate; ip entities take connection_creation_rate. Byte rates and connection rates must be
  whole numbers.
- A client's quota for a key is the first of /users/<u>/clients/<c>, /users/<u>/clients/<default>, /users/<u>,
  /users/<default>/clients/<c>, /users/<default>/clients/<default>, /users/<default>, /clients/<c>,
  /clients/<default> that defines it. The level that wins also decides whose usage is measured together (Kafka's
  quota metric tags): a /users/alice quota is shared by all of alice's client ids, a /clients/<default> quota is
  measured per client id.
- Byte rates and request time are measured as Kafka's Rate: the sum of the last `window_count` one-second samples
  divided by the time since the oldest began, counted as at least `window_count - 1` whole windows (so a new
  client is not judged on its first second alone). Over the quota, the throttle is the time that brings the
  rate back to it if nothing more is recorded: (rate - quota) / quota * that time. Kafka caps the request-time
  throttle, and the connection delays, at one window; byte-rate throttles are not capped.
- Controller mutations (partitions created or deleted) use a token bucket refilled at the quota up to a burst of
  `window_count` windows' worth. Strict quotas (newer request versions) refuse a topic with
  THROTTLING_QUOTA_EXCEEDED once the bucket is below zero, and only then throttle; permissive ones accept
  everything and throttle while it is below zero.
- Only clients with a quota are measured (Kafka measures every client once any quota of the kind exists, which
  only feeds its metrics), and a measurement idle for an hour is dropped by `expire_idle` (Kafka's sensor
  expiry), so the state does not grow with client ids or addresses.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from odradek.protocol.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

WINDOW_COUNT = 11  # quota.window.num, controller.quota.window.num
WINDOW_MS = 1000  # quota.window.size.seconds, controller.quota.window.size.seconds
IDLE_EXPIRY_MS = 3_600_000
INT_MAX = 2**31 - 1  # max.connection.creation.rate's default: no limit

QuotaEntity = Mapping[str, str | None]
MetricKey = tuple[str, str]  # (user, client id) as Kafka tags the shared measurement; "" where not part of it
Kind = Literal["produce", "fetch", "request"]
Error = tuple[ErrorCode, str]
DescribedQuotas = list[tuple[dict[str, str | None], dict[str, float]]]

_ENTITY_TYPES = (USER, CLIENT_ID, IP)
_KIND_KEYS: dict[str, str] = {"produce": PRODUCER_BYTE_RATE, "fetch": CONSUMER_BYTE_RATE, "request": REQUEST_PERCENTAGE}
# Key -> (largest value, its type's name) for whole-number keys, None for the fractional ones.
_USER_CLIENT_KEYS: dict[str, tuple[float, str] | None] = {
    PRODUCER_BYTE_RATE: (float(2**63 - 1), "a LONG"),
    CONSUMER_BYTE_RATE: (float(2**63 - 1), "a LONG"),
    REQUEST_PERCENTAGE: None,
    CONTROLLER_MUTATION_RATE: None,
}
_IP_KEYS: dict[str, tuple[float, str] | None] = {CONNECTION_CREATION_RATE: (float(INT_MAX), "an INT")}


class FilterComponent(NamedTuple):
    """One component of a DescribeClientQuotas filter."""

    entity_type: str
    match_type: int
    match: str | None = None


def validate_alteration(entity: QuotaEntity, ops: Sequence[tuple[str, float | None]],
                        resolves: Callable[[str], bool] | None = None) -> Error | None:
    """Why AlterClientQuotas must refuse this entry (an op's value None removes the key), or None. An ip entity
    must name an address, or a host for which `resolves` is true (the caller did the lookup)."""
    keys = [key for key, _ in ops]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            return ErrorCode.INVALID_REQUEST, f"Duplicate quota key {key}, not updating quota for {dict(entity)}"
    message = _entity_error(entity, resolves)
    if message is not None:
        return ErrorCode.INVALID_REQUEST, message
    allowed = _IP_KEYS if IP in entity else _USER_CLIENT_KEYS
    for key, value in ops:
        if value is None:
            continue  # removing a key that is not set, or not valid, is no change
        message = _value_error(allowed, key, value)
        if message is not None:
            return ErrorCode.INVALID_REQUEST, message
    return None


def _entity_error(entity: QuotaEntity, resolves: Callable[[str], bool] | None) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    for entity_type, name in entity.items():
        if entity_type not in _ENTITY_TYPES:
            return f"Unhandled client quota entity type: {entity_type}"
        if name == "":
            return f"Empty {entity_type} not supported"
    if IP in entity:
        if len(entity) > 1:
            # sic: Kafka's message runs "should" and "not" together
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        name = entity[IP]
        if name is not None and not _is_ip_literal(name) and not (resolves is not None and resolves(name)):
            return f"{name} is not a valid IP or resolvable host."
    return None


def _value_error(allowed: Mapping[str, tuple[float, str] | None], key: str, value: float) -> str | None:
    if key not in allowed:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    integral = allowed[key]
    if integral is not None:
        largest, type_name = integral
        if value > largest:
            return f"Proposed value for {key} is too large for {type_name}."
        if abs(math.fmod(value, 1.0)) > 1e-6:
            return f"{key} cannot be a fractional value."
    return None


def validate_filter(components: Sequence[FilterComponent]) -> Error | None:
    """Why DescribeClientQuotas must refuse this filter, or None."""
    seen: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            return ErrorCode.INVALID_REQUEST, "Invalid empty entity type."
        if entity_type in seen:
            return ErrorCode.INVALID_REQUEST, f"Entity type {entity_type} cannot appear more than once in the filter."
        seen.add(entity_type)
        if entity_type not in _ENTITY_TYPES:
            return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}"
        if match_type == MATCH_EXACT and match is None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
        if match_type == MATCH_DEFAULT and match is not None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
        if match_type == MATCH_SPECIFIED and match is not None:
            return ErrorCode.INVALID_REQUEST, ("Request specified MATCH_TYPE_SPECIFIED, "
                                               "but also specified a match string.")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            return ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}"
    if IP in seen and (USER in seen or CLIENT_ID in seen):
        return ErrorCode.INVALID_REQUEST, ("Invalid entity filter component combination. IP filter component "
                                           "should not be used with user or clientId filter component.")
    return None


def describe_entities(quotas: Iterable[tuple[QuotaEntity, Mapping[str, float]]], components: Iterable[FilterComponent],
                      strict: bool) -> DescribedQuotas:
    """The entities of `quotas` a validated DescribeClientQuotas filter matches, with their quotas."""
    exact: dict[str, str | None] = {}
    filtered_types: set[str] = set()
    for entity_type, match_type, match in components:
        filtered_types.add(entity_type)
        if match_type != MATCH_SPECIFIED:
            exact[entity_type] = match  # None for MATCH_DEFAULT
    found = []
    for entity, values in quotas:
        if strict and len(entity) != len(filtered_types):
            continue
        if filtered_types <= entity.keys() and all(entity[t] == name for t, name in exact.items()):
            found.append((dict(entity), dict(values)))
    return found


class QuotaConfigs:
    """The configured client quotas: what AlterClientQuotas sets and DescribeClientQuotas lists."""

    def __init__(self) -> None:
        self._quotas: dict[frozenset[tuple[str, str | None]], dict[str, float]] = {}
        self._ip_rates: dict[str | None, float] = {}  # by canonical address, so any spelling of it matches

    def alter(self, entity: QuotaEntity, key: str, value: float | None) -> None:
        """Set one key of a validated entity, or remove it when `value` is None."""
        entity_key = frozenset(entity.items())
        values = self._quotas.setdefault(entity_key, {})
        if value is None:
            values.pop(key, None)
            if not values:
                del self._quotas[entity_key]
        else:
            values[key] = value
        if IP in entity and key == CONNECTION_CREATION_RATE:
            ip = entity[IP]
            address = None if ip is None else _canonical_ip(ip)
            if value is None:
                self._ip_rates.pop(address, None)
            else:
                self._ip_rates[address] = value

    def describe(self, components: Iterable[FilterComponent], strict: bool) -> DescribedQuotas:
        """The entities a validated filter matches, with their quotas. A default entity has the type, so
        MATCH_SPECIFIED matches it too, as in Kafka's KRaft brokers; strict leaves out entities of other types."""
        return describe_entities(((dict(entity), values) for entity, values in self._quotas.items()), components,
                                 strict)

    def quota_for(self, user: str, client_id: str, key: str) -> tuple[float | None, MetricKey]:
        """The quota a client has for `key` (None: unlimited) and the key of the measurement it shares."""
        for entity, metric_key in _precedence(user, client_id):
            value = self._quotas.get(frozenset(entity.items()), {}).get(key)
            if value is not None:
                return value, metric_key
        return None, ("", client_id)

    def connection_rate_for(self, ip: str) -> float | None:
        """The connection_creation_rate of an address: its own, else the default ip entity's, else None."""
        return self._ip_rates.get(_canonical_ip(ip), self._ip_rates.get(None))


def _precedence(user: str, client_id: str) -> Iterator[tuple[dict[str, str | None], MetricKey]]:
    both = (user, client_id)
    yield {USER: user, CLIENT_ID: client_id}, both
    yield {USER: user, CLIENT_ID: None}, both
    yield {USER: user}, (user, "")
    yield {USER: None, CLIENT_ID: client_id}, both
    yield {USER: None, CLIENT_ID: None}, both
    yield {USER: None}, (user, "")
    yield {CLIENT_ID: client_id}, ("", client_id)
    yield {CLIENT_ID: None}, ("", client_id)


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _canonical_ip(ip: str) -> str:
    try:
        return ipaddress.ip_address(ip).compressed
    except ValueError:
        return ip


@dataclass
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


class WindowedRate:
    """Kafka's Rate over a WindowedSum: a per-second rate from the last `window_count` samples of `window_ms`."""

    def __init__(self, window_count: int, window_ms: int, now_ms: int):
        self.window_count = window_count
        self.window_ms = window_ms
        self.last_record_ms = now_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            # A ring of one sample more than counted: the oldest may have begun before the measured span.
            self._current = (self._current + 1) % (self.window_count + 1)
            if self._current == len(self._samples):
                self._samples.append(_Sample(now_ms, now_ms))
            sample = self._samples[self._current]
            sample.reset(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def per_second(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(sample.value for sample in self._samples) * 1000 / self.span_ms(now_ms)

    def span_ms(self, now_ms: int) -> int:
        """The time the rate is taken over: since the oldest sample began, and at least `window_count - 1`
        whole windows plus the current one's part, so a young rate is not inflated."""
        self._purge(now_ms)
        span = now_ms - min(sample.start_ms for sample in self._samples_or_first(now_ms))
        missing_windows = self.window_count - 1 - span // self.window_ms
        if missing_windows > 0:
            span += missing_windows * self.window_ms
        return max(span, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        return self._samples_or_first(now_ms)[self._current]

    def _samples_or_first(self, now_ms: int) -> list[_Sample]:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples

    def _purge(self, now_ms: int) -> None:
        # Samples with no event in the whole measured span restart empty at now.
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= self.window_count * self.window_ms:
                sample.reset(now_ms)


class TokenBucket:
    """Kafka's TokenBucket: credits refill at the quota's rate per second, up to `window_count` windows' worth."""

    def __init__(self, window_count: int, window_ms: int, rate: float, now_ms: int):
        self._burst_seconds = window_count * window_ms / 1000
        self.tokens = rate * self._burst_seconds  # full, as Kafka's is on first use
        self.last_record_ms = now_ms
        self._updated_ms = now_ms

    def available(self, rate: float, now_ms: int) -> float:
        self._refill(rate, now_ms)
        return self.tokens

    def take(self, count: float, rate: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        self._refill(rate, now_ms)
        self.tokens = min(rate * self._burst_seconds, self.tokens - count)

    def _refill(self, rate: float, now_ms: int) -> None:
        refilled = self.tokens + rate * (now_ms - self._updated_ms) / 1000
        self.tokens = min(rate * self._burst_seconds, refilled)
        self._updated_ms = now_ms


def _java_round(value: float) -> int:
    return math.floor(value + 0.5)


def _rate_throttle_ms(rate: WindowedRate, limit: float, now_ms: int) -> int:
    """How long, recording nothing more, until the measured rate is back down to `limit` (0 if it is there)."""
    observed = rate.per_second(now_ms)
    if observed <= limit:
        return 0
    return _java_round((observed - limit) / limit * rate.span_ms(now_ms))


class MutationQuota:
    """One CreateTopics, CreatePartitions or DeleteTopics request's view of its client's mutation token bucket."""

    def __init__(self, bucket: TokenBucket | None, rate: float, strict: bool):
        self._bucket = bucket
        self._rate = rate
        self._strict = strict
        self._throttle_ms = 0
        self._throttled_at_ms = 0

    def record(self, count: int, now_ms: int) -> ErrorCode:
        """Take `count` partition mutations for one topic: NONE, or THROTTLING_QUOTA_EXCEEDED if it is refused."""
        bucket = self._bucket
        if bucket is None:
            return ErrorCode.NONE
        if self._strict:
            # Strict: a topic is refused only once the bucket is already empty, so one request may overdraw it.
            tokens = bucket.available(self._rate, now_ms)
            if tokens < 0:
                self._note_throttle(tokens, now_ms)
                return ErrorCode.THROTTLING_QUOTA_EXCEEDED
            bucket.take(count, self._rate, now_ms)
        else:
            bucket.take(count, self._rate, now_ms)
            tokens = bucket.available(self._rate, now_ms)
            if tokens < 0:
                self._note_throttle(tokens, now_ms)
        return ErrorCode.NONE

    def throttle_ms(self, now_ms: int) -> int:
        """The response's throttle time: the last one noted, less the time since (the request may have waited)."""
        return max(0, self._throttle_ms - (now_ms - self._throttled_at_ms))

    def _note_throttle(self, tokens: float, now_ms: int) -> None:
        self._throttle_ms = _java_round(-tokens / self._rate * 1000)
        self._throttled_at_ms = now_ms


class ClientQuotas:
    """Measures clients against their byte-rate, request-time and controller-mutation quotas."""

    def __init__(self, configs: QuotaConfigs, *, window_count: int = WINDOW_COUNT, window_ms: int = WINDOW_MS,
                 controller_window_count: int = WINDOW_COUNT, controller_window_ms: int = WINDOW_MS):
        self.configs = configs
        self.window_count = window_count
        self.window_ms = window_ms
        self.controller_window_count = controller_window_count
        self.controller_window_ms = controller_window_ms
        self._rates: dict[tuple[str, MetricKey], WindowedRate] = {}
        self._buckets: dict[MetricKey, TokenBucket] = {}

    def record(self, kind: Kind, user: str, client_id: str, value: float, now_ms: int, *, enforce: bool = True) -> int:
        """Record a request's bytes (produce: request size, fetch: response size) or its request-handler and
        network thread time in ms ("request"), and return the throttle time in ms. `enforce=False` only records:
        Kafka records network-thread time after the response that way, and takes a throttled fetch's bytes
        back (it sends an empty response) by recording them negated."""
        limit, metric_key = self.configs.quota_for(user, client_id, _KIND_KEYS[kind])
        if limit is None:
            return 0
        rate = self._rates.get((kind, metric_key))
        if rate is None:
            rate = self._rates[(kind, metric_key)] = WindowedRate(self.window_count, self.window_ms, now_ms)
        # request_percentage is a percentage of one thread: 1 ms of thread time per second is 0.1.
        rate.record(value / 10 if kind == "request" else value, now_ms)
        if not enforce:
            return 0
        throttle_ms = _rate_throttle_ms(rate, limit, now_ms)
        return min(throttle_ms, self.window_ms) if kind == "request" else throttle_ms

    def largest_unthrottled(self, kind: Kind, user: str, client_id: str) -> float | None:
        """The most one request can record without certainly being throttled (None: unlimited); Kafka caps a
        fetch's size at this, or a fetch above it would be throttled and emptied on every retry."""
        limit, _ = self.configs.quota_for(user, client_id, _KIND_KEYS[kind])
        if limit is None:
            return None
        return limit * (self.window_count - 1) * self.window_ms / 1000

    def mutation_quota(self, user: str, client_id: str, strict: bool, now_ms: int) -> MutationQuota:
        """The controller mutation quota for one request; `strict` for the versions that may refuse a topic
        (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+)."""
        limit, metric_key = self.configs.quota_for(user, client_id, CONTROLLER_MUTATION_RATE)
        if limit is None:
            return MutationQuota(None, 0.0, strict)
        bucket = self._buckets.get(metric_key)
        if bucket is None:
            bucket = self._buckets[metric_key] = TokenBucket(
                self.controller_window_count, self.controller_window_ms, limit, now_ms)
        return MutationQuota(bucket, limit, strict)

    def expire_idle(self, now_ms: int) -> int:
        """Drop measurements nothing was recorded in for an hour (call it every half minute, as Kafka's metrics
        reaper runs); returns how many were dropped."""
        idle_rates = [key for key, rate in self._rates.items() if now_ms - rate.last_record_ms > IDLE_EXPIRY_MS]
        idle_buckets = [key for key, bucket in self._buckets.items() if now_ms - bucket.last_record_ms > IDLE_EXPIRY_MS]
        for key in idle_rates:
            del self._rates[key]
        for metric_key in idle_buckets:
            del self._buckets[metric_key]
        return len(idle_rates) + len(idle_buckets)

    def measured(self) -> int:
        """How many measurements are held (for tests and metrics)."""
        return len(self._rates) + len(self._buckets)


class ConnectionQuotas:
    """Connection creation rates: the broker's max.connection.creation.rate, which delays accepting, and each
    address's connection_creation_rate, which refuses."""

    def __init__(self, configs: QuotaConfigs, max_connection_creation_rate: int = INT_MAX, *,
                 window_count: int = WINDOW_COUNT, window_ms: int = WINDOW_MS):
        self.configs = configs
        self.max_connection_creation_rate = max_connection_creation_rate  # dynamic: read at each connection
        self.window_count = window_count
        self.window_ms = window_ms
        self._broker_rate = WindowedRate(window_count, window_ms, 0)
        self._ip_rates: dict[str, WindowedRate] = {}

    def accept_delay_ms(self, now_ms: int) -> int:
        """Count a new connection against the broker's rate; the acceptor waits this long before taking it (and
        accepts nothing else meanwhile), then calls `ip_throttle_ms`. Capped at one window, as in Kafka."""
        self._broker_rate.record(1, now_ms)
        return min(_rate_throttle_ms(self._broker_rate, self.max_connection_creation_rate, now_ms), self.window_ms)

    def ip_throttle_ms(self, ip: str, now_ms: int) -> int:
        """Count the connection against its address's rate: 0 admits it; otherwise it is refused and counted
        nowhere, and Kafka closes the socket after this many ms rather than at once, so the client backs off."""
        limit = self.configs.connection_rate_for(ip)
        if limit is None:
            return 0
        address = _canonical_ip(ip)
        rate = self._ip_rates.get(address)
        if rate is None:
            rate = self._ip_rates[address] = WindowedRate(self.window_count, self.window_ms, now_ms)
        rate.record(1, now_ms)
        throttle_ms = min(_rate_throttle_ms(rate, limit, now_ms), self.window_ms)
        if throttle_ms > 0:
            rate.record(-1, now_ms)
            self._broker_rate.record(-1, now_ms)
        return throttle_ms

    def expire_idle(self, now_ms: int) -> int:
        """Drop the rates of addresses that have not connected for an hour; the broker's is kept."""
        idle = [ip for ip, rate in self._ip_rates.items() if now_ms - rate.last_record_ms > IDLE_EXPIRY_MS]
        for ip in idle:
            del self._ip_rates[ip]
        return len(idle)

    def measured(self) -> int:
        """How many addresses' rates are held."""
        return len(self._ip_rates)
