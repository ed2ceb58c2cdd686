"""Client quotas: precedence and shared measurements, DescribeClientQuotas filters, AlterClientQuotas validation,
windowed-rate throttling, controller mutation token buckets, connection creation rates and idle expiry."""

import pytest

from odradek.network.quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IDLE_EXPIRY_MS,
    IP,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotas,
    ConnectionQuotas,
    FilterComponent,
    QuotaConfigs,
    validate_alteration,
    validate_filter,
)
from odradek.protocol.errors import ErrorCode

T0 = 1_700_000_000_000  # a wall-clock-like start: nothing may depend on time starting at zero

ALICE_C1 = {USER: "alice", CLIENT_ID: "c1"}
ALICE_DEFAULT_CLIENT = {USER: "alice", CLIENT_ID: None}
ALICE = {USER: "alice"}
DEFAULT_USER_C1 = {USER: None, CLIENT_ID: "c1"}
DEFAULT_USER_DEFAULT_CLIENT = {USER: None, CLIENT_ID: None}
DEFAULT_USER = {USER: None}
C1 = {CLIENT_ID: "c1"}
DEFAULT_CLIENT = {CLIENT_ID: None}
LEVELS = [ALICE_C1, ALICE_DEFAULT_CLIENT, ALICE, DEFAULT_USER_C1, DEFAULT_USER_DEFAULT_CLIENT, DEFAULT_USER, C1,
          DEFAULT_CLIENT]


def configs_with(*quotas: tuple[dict, str, float]) -> QuotaConfigs:
    configs = QuotaConfigs()
    for entity, key, value in quotas:
        assert validate_alteration(entity, [(key, value)]) is None
        configs.alter(entity, key, value)
    return configs


def test_each_level_of_the_precedence_wins_once_those_above_it_are_removed():
    configs = configs_with(*[(entity, PRODUCER_BYTE_RATE, level) for level, entity in enumerate(LEVELS, 1)])
    expected = [(1, ("alice", "c1")), (2, ("alice", "c1")), (3, ("alice", "")), (4, ("alice", "c1")),
                (5, ("alice", "c1")), (6, ("alice", "")), (7, ("", "c1")), (8, ("", "c1"))]
    for entity, winner in zip(LEVELS, expected, strict=True):
        assert configs.quota_for("alice", "c1", PRODUCER_BYTE_RATE) == winner
        configs.alter(entity, PRODUCER_BYTE_RATE, None)
    assert configs.quota_for("alice", "c1", PRODUCER_BYTE_RATE) == (None, ("", "c1"))


@pytest.mark.parametrize("configured, user, client_id, expected", [
    (LEVELS, "alice", "c2", (2, ("alice", "c2"))),
    (LEVELS, "bob", "c1", (4, ("bob", "c1"))),
    (LEVELS, "bob", "c2", (5, ("bob", "c2"))),
    ([ALICE], "alice", "c2", (3, ("alice", ""))),
    ([ALICE], "bob", "c1", (None, ("", "c1"))),
    ([DEFAULT_USER, C1], "bob", "c1", (6, ("bob", ""))),  # any user level beats any client-id level
    ([ALICE, DEFAULT_USER_DEFAULT_CLIENT], "alice", "c1", (3, ("alice", ""))),
    ([ALICE, DEFAULT_USER_DEFAULT_CLIENT], "bob", "c1", (5, ("bob", "c1"))),
    ([DEFAULT_CLIENT], "alice", "c9", (8, ("", "c9"))),
])
def test_precedence_table(configured, user, client_id, expected):
    configs = configs_with(*[(entity, PRODUCER_BYTE_RATE, LEVELS.index(entity) + 1) for entity in configured])
    assert configs.quota_for(user, client_id, PRODUCER_BYTE_RATE) == expected


def test_precedence_is_per_quota_key():
    configs = configs_with((ALICE, PRODUCER_BYTE_RATE, 100), (DEFAULT_CLIENT, CONSUMER_BYTE_RATE, 200))
    assert configs.quota_for("alice", "c1", PRODUCER_BYTE_RATE) == (100, ("alice", ""))
    assert configs.quota_for("alice", "c1", CONSUMER_BYTE_RATE) == (200, ("", "c1"))
    assert configs.quota_for("alice", "c1", REQUEST_PERCENTAGE) == (None, ("", "c1"))


def test_a_user_quota_is_shared_by_the_users_client_ids_and_a_default_client_quota_is_not():
    quotas = ClientQuotas(configs_with((ALICE, PRODUCER_BYTE_RATE, 1000), (DEFAULT_CLIENT, PRODUCER_BYTE_RATE, 1000)))
    # A new measurement counts as ten windows old: 10 s of quota may go at once.
    assert quotas.record("produce", "alice", "c1", 6000, T0) == 0
    assert quotas.record("produce", "alice", "c2", 6000, T0) == 2000  # 12000 B / 10 s is 20% over: 20% of 10 s
    assert quotas.record("produce", "bob", "c1", 6000, T0) == 0
    assert quotas.record("produce", "bob", "c2", 6000, T0) == 0


# The entities of Kafka's ClientQuotasRequestTest, each with its own request_percentage.
DESCRIBED = [
    {USER: "user-1", CLIENT_ID: "client-id-1"}, {USER: "user-2", CLIENT_ID: "client-id-1"},
    {USER: "user-3", CLIENT_ID: "client-id-2"}, {USER: None, CLIENT_ID: "client-id-1"},
    {USER: "user-1", CLIENT_ID: None}, {USER: "user-3", CLIENT_ID: None},
    {USER: "user-1"}, {USER: "user-2"}, {USER: "user-3"}, {USER: None}, {CLIENT_ID: "client-id-2"},
]
DESCRIBED_IPS = [{IP: "1.2.3.4"}, {IP: "2.3.4.5"}]


@pytest.fixture
def described() -> QuotaConfigs:
    return configs_with(*[(e, REQUEST_PERCENTAGE, 50.0 + i) for i, e in enumerate(DESCRIBED)],
                        *[(e, CONNECTION_CREATION_RATE, 10.0 * (i + 1)) for i, e in enumerate(DESCRIBED_IPS)])


def exact(entity_type, name):
    return FilterComponent(entity_type, MATCH_EXACT if name is not None else MATCH_DEFAULT, name)


def specified(entity_type):
    return FilterComponent(entity_type, MATCH_SPECIFIED)


@pytest.mark.parametrize("entity", DESCRIBED + DESCRIBED_IPS)
def test_a_strict_exact_filter_finds_just_that_entity_with_its_values(described, entity):
    components = [exact(t, name) for t, name in entity.items()]
    assert validate_filter(components) is None
    [(found, values)] = described.describe(components, strict=True)
    assert found == entity and len(values) == 1


@pytest.mark.parametrize("entity", [
    {USER: "user-1", CLIENT_ID: "client-id-2"}, {USER: "user-2", CLIENT_ID: None}, {USER: "user-4"},
    {USER: None, CLIENT_ID: "client-id-2"}, {CLIENT_ID: "client-id-1"}, {CLIENT_ID: None},
])
def test_a_strict_exact_filter_for_an_unconfigured_entity_finds_nothing(described, entity):
    assert described.describe([exact(t, name) for t, name in entity.items()], strict=True) == []


@pytest.mark.parametrize("components, strict, expected", [
    ([exact(USER, "user-1")], False, 3),
    ([exact(USER, "unknown")], False, 0),
    ([exact(CLIENT_ID, "client-id-2")], False, 2),
    ([exact(USER, None)], False, 2),
    ([exact(USER, "user-2")], True, 1),
    ([exact(CLIENT_ID, "client-id-1")], True, 0),
    ([specified(USER)], True, 4),  # a default user is a specified user type too, as Kafka's KRaft brokers have it
    ([specified(USER)], False, 10),
    ([specified(CLIENT_ID)], True, 1),
    ([specified(CLIENT_ID)], False, 7),
    ([specified(IP)], False, 2),
    ([exact(IP, None)], False, 0),
    ([specified(USER), exact(CLIENT_ID, None)], True, 2),
    ([], False, 13),
    ([], True, 0),
])
def test_describe_filters(described, components, strict, expected):
    assert validate_filter(components) is None
    assert len(described.describe(components, strict)) == expected


@pytest.mark.parametrize("components, error", [
    ([FilterComponent("", MATCH_SPECIFIED)], ErrorCode.INVALID_REQUEST),
    ([specified(USER), exact(USER, "a")], ErrorCode.INVALID_REQUEST),
    ([specified("topic")], ErrorCode.UNSUPPORTED_VERSION),
    ([FilterComponent(USER, MATCH_EXACT, None)], ErrorCode.INVALID_REQUEST),
    ([FilterComponent(USER, MATCH_DEFAULT, "a")], ErrorCode.INVALID_REQUEST),
    ([FilterComponent(USER, MATCH_SPECIFIED, "a")], ErrorCode.INVALID_REQUEST),
    ([FilterComponent(USER, 3)], ErrorCode.INVALID_REQUEST),
    ([specified(IP), specified(USER)], ErrorCode.INVALID_REQUEST),
    ([specified(IP), exact(CLIENT_ID, "c")], ErrorCode.INVALID_REQUEST),
])
def test_invalid_describe_filters_are_refused(components, error):
    refused = validate_filter(components)
    assert refused is not None and refused[0] == error


@pytest.mark.parametrize("entity, ops, message", [
    ({USER: ""}, [(REQUEST_PERCENTAGE, 12.34)], "Empty user not supported"),
    ({CLIENT_ID: ""}, [(REQUEST_PERCENTAGE, 12.34)], "Empty client-id not supported"),
    ({"": "name"}, [(REQUEST_PERCENTAGE, 12.34)], "Unhandled client quota entity type"),
    ({"group": "g"}, [(REQUEST_PERCENTAGE, 12.34)], "Unhandled client quota entity type: group"),
    ({}, [(PRODUCER_BYTE_RATE, 10000)], "Invalid empty client quota entity"),
    ({USER: "u"}, [("bad", 1.0)], "Invalid configuration key bad"),
    ({USER: "u"}, [(PRODUCER_BYTE_RATE, 10000.5)], "cannot be a fractional value"),
    ({USER: "u"}, [(PRODUCER_BYTE_RATE, 0.0)], "must be greater than 0"),
    ({USER: "u"}, [(REQUEST_PERCENTAGE, -1.0)], "must be greater than 0"),
    ({USER: "u"}, [(PRODUCER_BYTE_RATE, 2.0**64)], "too large for a LONG"),
    ({USER: "u"}, [(CONNECTION_CREATION_RATE, 5)], "Invalid configuration key"),
    ({USER: "u"}, [(PRODUCER_BYTE_RATE, 1), (PRODUCER_BYTE_RATE, 2)], "Duplicate quota key"),
    ({IP: "1.2.3.4"}, [(PRODUCER_BYTE_RATE, 100)], "Invalid configuration key"),
    ({IP: "1.2.3.4"}, [(CONNECTION_CREATION_RATE, 2.0**31)], "too large for an INT"),
    ({IP: "1.2.3.4"}, [(CONNECTION_CREATION_RATE, 1.5)], "cannot be a fractional value"),
    ({USER: "u", IP: "1.2.3.4"}, [(REQUEST_PERCENTAGE, 12.34)], "Invalid quota entity combination"),
    ({CLIENT_ID: "c", IP: "1.2.3.4"}, [(REQUEST_PERCENTAGE, 12.34)], "Invalid quota entity combination"),
    ({IP: "not a valid host because it has spaces"}, [(CONNECTION_CREATION_RATE, 50)], "not a valid IP"),
])
def test_invalid_alterations_are_refused_with_invalid_request(entity, ops, message):
    refused = validate_alteration(entity, ops)
    assert refused is not None
    assert refused[0] == ErrorCode.INVALID_REQUEST and message in refused[1]


@pytest.mark.parametrize("entity, ops", [
    ({USER: "u", CLIENT_ID: None}, [(PRODUCER_BYTE_RATE, 1e6), (REQUEST_PERCENTAGE, 12.34)]),
    ({USER: None}, [(CONTROLLER_MUTATION_RATE, 0.5), ("bad", None)]),  # removing any key is no error
    ({IP: None}, [(CONNECTION_CREATION_RATE, 10)]),
    ({IP: "::1"}, [(CONNECTION_CREATION_RATE, 10)]),
])
def test_valid_alterations_are_accepted(entity, ops):
    assert validate_alteration(entity, ops) is None


def test_removing_an_entitys_last_key_removes_the_entity():
    configs = configs_with((ALICE, PRODUCER_BYTE_RATE, 10), (ALICE, CONSUMER_BYTE_RATE, 20))
    configs.alter(ALICE, PRODUCER_BYTE_RATE, None)
    assert configs.describe([exact(USER, "alice")], strict=True) == [(ALICE, {CONSUMER_BYTE_RATE: 20})]
    configs.alter(ALICE, CONSUMER_BYTE_RATE, None)
    assert configs.describe([], strict=False) == []


def test_a_young_measurement_is_taken_over_ten_windows_and_byte_rate_throttles_are_not_capped():
    quotas = ClientQuotas(configs_with((ALICE, PRODUCER_BYTE_RATE, 1000)))
    assert quotas.record("produce", "alice", "c", 10_000, T0) == 0  # exactly the quota over 10 s
    # 11000 B over 10.5 s: 500 B more than the quota allows, which takes 500 ms to earn back.
    assert quotas.record("produce", "alice", "c", 1000, T0 + 500) == 500
    assert quotas.record("produce", "alice", "c", 20_000, T0 + 600) == 20_400  # 31000 B over 10.6 s


def test_a_producer_at_twice_its_quota_that_obeys_the_throttle_is_held_to_the_quota():
    quota = 100_000
    quotas = ClientQuotas(configs_with((ALICE, PRODUCER_BYTE_RATE, quota)))
    batch, interval_ms = 10_000, 50  # 200 kB/s wanted
    now, sent = T0, []
    while now < T0 + 300_000:
        throttle_ms = quotas.record("produce", "alice", "p", batch, now)
        sent.append(now)
        now += max(interval_ms, throttle_ms)  # the client waits out the throttle before sending again
    overall = batch * len(sent) / 300
    steady = batch * sum(1 for at in sent if at >= T0 + 30_000) / 270
    assert abs(overall - quota) / quota < 0.03, overall
    assert abs(steady - quota) / quota < 0.03, steady


def test_a_throttled_fetch_is_taken_back_and_a_fetch_is_capped_at_what_the_window_allows():
    quotas = ClientQuotas(configs_with((DEFAULT_CLIENT, CONSUMER_BYTE_RATE, 1000)))
    assert quotas.largest_unthrottled("fetch", "u", "c") == 10_000
    assert quotas.largest_unthrottled("produce", "u", "c") is None
    assert quotas.record("fetch", "u", "c", 10_000, T0) == 0
    assert quotas.record("fetch", "u", "c", 5000, T0) == 5000
    quotas.record("fetch", "u", "c", -5000, T0, enforce=False)  # the response went out empty
    assert quotas.record("fetch", "u", "c", 0, T0 + 100) == 0


def test_request_percentage_measures_thread_time_per_second_and_its_throttle_is_capped_at_one_window():
    quotas = ClientQuotas(configs_with((ALICE, REQUEST_PERCENTAGE, 50.0)))
    assert quotas.record("request", "alice", "c", 5000, T0) == 0  # 5 s of thread time in 10 s: 50%
    assert quotas.record("request", "alice", "c", 100, T0) == 200  # 51%: 2% over, of 10 s
    assert quotas.record("request", "alice", "c", 900, T0) == 1000  # 60%: 2 s, capped at the 1 s window
    assert quotas.record("request", "bob", "c", 1_000_000, T0) == 0  # no quota: not measured
    assert quotas.measured() == 1


def test_network_thread_time_is_recorded_without_a_throttle_but_counts_for_the_next_request():
    quotas = ClientQuotas(configs_with((ALICE, REQUEST_PERCENTAGE, 50.0)))
    assert quotas.record("request", "alice", "c", 6000, T0, enforce=False) == 0
    assert quotas.record("request", "alice", "c", 0, T0 + 1) == 1000


def test_strict_mutation_quota_lets_a_request_overdraw_the_bucket_then_refuses_until_it_refills():
    quotas = ClientQuotas(configs_with((ALICE, CONTROLLER_MUTATION_RATE, 10.0)))  # burst: 110 partitions
    request = quotas.mutation_quota("alice", "c", True, T0)
    assert request.record(100, T0) == ErrorCode.NONE
    assert request.record(50, T0) == ErrorCode.NONE  # 10 left before it: not yet exhausted
    assert request.throttle_ms(T0) == 0  # strict throttles only a refusal
    assert request.record(1, T0) == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # 40 below zero at 10/s
    assert request.throttle_ms(T0) == 4000
    assert request.throttle_ms(T0 + 1500) == 2500  # less the time the response waited
    later = quotas.mutation_quota("alice", "other-client", True, T0 + 3000)  # the user's bucket is shared
    assert later.record(1, T0 + 3000) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert later.throttle_ms(T0 + 3000) == 1000
    refilled = quotas.mutation_quota("alice", "c", True, T0 + 4000)
    assert refilled.record(5, T0 + 4000) == ErrorCode.NONE


def test_permissive_mutation_quota_accepts_everything_and_throttles_once_the_bucket_is_below_zero():
    quotas = ClientQuotas(configs_with((ALICE, CONTROLLER_MUTATION_RATE, 10.0)))
    request = quotas.mutation_quota("alice", "c", False, T0)
    assert request.record(100, T0) == ErrorCode.NONE and request.throttle_ms(T0) == 0
    assert request.record(30, T0) == ErrorCode.NONE
    assert request.throttle_ms(T0) == 2000


def test_no_mutation_quota_is_unbounded():
    quotas = ClientQuotas(QuotaConfigs())
    request = quotas.mutation_quota("alice", "c", True, T0)
    assert all(request.record(1000, T0) == ErrorCode.NONE for _ in range(10))
    assert request.throttle_ms(T0) == 0 and quotas.measured() == 0


def test_an_ip_over_its_connection_rate_is_refused_and_the_refusal_is_not_counted():
    configs = configs_with(({IP: None}, CONNECTION_CREATION_RATE, 5), ({IP: "10.0.0.1"}, CONNECTION_CREATION_RATE, 100))
    connections = ConnectionQuotas(configs)
    assert [connections.ip_throttle_ms("10.0.0.9", T0) for _ in range(50)] == [0] * 50  # 5/s over ten windows
    assert connections.ip_throttle_ms("10.0.0.9", T0) == 200  # a 51st would be 2% over
    assert connections.ip_throttle_ms("10.0.0.9", T0) == 200  # the refused one was taken back
    assert connections.ip_throttle_ms("10.0.0.8", T0) == 0  # the default applies to each address alone
    assert all(connections.ip_throttle_ms("10.0.0.1", T0) == 0 for _ in range(100))  # its own, higher rate
    assert connections.ip_throttle_ms("10.0.0.9", T0 + 1000) == 200  # one whole window and nine assumed
    assert connections.ip_throttle_ms("10.0.0.9", T0 + 1500) == 0  # 51 over 10.5 s


def test_ip_quotas_match_any_spelling_of_the_address():
    connections = ConnectionQuotas(configs_with(({IP: "::1"}, CONNECTION_CREATION_RATE, 1)))
    assert [connections.ip_throttle_ms("0:0:0:0:0:0:0:1", T0) for _ in range(11)] == [0] * 10 + [1000]
    assert connections.ip_throttle_ms("127.0.0.1", T0) == 0


def test_the_broker_connection_rate_delays_accepting_by_at_most_one_window():
    configs = configs_with(({IP: "10.0.0.9"}, CONNECTION_CREATION_RATE, 1))
    connections = ConnectionQuotas(configs, max_connection_creation_rate=2)
    assert [connections.accept_delay_ms(T0) for _ in range(20)] == [0] * 20
    assert connections.accept_delay_ms(T0) == 500  # 21 over 10 s: 5% over
    # An address's refusal takes the connection back from the broker's count too.
    assert [connections.ip_throttle_ms("10.0.0.9", T0) for _ in range(11)] == [0] * 10 + [1000]
    assert connections.accept_delay_ms(T0) == 500
    assert connections.accept_delay_ms(T0) == 1000  # 2.2/s: 1 s
    assert connections.accept_delay_ms(T0) == 1000  # 2.3/s: 1.5 s, capped at the window
    connections.max_connection_creation_rate = 1000  # a dynamic change applies to the next connection
    assert connections.accept_delay_ms(T0) == 0


def test_idle_measurements_expire_after_an_hour_so_state_does_not_grow_with_client_ids():
    quotas = ClientQuotas(configs_with((DEFAULT_CLIENT, PRODUCER_BYTE_RATE, 1000),
                                       (DEFAULT_CLIENT, CONTROLLER_MUTATION_RATE, 1.0)))
    for n in range(100):
        quotas.record("produce", "u", f"client-{n}", 10, T0)
    quotas.mutation_quota("u", "client-0", True, T0).record(1, T0)
    quotas.record("produce", "u", "client-0", 10, T0 + IDLE_EXPIRY_MS)
    assert quotas.expire_idle(T0 + IDLE_EXPIRY_MS) == 0  # idle for exactly an hour is kept
    assert quotas.expire_idle(T0 + IDLE_EXPIRY_MS + 1) == 100  # 99 rates and the bucket
    assert quotas.measured() == 1
    # The kept one still counts its last 10 B: 10010 B over 10.001 s.
    assert quotas.record("produce", "u", "client-0", 10_000, T0 + IDLE_EXPIRY_MS + 1) == 9

    connections = ConnectionQuotas(configs_with(({IP: None}, CONNECTION_CREATION_RATE, 5)))
    for n in range(10):
        connections.ip_throttle_ms(f"10.0.0.{n}", T0)
    assert connections.expire_idle(T0 + IDLE_EXPIRY_MS + 1) == 10 and connections.measured() == 0


def test_a_host_name_is_an_ip_entity_only_when_the_caller_found_that_it_resolves():
    ops = [(CONNECTION_CREATION_RATE, 5)]
    assert validate_alteration({IP: "localhost"}, ops) == (ErrorCode.INVALID_REQUEST,
                                                          "localhost is not a valid IP or resolvable host.")
    assert validate_alteration({IP: "localhost"}, ops, resolves={"localhost"}.__contains__) is None
