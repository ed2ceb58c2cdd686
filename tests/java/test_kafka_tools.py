"""Kafka 4.0's own command-line tools (bin/kafka-*.sh) against one Odradek node: what each prints and does.

Each test asserts what the tool prints against Kafka 4.0 itself; `KAFKA_TOOLS_TARGET=reference` runs this
module against the reference Kafka broker, where every test passes.
"""

import json
import re
import time
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer

from tests.java.tool_shell import table
from tests.reference_kafka import requires_reference

pytestmark = requires_reference


@pytest.fixture
def tools(kafka_tools):
    return kafka_tools


@pytest.fixture
def broker(tools_broker):
    return tools_broker


def bs(broker) -> tuple[str, str]:
    return ("--bootstrap-server", broker.bootstrap)


def create_topic(tools, broker, topic: str, partitions: int = 1, *configs: str) -> None:
    args = [arg for config in configs for arg in ("--config", config)]
    result = tools.ok("kafka-topics", *bs(broker), "--create", "--topic", topic, "--partitions", partitions,
                      "--replication-factor", 1, *args)
    assert result.stdout == f"Created topic {topic}.\n", result


def committed_offsets(tools, broker, group: str) -> dict[tuple[str, int], str]:
    """(topic, partition) -> CURRENT-OFFSET of `kafka-consumer-groups --describe --offsets`."""
    result = tools.ok("kafka-consumer-groups", *bs(broker), "--describe", "--group", group, "--offsets")
    return {(row["TOPIC"], int(row["PARTITION"])): row["CURRENT-OFFSET"] for row in table(result.stdout, "GROUP")}


def new_offsets(result) -> dict[tuple[str, int], int]:
    """(topic, partition) -> NEW-OFFSET of a `--reset-offsets` run."""
    assert result.returncode == 0 and "Error" not in result.stdout, result
    return {(row["TOPIC"], int(row["PARTITION"])): int(row["NEW-OFFSET"]) for row in table(result.stdout, "GROUP")}


def describe_configs(tools, broker, *entity: str, expected: list[str]) -> list[str]:
    """`kafka-configs --describe` of the entity, once it shows `expected` (a broker applies an alter it has just
    acknowledged a moment later, in Kafka too)."""
    result = tools.run_until(lambda r: r.lines == expected, "kafka-configs", *bs(broker), *entity, "--describe",
                             timeout=30)
    return result.lines


def produce(broker, topic: str, records: list[tuple[int, int, bytes]], **config) -> None:
    """Writes (partition, timestamp, value) records with librdkafka: records with chosen timestamps."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **config})
    for partition, timestamp, value in records:
        producer.produce(topic, value=value, partition=partition, timestamp=timestamp)
    assert producer.flush(30) == 0


def consume_lines(tools, broker, topic: str, count: int, *args: str) -> list[str]:
    """The first `count` records the console consumer prints (it stops there)."""
    result = tools.ok("kafka-console-consumer", *bs(broker), "--topic", topic, "--max-messages", count, *args)
    assert f"Processed a total of {count} messages" in result.stderr, result
    return result.lines


# --- kafka-topics ---------------------------------------------------------------------------------------------


def test_topics_create_with_configs_list_describe_alter_partitions_and_delete(tools, broker):
    create_topic(tools, broker, "topics-main", 3, "retention.ms=86400000", "cleanup.policy=compact")
    assert "topics-main" in tools.ok("kafka-topics", *bs(broker), "--list").lines

    describe = tools.ok("kafka-topics", *bs(broker), "--describe", "--topic", "topics-main").lines
    header = describe[0].split("\t")
    assert header[0] == "Topic: topics-main" and re.fullmatch(r"TopicId: [\w-]{22}", header[1]), describe
    assert header[2:4] == ["PartitionCount: 3", "ReplicationFactor: 1"], describe
    assert {"cleanup.policy=compact", "retention.ms=86400000"} <= set(header[4].removeprefix("Configs: ").split(","))
    assert describe[1:] == [f"\tTopic: topics-main\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "
                            for p in range(3)]

    tools.ok("kafka-topics", *bs(broker), "--alter", "--topic", "topics-main", "--partitions", 5)
    describe = tools.ok("kafka-topics", *bs(broker), "--describe", "--topic", "topics-main").lines
    assert "PartitionCount: 5" in describe[0] and [line.split("\t")[2] for line in describe[1:]] == [
        f"Partition: {p}" for p in range(5)], describe

    fewer = tools.run("kafka-topics", *bs(broker), "--alter", "--topic", "topics-main", "--partitions", 2)
    assert fewer.returncode == 1 and fewer.stdout == (
        "Error while executing topic command : The topic topics-main currently has 5 partition(s); "
        "2 would not be an increase.\n"), fewer
    assert "org.apache.kafka.common.errors.InvalidPartitionsException" in fewer.stderr, fewer

    again = tools.run("kafka-topics", *bs(broker), "--create", "--topic", "topics-main", "--partitions", 1)
    assert again.returncode == 1 and again.stdout == (
        "Error while executing topic command : Topic 'topics-main' already exists.\n"), again
    assert "TopicExistsException" in again.stderr, again

    tools.ok("kafka-topics", *bs(broker), "--delete", "--topic", "topics-main")
    tools.run_until(lambda r: "topics-main" not in r.lines, "kafka-topics", *bs(broker), "--list")
    missing = tools.run("kafka-topics", *bs(broker), "--delete", "--topic", "topics-main")
    assert missing.returncode == 1 and missing.stdout == (
        "Error while executing topic command : Topic 'Optional[topics-main]' does not exist as expected\n"), missing


def test_topics_describe_topics_with_overrides_and_under_replicated_partitions(tools, broker):
    create_topic(tools, broker, "overrides-yes", 1, "max.message.bytes=200000")
    create_topic(tools, broker, "overrides-no", 2)

    # A topic is listed when its describe shows configs that are not defaults (a static broker setting counts).
    described = tools.ok("kafka-topics", *bs(broker), "--describe", "--topic", "overrides-.*").lines
    with_configs = [line.split("\t")[0] for line in described if line.startswith("Topic:") and
                    line.split("\t")[4] != "Configs: "]
    assert "Topic: overrides-yes" in with_configs, described
    overrides = tools.ok("kafka-topics", *bs(broker), "--describe", "--topics-with-overrides").lines
    assert [line.split("\t")[0] for line in overrides if "overrides-" in line] == with_configs, overrides
    line = next(line for line in overrides if line.startswith("Topic: overrides-yes"))
    assert "max.message.bytes=200000" in line.split("\t")[4], overrides

    # One node holds every replica: none is missing from an ISR.
    under = tools.ok("kafka-topics", *bs(broker), "--describe", "--under-replicated-partitions")
    assert under.stdout == "", under
    unavailable = tools.ok("kafka-topics", *bs(broker), "--describe", "--unavailable-partitions")
    assert unavailable.stdout == "", unavailable


# --- kafka-configs --------------------------------------------------------------------------------------------


def test_configs_alter_delete_and_describe_topic_configs(tools, broker):
    create_topic(tools, broker, "configs-topic")
    entity = ("--entity-type", "topics", "--entity-name", "configs-topic")

    altered = tools.ok("kafka-configs", *bs(broker), *entity, "--alter",
                       "--add-config", "retention.ms=12345,max.message.bytes=2000000")
    assert altered.stdout == "Completed updating config for topic configs-topic.\n", altered
    max_message_bytes = ("  max.message.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
                         "max.message.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588}")
    describe_configs(tools, broker, *entity, expected=[
        "Dynamic configs for topic configs-topic are:", max_message_bytes,
        "  retention.ms=12345 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345}"])

    tools.ok("kafka-configs", *bs(broker), *entity, "--alter", "--delete-config", "retention.ms")
    describe_configs(tools, broker, *entity, expected=["Dynamic configs for topic configs-topic are:",
                                                        max_message_bytes])

    too_small = tools.run("kafka-configs", *bs(broker), *entity, "--alter", "--add-config", "segment.bytes=10")
    assert too_small.returncode == 1 and (
        "org.apache.kafka.common.errors.InvalidConfigurationException: Invalid value 10 for configuration "
        "segment.bytes: Value must be at least 14") in too_small.stderr, too_small
    smallest = tools.ok("kafka-configs", *bs(broker), *entity, "--alter", "--add-config", "segment.bytes=14")
    assert smallest.stdout == "Completed updating config for topic configs-topic.\n", smallest

    unknown = tools.run("kafka-configs", *bs(broker), *entity, "--alter", "--add-config", "no.such.config=1")
    assert unknown.returncode == 1 and (
        "InvalidConfigurationException: Unknown topic config name: no.such.config") in unknown.stderr, unknown


# Every topic-level config Kafka 4.0 describes with `kafka-configs --entity-type topics --describe --all`.
KAFKA_TOPIC_CONFIGS = """cleanup.policy compression.gzip.level compression.lz4.level compression.type
compression.zstd.level delete.retention.ms file.delete.delay.ms flush.messages flush.ms
follower.replication.throttled.replicas index.interval.bytes leader.replication.throttled.replicas
local.retention.bytes local.retention.ms max.compaction.lag.ms max.message.bytes message.timestamp.after.max.ms
message.timestamp.before.max.ms message.timestamp.type min.cleanable.dirty.ratio min.compaction.lag.ms
min.insync.replicas preallocate remote.log.copy.disable remote.log.delete.on.disable remote.storage.enable
retention.bytes retention.ms segment.bytes segment.index.bytes segment.jitter.ms segment.ms
unclean.leader.election.enable""".split()
# and Confluent Server's, which Odradek has too (broker-side schema id validation, registry/validation.py)
CONFLUENT_TOPIC_CONFIGS = ["confluent.key.schema.validation", "confluent.value.schema.validation"]


def test_configs_describe_all_lists_every_topic_config_of_kafka(tools, broker):
    create_topic(tools, broker, "configs-all", 1, "cleanup.policy=compact")
    result = tools.ok("kafka-configs", *bs(broker), "--entity-type", "topics", "--entity-name", "configs-all",
                      "--describe", "--all")
    assert result.lines[0] == "All configs for topic configs-all are:", result
    configs = {line.strip().split("=", 1)[0]: line.strip() for line in result.lines[1:]}
    extra = CONFLUENT_TOPIC_CONFIGS if broker.kind == "odradek" else []
    assert sorted(configs) == sorted(KAFKA_TOPIC_CONFIGS + extra), result
    assert configs["cleanup.policy"] == (
        "cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}")
    assert configs["min.insync.replicas"] == (
        "min.insync.replicas=1 sensitive=false synonyms={DEFAULT_CONFIG:min.insync.replicas=1}")


def test_configs_dynamic_broker_config_for_one_broker_and_for_the_cluster_default(tools, broker):
    one = ("--entity-type", "brokers", "--entity-name", "1")
    default = ("--entity-type", "brokers", "--entity-default")
    try:
        set_one = tools.ok("kafka-configs", *bs(broker), *one, "--alter", "--add-config", "log.cleaner.threads=2")
        assert set_one.stdout == "Completed updating config for broker 1.\n", set_one
        cleaner_threads = ("  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                           "log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}")
        describe_configs(tools, broker, *one, expected=["Dynamic configs for broker 1 are:", cleaner_threads])
        # A per-broker setting is not the cluster-wide default.
        assert tools.ok("kafka-configs", *bs(broker), *default, "--describe").lines == [
            "Default configs for brokers in the cluster are:"]

        set_default = tools.ok("kafka-configs", *bs(broker), *default, "--alter",
                               "--add-config", "log.retention.ms=3600000")
        assert set_default.stdout == "Completed updating default config for brokers in the cluster.\n", set_default
        describe_configs(tools, broker, *default, expected=[
            "Default configs for brokers in the cluster are:",
            "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}",
        ])
        # The broker's own dynamic configs are unchanged; its topics take the new default.
        assert tools.ok("kafka-configs", *bs(broker), *one, "--describe").lines == [
            "Dynamic configs for broker 1 are:", cleaner_threads]
        create_topic(tools, broker, "configs-default")
        topic_all = tools.ok("kafka-configs", *bs(broker), "--entity-type", "topics", "--entity-name",
                             "configs-default", "--describe", "--all").lines
        assert any(line.strip().startswith(
            "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, ")
            for line in topic_all), topic_all

        broker_all = tools.ok("kafka-configs", *bs(broker), *one, "--describe", "--all").lines
        assert cleaner_threads in broker_all, broker_all
    finally:
        tools.ok("kafka-configs", *bs(broker), *one, "--alter", "--delete-config", "log.cleaner.threads")
        tools.ok("kafka-configs", *bs(broker), *default, "--alter", "--delete-config", "log.retention.ms")
    describe_configs(tools, broker, *one, expected=["Dynamic configs for broker 1 are:"])


def test_configs_takes_the_broker_settings_kafka_changes_at_run_time(tools, broker):
    one = ("--entity-type", "brokers", "--entity-name", "1")
    dynamic = {"log.cleaner.threads": "2", "num.io.threads": "4", "num.network.threads": "4", "max.connections": "1000",
               "leader.replication.throttled.rate": "1000000", "follower.replication.throttled.rate": "1000000"}
    try:
        for name, value in dynamic.items():
            result = tools.run("kafka-configs", *bs(broker), *one, "--alter", "--add-config", f"{name}={value}")
            assert result.returncode == 0 and result.stdout == "Completed updating config for broker 1.\n", result
        described = tools.run_until(lambda r: len(r.lines) == 1 + len(dynamic), "kafka-configs", *bs(broker), *one,
                                    "--describe", timeout=30).lines
        assert {line.split(" ")[2] for line in described[1:]} == {f"{k}={v}" for k, v in dynamic.items()}, described
        # The throttle rates exist only as dynamic settings: no default among their synonyms.
        assert "  leader.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" \
               "leader.replication.throttled.rate=1000000}" in described, described
        assert "  follower.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" \
               "follower.replication.throttled.rate=1000000}" in described, described
    finally:
        tools.ok("kafka-configs", *bs(broker), *one, "--alter", "--delete-config", ",".join(dynamic))
    describe_configs(tools, broker, *one, expected=["Dynamic configs for broker 1 are:"])


def test_configs_refuses_broker_settings_kafka_cannot_change_at_run_time(tools, broker):
    one = ("--entity-type", "brokers", "--entity-name", "1")
    taken = []
    try:
        for read_only in ("num.partitions=2", "broker.id=7", "log.dirs=/elsewhere", "node.id=7"):
            refused = tools.run("kafka-configs", *bs(broker), *one, "--alter", "--add-config", read_only)
            message = ("org.apache.kafka.common.errors.InvalidRequestException: Cannot update these configs "
                       f"dynamically: Set({read_only.split('=')[0]})")
            if not (refused.returncode == 1 and message in refused.stderr):
                taken.append(f"{read_only}: Kafka refuses it with {message!r}; here:\n{refused}")
    finally:
        remove_broker_configs(tools, broker)
    assert not taken, "\n".join(taken)


# Dynamic broker values Kafka 4.0 refuses (on a broker with the default thread counts), and what it says.
REFUSED_BROKER_VALUES = {
    "log.cleaner.threads=3": "Log cleaner threads cannot be increased to more than double the current value 1",
    "num.io.threads=17": "Dynamic thread count update validation failed for num.io.threads=17, value should not be "
                         "greater than double the current value 8",
    "num.io.threads=3": "Dynamic thread count update validation failed for num.io.threads=3, value should be at "
                        "least half the current value 8",
    "num.network.threads=7": "Dynamic thread count update validation failed for num.network.threads=7, value should "
                             "not be greater than double the current value 3",
    "max.connections=0": "Invalid max.connections 0",
    "max.connections.per.ip=0": "requirement failed: max.connections.per.ip can be set to zero only if "
                                "max.connections.per.ip.overrides property is set.",
    "message.max.bytes=-5": "Invalid value -5 for configuration message.max.bytes: Value must be at least 0",
    "log.segment.bytes=10": "Invalid value 10 for configuration log.segment.bytes: Value must be at least 1048576",
}


def test_configs_refuses_dynamic_broker_values_kafka_refuses(tools, broker):
    taken = []
    try:
        for setting, message in REFUSED_BROKER_VALUES.items():
            refused = tools.run("kafka-configs", *bs(broker), "--entity-type", "brokers", "--entity-name", "1",
                                "--alter", "--add-config", setting, timeout=30)
            cause = [line for line in refused.stderr.splitlines()
                     if line.startswith("Caused by: org.apache.kafka.common.errors.InvalidRequestException: ")]
            if not (refused.returncode == 1 and len(cause) == 1 and message in cause[0]):
                taken.append(f"{setting}: Kafka refuses it with {message!r}; here:\n{refused}")
                remove_broker_configs(tools, broker)  # each value is tried on a broker with the defaults
    finally:
        remove_broker_configs(tools, broker)
    assert not taken, "\n".join(taken)


def remove_broker_configs(tools, broker) -> None:
    """Removes broker 1's dynamic configs, through the controller listener: a config a test should not have got
    through (max.connections=0) can lock clients out of the broker's own listener."""
    one = ("--bootstrap-controller", broker.controller_bootstrap, "--entity-type", "brokers", "--entity-name", "1")
    taken = [line.split("=")[0].strip() for line in tools.ok("kafka-configs", *one, "--describe").lines[1:]]
    if taken:
        tools.ok("kafka-configs", *one, "--alter", "--delete-config", ",".join(taken))
    describe_configs(tools, broker, "--entity-type", "brokers", "--entity-name", "1",
                     expected=["Dynamic configs for broker 1 are:"])


def test_configs_sets_describes_and_deletes_client_quotas_of_users_clients_and_ips(tools, broker):
    alice = ("--entity-type", "users", "--entity-name", "quota-alice")
    bob_app = ("--entity-type", "users", "--entity-name", "quota-bob", "--entity-type", "clients", "--entity-name",
               "quota-app")
    default_client = ("--entity-type", "clients", "--entity-default")
    address = ("--entity-type", "ips", "--entity-name", "10.1.2.3")
    try:
        added = tools.ok("kafka-configs", *bs(broker), *alice, "--alter", "--add-config", "producer_byte_rate=1024")
        assert added.stdout == "Completed updating config for user quota-alice.\n", added
        tools.ok("kafka-configs", *bs(broker), *alice, "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
        # A user's quotas and SCRAM credentials are described together.
        describe_configs(tools, broker, *alice, expected=[
            "Quota configs for user-principal 'quota-alice' are producer_byte_rate=1024.0",
            "SCRAM credential configs for user-principal 'quota-alice' are SCRAM-SHA-256=iterations=8192"])
        added = tools.ok("kafka-configs", *bs(broker), *bob_app, "--alter", "--add-config",
                         "producer_byte_rate=4096,consumer_byte_rate=8192")
        assert added.stdout == "Completed updating config for user quota-bob.\n", added
        describe_configs(tools, broker, *bob_app, expected=[
            "Quota configs for user-principal 'quota-bob', client-id 'quota-app' are consumer_byte_rate=8192.0, "
            "producer_byte_rate=4096.0"])
        added = tools.ok("kafka-configs", *bs(broker), *default_client, "--alter", "--add-config",
                         "request_percentage=12.5")
        assert added.stdout == "Completed updating default config for clients in the cluster.\n", added
        describe_configs(tools, broker, *default_client, expected=[
            "Quota configs for the default client-id are request_percentage=12.5"])
        added = tools.ok("kafka-configs", *bs(broker), *address, "--alter", "--add-config", "connection_creation_rate=10")
        assert added.stdout == "Completed updating config for ip 10.1.2.3.\n", added
        assert tools.ok("kafka-configs", *bs(broker), "--entity-type", "ips", "--describe").lines == [
            "Quota configs for ip '10.1.2.3' are connection_creation_rate=10.0"]

        fractional = tools.run("kafka-configs", *bs(broker), *alice, "--alter", "--add-config", "producer_byte_rate=1.5")
        assert fractional.returncode == 1 and ("Caused by: org.apache.kafka.common.errors.InvalidRequestException: "
                                               "producer_byte_rate cannot be a fractional value.") in fractional.stderr, \
            fractional
        tools.ok("kafka-configs", *bs(broker), *alice, "--alter", "--delete-config", "producer_byte_rate")
        describe_configs(tools, broker, *alice, expected=[
            "SCRAM credential configs for user-principal 'quota-alice' are SCRAM-SHA-256=iterations=8192"])
    finally:
        for entity, keys in ((alice, "producer_byte_rate"), (bob_app, "producer_byte_rate,consumer_byte_rate"),
                             (default_client, "request_percentage"), (address, "connection_creation_rate")):
            tools.run("kafka-configs", *bs(broker), *entity, "--alter", "--delete-config", keys)
        tools.run("kafka-configs", *bs(broker), *alice, "--alter", "--delete-config", "SCRAM-SHA-256")
    assert tools.ok("kafka-configs", *bs(broker), "--entity-type", "clients", "--describe").lines == []


# Broker settings every Kafka broker describes with `--describe --all`, with their value on a broker that does
# not set them (None: the value depends on the broker's own settings).
KAFKA_CORE_BROKER_CONFIGS = {
    "broker.id": "1", "node.id": "1", "process.roles": None, "listeners": None, "advertised.listeners": None,
    "listener.security.protocol.map": None, "controller.listener.names": "CONTROLLER", "log.dirs": None,
    "default.replication.factor": "1", "min.insync.replicas": "1", "message.max.bytes": "1048588",
    "auto.create.topics.enable": "true", "offsets.topic.num.partitions": "50",
    "transaction.state.log.num.partitions": "50", "log.cleaner.threads": "1", "max.connections": "2147483647",
    "unclean.leader.election.enable": "false", "compression.type": "producer", "connections.max.idle.ms": "600000",
    "log.cleanup.policy": "delete", "log.retention.check.interval.ms": None, "replica.lag.time.max.ms": "30000",
    "group.consumer.session.timeout.ms": "45000", "group.consumer.heartbeat.interval.ms": "5000",
}


def test_configs_describe_all_broker_configs_lists_kafkas_core_settings(tools, broker):
    result = tools.ok("kafka-configs", *bs(broker), "--entity-type", "brokers", "--entity-name", "1",
                      "--describe", "--all")
    assert result.lines[0] == "All configs for broker 1 are:", result
    values = {}
    for line in result.lines[1:]:
        match = re.fullmatch(r"  ([\w.]+)=(.*) sensitive=(true|false) synonyms=\{.*\}", line)
        assert match, line
        values[match.group(1)] = match.group(2)
    missing = sorted(set(KAFKA_CORE_BROKER_CONFIGS) - set(values))
    assert not missing, f"not described: {missing}\n{result}"
    for name, value in KAFKA_CORE_BROKER_CONFIGS.items():
        assert value is None or values[name] == value, f"{name}={values[name]}, Kafka's default is {value}"


# --- console producer and consumer ----------------------------------------------------------------------------

CODECS = ("gzip", "snappy", "lz4", "zstd")


def test_console_producer_and_consumer_with_keys_headers_partitions_offsets_and_every_codec(tools, broker):
    create_topic(tools, broker, "console", 2)
    for codec in CODECS:
        tools.ok("kafka-console-producer", *bs(broker), "--topic", "console", "--compression-codec", codec,
                 "--property", "parse.key=true", "--property", "key.separator=:",
                 "--property", "parse.headers=true", "--property", "headers.delimiter=|",
                 input=f"h1:v1,h2:v2|k1:{codec}-one\nh3:x|k3:{codec}-two\n")

    lines = consume_lines(tools, broker, "console", 8, "--from-beginning",
                          *[arg for p in ("print.key", "print.headers", "print.partition", "print.offset")
                            for arg in ("--property", f"{p}=true")])
    records = [line.split("\t") for line in lines]
    assert all(len(record) == 5 for record in records), lines
    # The producer's murmur2 hash of the key picks the partition: k1 goes to 1, k3 to 0.
    for key, partition, headers, suffix in (("k1", 1, "h1:v1,h2:v2", "one"), ("k3", 0, "h3:x", "two")):
        assert [(p, offset, h, value) for p, offset, h, k, value in records if k == key] == [
            (f"Partition:{partition}", f"Offset:{i}", headers, f"{codec}-{suffix}")
            for i, codec in enumerate(CODECS)], lines

    # One partition from an offset.
    from_offset = consume_lines(tools, broker, "console", 2, "--partition", 1, "--offset", 2,
                                "--property", "print.key=true", "--property", "print.offset=true")
    assert from_offset == ["Offset:2\tk1\tlz4-one", "Offset:3\tk1\tzstd-one"]

    # Each batch is stored compressed as the producer sent it (kafka-dump-log reads the segment file).
    segment = broker.log_dir / "console-1" / "00000000000000000000.log"
    dump = tools.ok("kafka-dump-log", "--files", segment, "--print-data-log").lines
    batches = [line for line in dump if line.startswith("baseOffset:")]
    assert [re.search(r"compresscodec: (\w+)", batch).group(1) for batch in batches] == list(CODECS), dump
    assert all("isvalid: true" in batch for batch in batches), dump
    assert [re.search(r"headerKeys: (\S+) key: (\S+) payload: (\S+)", line).groups()
            for line in dump if line.startswith("| offset:")] == [
        ("[h1,h2]", "k1", f"{codec}-one") for codec in CODECS], dump


def test_console_consumer_read_committed_skips_open_and_aborted_transactions(tools, broker):
    create_topic(tools, broker, "console-txn")
    committed = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "console-txn-committed"})
    committed.init_transactions(30)
    committed.begin_transaction()
    committed.produce("console-txn", value=b"committed-1", partition=0)
    committed.commit_transaction(30)
    open_txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "console-txn-open"})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce("console-txn", value=b"open-1", partition=0)
    assert open_txn.flush(30) == 0
    committed.begin_transaction()
    committed.produce("console-txn", value=b"committed-2", partition=0)
    committed.commit_transaction(30)

    from_start = ("--partition", "0", "--offset", "earliest")
    assert consume_lines(tools, broker, "console-txn", 3, *from_start) == ["committed-1", "open-1", "committed-2"]
    # read_committed stops at the open transaction (the last stable offset): no more records within 5 s ...
    stopped = tools.ok("kafka-console-consumer", *bs(broker), "--topic", "console-txn", *from_start,
                       "--isolation-level", "read_committed", "--timeout-ms", 5000)
    assert stopped.lines == ["committed-1"] and "Processed a total of 1 messages" in stopped.stderr, stopped
    # ... and once it is aborted, skips its records.
    open_txn.abort_transaction(30)
    assert consume_lines(tools, broker, "console-txn", 2, *from_start, "--isolation-level", "read_committed") == [
        "committed-1", "committed-2"]



def test_console_producer_gets_kafkas_error_for_a_keyless_record_in_a_compacted_topic(tools, broker):
    create_topic(tools, broker, "compacted-keys", 1, "cleanup.policy=compact")
    refusal = ("org.apache.kafka.common.InvalidRecordException: Compacted topic cannot accept message without key in "
               "topic partition compacted-keys-0")
    sync = tools.run("kafka-console-producer", *bs(broker), "--topic", "compacted-keys", "--sync", input="no key\n")
    assert sync.returncode == 1 and f"Caused by: {refusal}" in sync.stderr.splitlines(), sync
    unsent = tools.ok("kafka-console-producer", *bs(broker), "--topic", "compacted-keys", input="no key\n")
    assert "Error when sending message to topic compacted-keys with key: null, value: 6 bytes with error:" in \
        unsent.stderr and refusal in unsent.stderr.splitlines(), unsent
    tools.ok("kafka-console-producer", *bs(broker), "--topic", "compacted-keys", "--property", "parse.key=true",
             input="k\tv\n")
    assert consume_lines(tools, broker, "compacted-keys", 1, "--partition", 0, "--offset", "earliest",
                         "--property", "print.key=true", "--property", "print.offset=true") == ["Offset:0\tk\tv"]

# --- kafka-transactions ---------------------------------------------------------------------------------------


def test_transactions_list_describe_describe_producers_find_hanging_and_abort(tools, broker):
    create_topic(tools, broker, "txn-tool")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "txn-tool-id",
                         "transaction.timeout.ms": 300000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn-tool", value=b"open-%d" % i, partition=0)
    assert producer.flush(30) == 0

    listed = {row["TransactionalId"]: row for row in table(tools.ok("kafka-transactions", *bs(broker), "list").stdout,
                                                           "TransactionalId")}
    assert listed["txn-tool-id"]["Coordinator"] == "1" and listed["txn-tool-id"]["TransactionState"] == "Ongoing"
    producer_id = listed["txn-tool-id"]["ProducerId"]

    described = table(tools.ok("kafka-transactions", *bs(broker), "describe", "--transactional-id", "txn-tool-id").stdout,
                      "CoordinatorId")
    assert len(described) == 1, described
    assert {k: described[0][k] for k in ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                         "TransactionState", "TransactionTimeoutMs", "TopicPartitions")} == {
        "CoordinatorId": "1", "TransactionalId": "txn-tool-id", "ProducerId": producer_id, "ProducerEpoch": "0",
        "TransactionState": "Ongoing", "TransactionTimeoutMs": "300000", "TopicPartitions": "txn-tool-0"}

    producers = table(tools.ok("kafka-transactions", *bs(broker), "describe-producers", "--topic", "txn-tool",
                               "--partition", "0").stdout, "ProducerId")
    assert [{k: row[k] for k in ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                 "CurrentTransactionStartOffset")} for row in producers] == [
        {"ProducerId": producer_id, "ProducerEpoch": "0", "LatestCoordinatorEpoch": "-1", "LastSequence": "2",
         "CurrentTransactionStartOffset": "0"}]

    # Open for longer than 0 minutes, but its coordinator knows the partition: not hanging.
    hanging = tools.ok("kafka-transactions", *bs(broker), "find-hanging", "--broker-id", "1",
                       "--max-transaction-timeout", "0")
    assert hanging.lines == ["Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
                             "LastTimestamp\tDuration(min)\t"], hanging

    aborted = tools.ok("kafka-transactions", *bs(broker), "abort", "--topic", "txn-tool", "--partition", "0",
                       "--start-offset", "0")
    assert aborted.stdout == "", aborted
    producers = table(tools.ok("kafka-transactions", *bs(broker), "describe-producers", "--topic", "txn-tool",
                               "--partition", "0").stdout, "ProducerId")
    assert [(row["ProducerId"], row["LatestCoordinatorEpoch"], row["CurrentTransactionStartOffset"])
            for row in producers] == [(producer_id, "0", "None")]
    # The abort marker took an offset; read_committed readers now pass the aborted records.
    assert tools.ok("kafka-get-offsets", *bs(broker), "--topic", "txn-tool").lines == ["txn-tool:0:4"]
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("txn-tool", value=b"after", partition=0)
    assert plain.flush(30) == 0
    assert consume_lines(tools, broker, "txn-tool", 1, "--partition", "0", "--offset", "earliest",
                         "--isolation-level", "read_committed") == ["after"]


# --- kafka-consumer-groups ------------------------------------------------------------------------------------


def test_consumer_groups_list_and_describe_an_active_classic_group(tools, broker):
    create_topic(tools, broker, "groups-active", 2)
    tools.ok("kafka-console-producer", *bs(broker), "--topic", "groups-active",
             input="".join(f"v{i}\n" for i in range(10)))
    member = tools.start("kafka-console-consumer", *bs(broker), "--topic", "groups-active", "--group", "classic-active",
                         "--from-beginning", "--consumer-property", "client.id=tools-member")
    try:
        member.wait_for_output(lambda lines: len(lines) >= 10, what="10 records")
        assert "classic-active" in tools.ok("kafka-consumer-groups", *bs(broker), "--list").lines
        states = tools.ok("kafka-consumer-groups", *bs(broker), "--list", "--state")
        assert {row["GROUP"]: row["STATE"] for row in table(states.stdout, "GROUP")}["classic-active"] == "Stable"
        types = tools.ok("kafka-consumer-groups", *bs(broker), "--list", "--type")
        assert {row["GROUP"]: row["TYPE"] for row in table(types.stdout, "GROUP")}["classic-active"] == "Classic"

        members = tools.ok("kafka-consumer-groups", *bs(broker), "--describe", "--group", "classic-active",
                           "--members", "--verbose")
        rows = table(members.stdout, "GROUP")
        assert len(rows) == 1, members
        assert {k: rows[0][k] for k in ("HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT",
                                        "TARGET-EPOCH", "TARGET-ASSIGNMENT")} == {
            "HOST": "/127.0.0.1", "CLIENT-ID": "tools-member", "#PARTITIONS": "2", "CURRENT-EPOCH": "-",
            "CURRENT-ASSIGNMENT": "groups-active:0,1", "TARGET-EPOCH": "-", "TARGET-ASSIGNMENT": "-"}, members
        assert rows[0]["CONSUMER-ID"].startswith("tools-member-"), members

        state = tools.ok("kafka-consumer-groups", *bs(broker), "--describe", "--group", "classic-active", "--state")
        assert re.search(r"\nclassic-active +127\.0\.0\.1:\d+ +\(1\) +range +Stable +1\n", state.stdout), state
    finally:
        stopped = member.stop()
    assert "Processed a total of 10 messages" in stopped.stderr, stopped

    # The member committed its position as it left.
    described = tools.run_until(lambda r: "has no active members" in r.stderr, "kafka-consumer-groups", *bs(broker),
                                "--describe", "--group", "classic-active")
    rows = table(described.stdout, "GROUP")
    log_end = {row["PARTITION"]: row["LOG-END-OFFSET"] for row in rows}
    assert sum(int(offset) for offset in log_end.values()) == 10, described
    assert all(row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] and row["LAG"] == "0" and row["CONSUMER-ID"] == "-"
               for row in rows), described
    assert described.stderr.strip() == "Consumer group 'classic-active' has no active members.", described
    state = tools.ok("kafka-consumer-groups", *bs(broker), "--describe", "--group", "classic-active", "--state")
    assert re.search(r"\nclassic-active +127\.0\.0\.1:\d+ +\(1\) +- +Empty +0\n", state.stdout), state

    unknown = tools.ok("kafka-consumer-groups", *bs(broker), "--describe", "--group", "no-such-group")
    assert unknown.stdout.strip() == ("Error: Executing consumer group command failed due to "
                                      "org.apache.kafka.common.errors.GroupIdNotFoundException: "
                                      "Group no-such-group not found."), unknown


def test_consumer_groups_reset_offsets_in_every_mode_with_dry_run_and_execute(tools, broker, tmp_path):
    create_topic(tools, broker, "groups-reset", 2)
    # Nine records per partition, one every 20 minutes, the last 10 minutes ago.
    now = int(time.time() * 1000)
    minute = 60_000
    stamps = [now - 170 * minute + i * 20 * minute for i in range(9)]
    produce(broker, "groups-reset", [(p, ts, b"r%d" % i) for p in (0, 1) for i, ts in enumerate(stamps)])
    consume_lines(tools, broker, "groups-reset", 18, "--group", "resetter", "--from-beginning")
    assert committed_offsets(tools, broker, "resetter") == {("groups-reset", 0): "9", ("groups-reset", 1): "9"}

    group = ("--group", "resetter", "--reset-offsets", "--topic", "groups-reset")
    at_100_minutes_ago = datetime.fromtimestamp((now - 100 * minute) / 1000, UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3]
    (tmp_path / "offsets.csv").write_text("groups-reset,0,5\ngroups-reset,1,2\n")
    modes = [  # (arguments, new offset of partition 0, of partition 1)
        (("--to-earliest",), 0, 0),
        (("--to-latest",), 9, 9),
        (("--to-offset", "3"), 3, 3),
        (("--shift-by", "-2"), 1, 1),
        (("--shift-by", "100"), 9, 9),  # clipped to the log end
        (("--to-datetime", at_100_minutes_ago), 4, 4),  # the first record at or after it
        (("--by-duration", "PT1H"), 6, 6),
        (("--to-current",), 6, 6),
    ]
    current = {0: 9, 1: 9}
    for args, new_0, new_1 in modes:
        expected = {("groups-reset", 0): new_0, ("groups-reset", 1): new_1}
        dry_run = tools.run("kafka-consumer-groups", *bs(broker), *group, *args, "--dry-run")
        assert new_offsets(dry_run) == expected, dry_run
        assert committed_offsets(tools, broker, "resetter") == {("groups-reset", p): str(o) for p, o in current.items()}
        executed = tools.run("kafka-consumer-groups", *bs(broker), *group, *args, "--execute")
        assert new_offsets(executed) == expected, executed
        current = {0: new_0, 1: new_1}
        assert committed_offsets(tools, broker, "resetter") == {("groups-reset", p): str(o) for p, o in current.items()}

    from_file = ("--group", "resetter", "--reset-offsets", "--from-file", tmp_path / "offsets.csv")
    assert new_offsets(tools.run("kafka-consumer-groups", *bs(broker), *from_file, "--dry-run")) == {
        ("groups-reset", 0): 5, ("groups-reset", 1): 2}
    assert new_offsets(tools.run("kafka-consumer-groups", *bs(broker), *from_file, "--execute")) == {
        ("groups-reset", 0): 5, ("groups-reset", 1): 2}
    assert committed_offsets(tools, broker, "resetter") == {("groups-reset", 0): "5", ("groups-reset", 1): "2"}

    one_partition = tools.run("kafka-consumer-groups", *bs(broker), "--group", "resetter", "--reset-offsets",
                              "--topic", "groups-reset:1", "--to-earliest", "--execute")
    assert new_offsets(one_partition) == {("groups-reset", 1): 0}
    all_topics = tools.run("kafka-consumer-groups", *bs(broker), "--group", "resetter", "--reset-offsets",
                           "--all-topics", "--to-latest", "--execute")
    assert new_offsets(all_topics) == {("groups-reset", 0): 9, ("groups-reset", 1): 9}


def test_consumer_groups_delete_offsets_and_delete_a_classic_group(tools, broker):
    create_topic(tools, broker, "groups-delete", 2)
    tools.ok("kafka-console-producer", *bs(broker), "--topic", "groups-delete", input="a\nb\nc\nd\n")
    consume_lines(tools, broker, "groups-delete", 4, "--group", "deleter", "--from-beginning")
    assert set(committed_offsets(tools, broker, "deleter")) == {("groups-delete", 0), ("groups-delete", 1)}

    deleted = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "deleter", "--delete-offsets",
                       "--topic", "groups-delete:1")
    assert deleted.stdout.splitlines()[0] == "Request succeed for deleting offsets with topic groups-delete:1 group deleter"
    assert [(row["TOPIC"], row["PARTITION"], row["STATUS"]) for row in table(deleted.stdout, "TOPIC")] == [
        ("groups-delete", "1", "Successful")], deleted
    assert set(committed_offsets(tools, broker, "deleter")) == {("groups-delete", 0)}

    unknown = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "deleter", "--delete-offsets",
                       "--topic", "no-such-topic")
    assert unknown.lines[-1].split() == [
        "no-such-topic", "Not", "Provided", "Error:", "org.apache.kafka.common.errors.UnknownTopicOrPartitionException:",
        "This", "server", "does", "not", "host", "this", "topic-partition."], unknown

    dropped = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "deleter", "--delete")
    assert dropped.stdout == "Deletion of requested consumer groups ('deleter') was successful.\n", dropped
    assert "deleter" not in tools.ok("kafka-consumer-groups", *bs(broker), "--list").lines
    again = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "deleter", "--delete")
    assert again.stdout.strip().splitlines() == [
        "Error: Deletion of some consumer groups failed:",
        "* Group 'deleter' could not be deleted due to: org.apache.kafka.common.errors.GroupIdNotFoundException: "
        "The group id does not exist."], again


def test_consumer_groups_with_the_consumer_protocol(tools, broker):
    create_topic(tools, broker, "groups-848", 3)
    produce(broker, "groups-848", [(p, int(time.time() * 1000), b"v%d-%d" % (p, i)) for p in range(3) for i in range(3)])
    member = tools.start("kafka-console-consumer", *bs(broker), "--topic", "groups-848", "--group", "next-gen",
                         "--from-beginning", "--consumer-property", "group.protocol=consumer",
                         "--consumer-property", "client.id=next-gen-member")
    try:
        member.wait_for_output(lambda lines: len(lines) >= 9, what="9 records")
        types = tools.ok("kafka-consumer-groups", *bs(broker), "--list", "--type")
        assert {row["GROUP"]: row["TYPE"] for row in table(types.stdout, "GROUP")}["next-gen"] == "Consumer", types

        members = tools.ok("kafka-consumer-groups", *bs(broker), "--describe", "--group", "next-gen", "--members",
                           "--verbose")
        rows = table(members.stdout, "GROUP")
        assert len(rows) == 1 and re.fullmatch(r"[\w-]{22}", rows[0]["CONSUMER-ID"]), members
        assert {k: rows[0][k] for k in ("HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-ASSIGNMENT",
                                        "TARGET-ASSIGNMENT")} == {
            "HOST": "/127.0.0.1", "CLIENT-ID": "next-gen-member", "#PARTITIONS": "3",
            "CURRENT-ASSIGNMENT": "groups-848:0,1,2", "TARGET-ASSIGNMENT": "groups-848:0,1,2"}, members
        assert rows[0]["CURRENT-EPOCH"] == rows[0]["TARGET-EPOCH"], members

        state = tools.ok("kafka-consumer-groups", *bs(broker), "--describe", "--group", "next-gen", "--state",
                         "--verbose")
        assert re.search(r"\nnext-gen +127\.0\.0\.1:\d+ +\(1\) +uniform +Stable +(\d+) +\1 +1\n", state.stdout), state

        # An active group keeps its offsets and itself.
        busy = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "next-gen", "--reset-offsets",
                        "--topic", "groups-848", "--to-earliest", "--execute")
        assert ("Error: Assignments can only be reset if the group 'next-gen' is inactive, but the current state "
                "is Stable.") in busy.stdout, busy
        subscribed = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "next-gen", "--delete-offsets",
                              "--topic", "groups-848")
        assert subscribed.lines[1] == "Error: Encounter some partition level error, see the follow-up details:"
        assert [line.split(None, 2) for line in subscribed.lines[-3:]] == [
            ["groups-848", str(p), "Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: Deleting "
             "offsets of a topic is forbidden while the consumer group is actively subscribed to it."]
            for p in range(3)], subscribed
        not_empty = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "next-gen", "--delete")
        assert ("* Group 'next-gen' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: "
                "The group is not empty.") in not_empty.stdout, not_empty
    finally:
        member.stop()

    tools.run_until(lambda r: re.search(r"\nnext-gen .* uniform +Empty +0\n", r.stdout), "kafka-consumer-groups",
                    *bs(broker), "--describe", "--group", "next-gen", "--state")
    assert committed_offsets(tools, broker, "next-gen") == {("groups-848", p): "3" for p in range(3)}
    reset = tools.run("kafka-consumer-groups", *bs(broker), "--group", "next-gen", "--reset-offsets",
                      "--topic", "groups-848:0", "--to-offset", "1", "--execute")
    assert new_offsets(reset) == {("groups-848", 0): 1}
    deleted = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "next-gen", "--delete-offsets",
                       "--topic", "groups-848:1")
    assert [(row["PARTITION"], row["STATUS"]) for row in table(deleted.stdout, "TOPIC")] == [("1", "Successful")], deleted
    assert committed_offsets(tools, broker, "next-gen") == {("groups-848", 0): "1", ("groups-848", 2): "3"}
    dropped = tools.ok("kafka-consumer-groups", *bs(broker), "--group", "next-gen", "--delete")
    assert dropped.stdout == "Deletion of requested consumer groups ('next-gen') was successful.\n", dropped


def test_verifiable_producer_and_verifiable_consumer_with_the_consumer_protocol(tools, broker):
    create_topic(tools, broker, "verifiable", 2)
    produced = tools.ok("kafka-verifiable-producer", *bs(broker), "--topic", "verifiable", "--max-messages", 20,
                        "--acks", -1, "--value-prefix", 7)
    events = [json.loads(line) for line in produced.lines]
    assert events[0]["name"] == "startup_complete" and events[-1]["name"] == "tool_data", produced
    assert (events[-1]["sent"], events[-1]["acked"]) == (20, 20), produced
    sent = [e for e in events if e["name"] == "producer_send_success"]
    assert sorted(e["value"] for e in sent) == sorted(f"7.{i}" for i in range(20)), produced
    for partition in (0, 1):
        assert sorted(e["offset"] for e in sent if e["partition"] == partition) == list(
            range(sum(1 for e in sent if e["partition"] == partition))), produced

    consumed = tools.ok("kafka-verifiable-consumer", *bs(broker), "--topic", "verifiable", "--group-id", "verifier",
                        "--group-protocol", "consumer", "--max-messages", 20, "--reset-policy", "earliest")
    events = [json.loads(line) for line in consumed.lines]
    names = [e["name"] for e in events]
    assert names[0] == "startup_complete" and names[-1] == "shutdown_complete", consumed
    assigned = [p for e in events if e["name"] == "partitions_assigned" for p in e["partitions"]]
    assert sorted((p["topic"], p["partition"]) for p in assigned) == [("verifiable", 0), ("verifiable", 1)], consumed
    assert sum(e["count"] for e in events if e["name"] == "records_consumed") == 20, consumed
    commits = [o for e in events if e["name"] == "offsets_committed" and e["success"] for o in e["offsets"]]
    last = {(o["topic"], o["partition"]): o["offset"] for o in commits}  # the latest commit of each partition
    ends: dict[tuple[str, int], int] = {}
    for e in sent:
        ends[e["topic"], e["partition"]] = max(ends.get((e["topic"], e["partition"]), 0), e["offset"] + 1)
    assert last == ends, consumed
    assert committed_offsets(tools, broker, "verifier") == {tp: str(offset) for tp, offset in last.items()}


# --- offsets and records --------------------------------------------------------------------------------------


def test_get_offsets_latest_earliest_max_timestamp_and_by_timestamp(tools, broker):
    create_topic(tools, broker, "offsets-time", 2)
    base = int(time.time() * 1000) - 3_600_000
    produce(broker, "offsets-time", [(0, base, b"a"), (0, base + 3000, b"b"), (0, base + 1000, b"c"),
                                     (0, base + 2000, b"d"), (1, base, b"e")])
    offsets = ("kafka-get-offsets", *bs(broker), "--topic", "offsets-time")
    assert tools.ok(*offsets).lines == ["offsets-time:0:4", "offsets-time:1:1"]
    assert tools.ok(*offsets, "--time", "-1").lines == ["offsets-time:0:4", "offsets-time:1:1"]
    assert tools.ok(*offsets, "--time", "latest").lines == ["offsets-time:0:4", "offsets-time:1:1"]
    assert tools.ok(*offsets, "--time", "-2").lines == ["offsets-time:0:0", "offsets-time:1:0"]
    assert tools.ok(*offsets, "--time", "-3").lines == ["offsets-time:0:1", "offsets-time:1:0"]  # max timestamp
    assert tools.ok(*offsets, "--time", base + 1500).lines == ["offsets-time:0:1"]  # first at or after; 1 has none
    assert tools.ok(*offsets, "--time", base + 3001).stdout == ""
    assert tools.ok("kafka-get-offsets", *bs(broker), "--topic-partitions", "offsets-time:1").lines == [
        "offsets-time:1:1"]
    missing = tools.run("kafka-get-offsets", *bs(broker), "--topic", "no-such-topic")
    assert missing.returncode == 1 and missing.stderr == (
        "Error occurred: Could not match any topic-partitions with the specified filters\n"), missing


def test_delete_records_moves_the_log_start_offset(tools, broker, tmp_path):
    create_topic(tools, broker, "delete-records", 2)
    produce(broker, "delete-records", [(p, int(time.time() * 1000), b"%d" % i) for p in (0, 1) for i in range(5)])
    (tmp_path / "delete.json").write_text(json.dumps(
        {"partitions": [{"topic": "delete-records", "partition": 0, "offset": 3}], "version": 1}))
    deleted = tools.ok("kafka-delete-records", *bs(broker), "--offset-json-file", tmp_path / "delete.json")
    assert deleted.lines == ["Executing records delete operation", "Records delete operation completed:",
                             "partition: delete-records-0\tlow_watermark: 3"], deleted
    assert tools.ok("kafka-get-offsets", *bs(broker), "--topic", "delete-records", "--time", "-2").lines == [
        "delete-records:0:3", "delete-records:1:0"]
    assert consume_lines(tools, broker, "delete-records", 2, "--partition", 0, "--offset", "earliest") == ["3", "4"]

    (tmp_path / "beyond.json").write_text(json.dumps(
        {"partitions": [{"topic": "delete-records", "partition": 1, "offset": 100}], "version": 1}))
    beyond = tools.ok("kafka-delete-records", *bs(broker), "--offset-json-file", tmp_path / "beyond.json")
    assert beyond.lines[-1] == (
        "partition: delete-records-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server."), beyond


def test_log_dirs_describes_partitions_and_their_sizes(tools, broker):
    create_topic(tools, broker, "log-dirs", 2)
    produce(broker, "log-dirs", [(0, int(time.time() * 1000), b"x" * 100) for _ in range(3)])
    result = tools.ok("kafka-log-dirs", *bs(broker), "--describe", "--topic-list", "log-dirs")
    assert result.lines[:2] == ["Querying brokers for log directories information",
                                "Received log directory information from brokers 1"], result
    described = json.loads(result.lines[2])
    assert described["version"] == 1 and [b["broker"] for b in described["brokers"]] == [1], result
    [log_dir] = described["brokers"][0]["logDirs"]
    assert log_dir["logDir"] == str(broker.log_dir) and log_dir["error"] is None, result
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert sizes == {f"log-dirs-{p}": (broker.log_dir / f"log-dirs-{p}" / "00000000000000000000.log").stat().st_size
                     for p in (0, 1)}, result
    assert sizes["log-dirs-0"] > 300 and sizes["log-dirs-1"] == 0, result
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"]), result



def test_reassign_partitions_moves_a_replica_to_another_log_dir(tools, two_dir_broker, tmp_path):
    broker = two_dir_broker
    create_topic(tools, broker, "dir-move")
    produce(broker, "dir-move", [(0, int(time.time() * 1000), b"record-%d" % i) for i in range(20)])

    def placement(result) -> dict[str, list[tuple[str, int, bool]]]:
        """log dir -> its replicas of dir-move-0 as (partition, size, isFuture)."""
        [described] = json.loads(result.lines[2])["brokers"]
        return {d["logDir"]: [(p["partition"], p["size"], p["isFuture"]) for p in d["partitions"]]
                for d in described["logDirs"]}

    before = placement(tools.ok("kafka-log-dirs", *bs(broker), "--describe", "--topic-list", "dir-move"))
    assert sorted(before) == sorted(map(str, broker.log_dirs)), before
    [source] = [d for d, replicas in before.items() if replicas]
    [(_, size, _)] = before[source]
    [target] = [d for d in before if d != source]
    assert size > 0, before

    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "dir-move", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
    started = tools.ok("kafka-reassign-partitions", *bs(broker), "--execute", "--reassignment-json-file", plan)
    assert started.lines[-2:] == [
        "Successfully started partition reassignment for dir-move-0",
        f"Successfully started moving log directory to {target} for replica dir-move-0 with broker 1 "], started
    done = tools.run_until(lambda r: "Reassignment of replica dir-move-0-1 completed successfully." in r.lines,
                           "kafka-reassign-partitions", *bs(broker), "--verify", "--reassignment-json-file", plan)
    assert done.lines[:2] == ["Status of partition reassignment:",
                              "Reassignment of partition dir-move-0 is completed."], done

    after = placement(tools.ok("kafka-log-dirs", *bs(broker), "--describe", "--topic-list", "dir-move"))
    assert after == {source: [], target: [("dir-move-0", size, False)]}, after
    assert consume_lines(tools, broker, "dir-move", 20, "--partition", 0, "--offset", "earliest") == [
        f"record-{i}" for i in range(20)]

# --- the cluster: quorum, features, identity, API versions, ACLs ----------------------------------------------


def test_metadata_quorum_and_cluster_id_through_the_broker_and_the_controller(tools, broker):
    cluster_id = tools.ok("kafka-cluster", "cluster-id", *bs(broker)).stdout
    assert re.fullmatch(r"Cluster ID: [\w-]{22}\n", cluster_id), cluster_id
    assert tools.ok("kafka-cluster", "cluster-id", "--bootstrap-controller", broker.controller_bootstrap
                    ).stdout == cluster_id

    for via in (bs(broker), ("--bootstrap-controller", broker.controller_bootstrap)):
        status = tools.ok("kafka-metadata-quorum", *via, "describe", "--status")
        fields = dict(re.fullmatch(r"(\w+):\s+(.*)", line).groups() for line in status.lines)
        assert list(fields) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                                "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"], status
        assert f"Cluster ID: {fields['ClusterId']}\n" == cluster_id, status
        assert fields["LeaderId"] == "1" and int(fields["LeaderEpoch"]) >= 1 and int(fields["HighWatermark"]) > 0
        assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"], fields["CurrentObservers"]) == ("0", "0", "[]")
        [voter] = json.loads(fields["CurrentVoters"])
        assert voter["id"] == 1 and voter["endpoints"] == [f"CONTROLLER://{broker.controller_bootstrap}"], status

        replication = tools.ok("kafka-metadata-quorum", *via, "describe", "--replication")
        [row] = table(replication.stdout, "NodeId")
        assert row["NodeId"] == "1" and row["Status"] == "Leader" and row["Lag"] == "0", replication
        assert int(row["LogEndOffset"]) >= int(fields["HighWatermark"]), replication
        now = time.time() * 1000
        assert abs(int(row["LastFetchTimestamp"]) - now) < 600_000, replication
        assert row["LastCaughtUpTimestamp"] == row["LastFetchTimestamp"], replication
        readable = tools.ok("kafka-metadata-quorum", *via, "describe", "--replication", "--human-readable")
        assert re.search(r"\t\d+ ms ago +\t\d+ ms ago +\tLeader", readable.stdout), readable


def feature_levels(tools, *via) -> dict[str, str]:
    described = tools.ok("kafka-features", *via, "describe")
    levels = {}
    for line in described.lines:
        fields = dict(field.split(": ", 1) for field in line.split("\t"))
        levels[fields["Feature"]] = fields["FinalizedVersionLevel"]
    return levels


def test_features_describe_upgrade_and_downgrade(tools, broker):
    described = tools.ok("kafka-features", *bs(broker), "describe")
    assert "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t" in \
        described.stdout, described
    assert re.search(r"Feature: metadata.version\tSupportedMinVersion: [\w.-]+\tSupportedMaxVersion: 4.0-IV3\t"
                     r"FinalizedVersionLevel: 4.0-IV3\tEpoch: \d+", described.stdout), described
    assert {"group.version", "kraft.version", "metadata.version", "transaction.version",
            "eligible.leader.replicas.version"} == set(feature_levels(tools, *bs(broker)))
    assert feature_levels(tools, "--bootstrap-controller", broker.controller_bootstrap)["metadata.version"] == "4.0-IV3"

    try:
        dry_run = tools.ok("kafka-features", *bs(broker), "downgrade", "--feature", "group.version=0", "--dry-run")
        assert dry_run.stdout == "group.version can be downgraded to 0.\n", dry_run
        assert feature_levels(tools, *bs(broker))["group.version"] == "1"
        down = tools.ok("kafka-features", *bs(broker), "downgrade", "--feature", "group.version=0")
        assert down.stdout == "group.version was downgraded to 0.\n", down
        assert feature_levels(tools, *bs(broker))["group.version"] == "0"
    finally:
        up = tools.ok("kafka-features", *bs(broker), "upgrade", "--feature", "group.version=1")
    assert up.stdout == "group.version was upgraded to 1.\n", up
    assert feature_levels(tools, *bs(broker))["group.version"] == "1"

    too_high = tools.run("kafka-features", *bs(broker), "upgrade", "--feature", "group.version=5")
    assert too_high.returncode == 1 and too_high.stdout == (
        "Could not upgrade group.version to 5. The update failed for all features since the following feature had an "
        "error: Invalid update version 5 for feature group.version. Local controller 1 only supports versions 0-1\n"
    ), too_high
    metadata_down = tools.run("kafka-features", *bs(broker), "downgrade", "--metadata", "3.9")
    assert metadata_down.returncode == 1 and metadata_down.lines[-1] == (
        "Could not downgrade metadata.version to 21. The update failed for all features since the following feature "
        "had an error: Invalid metadata.version 21. Refusing to perform the requested downgrade because it might "
        "delete metadata information."), metadata_down
    assert tools.ok("kafka-features", *bs(broker), "upgrade", "--metadata", "4.0").lines[-1] == (
        "metadata.version was upgraded to 25.")


# Kafka 4.0's `kafka-broker-api-versions` for each API (a lone broker).
KAFKA_API_VERSIONS = """Produce(0): 0 to 12 [usable: 12]
Fetch(1): 4 to 17 [usable: 17]
ListOffsets(2): 1 to 10 [usable: 10]
Metadata(3): 0 to 13 [usable: 13]
OffsetCommit(8): 2 to 9 [usable: 9]
OffsetFetch(9): 1 to 9 [usable: 9]
FindCoordinator(10): 0 to 6 [usable: 6]
JoinGroup(11): 2 to 9 [usable: 9]
Heartbeat(12): 0 to 4 [usable: 4]
LeaveGroup(13): 0 to 5 [usable: 5]
SyncGroup(14): 0 to 5 [usable: 5]
DescribeGroups(15): 0 to 6 [usable: 6]
ListGroups(16): 0 to 5 [usable: 5]
SaslHandshake(17): 0 to 1 [usable: 1]
ApiVersions(18): 0 to 4 [usable: 4]
CreateTopics(19): 2 to 7 [usable: 7]
DeleteTopics(20): 1 to 6 [usable: 6]
DeleteRecords(21): 0 to 2 [usable: 2]
InitProducerId(22): 0 to 5 [usable: 5]
OffsetForLeaderEpoch(23): 2 to 4 [usable: 4]
AddPartitionsToTxn(24): 0 to 5 [usable: 5]
AddOffsetsToTxn(25): 0 to 4 [usable: 4]
EndTxn(26): 0 to 5 [usable: 5]
WriteTxnMarkers(27): 1 [usable: 1]
TxnOffsetCommit(28): 0 to 5 [usable: 5]
DescribeAcls(29): 1 to 3 [usable: 3]
CreateAcls(30): 1 to 3 [usable: 3]
DeleteAcls(31): 1 to 3 [usable: 3]
DescribeConfigs(32): 1 to 4 [usable: 4]
AlterConfigs(33): 0 to 2 [usable: 2]
AlterReplicaLogDirs(34): 1 to 2 [usable: 2]
DescribeLogDirs(35): 1 to 4 [usable: 4]
SaslAuthenticate(36): 0 to 2 [usable: 2]
CreatePartitions(37): 0 to 3 [usable: 3]
CreateDelegationToken(38): 1 to 3 [usable: 3]
RenewDelegationToken(39): 1 to 2 [usable: 2]
ExpireDelegationToken(40): 1 to 2 [usable: 2]
DescribeDelegationToken(41): 1 to 3 [usable: 3]
DeleteGroups(42): 0 to 2 [usable: 2]
ElectLeaders(43): 0 to 2 [usable: 2]
IncrementalAlterConfigs(44): 0 to 1 [usable: 1]
AlterPartitionReassignments(45): 0 [usable: 0]
ListPartitionReassignments(46): 0 [usable: 0]
OffsetDelete(47): 0 [usable: 0]
DescribeClientQuotas(48): 0 to 1 [usable: 1]
AlterClientQuotas(49): 0 to 1 [usable: 1]
DescribeUserScramCredentials(50): 0 [usable: 0]
AlterUserScramCredentials(51): 0 [usable: 0]
DescribeQuorum(55): 0 to 2 [usable: 2]
UpdateFeatures(57): 0 to 2 [usable: 2]
DescribeCluster(60): 0 to 2 [usable: 2]
DescribeProducers(61): 0 [usable: 0]
UnregisterBroker(64): 0 [usable: 0]
DescribeTransactions(65): 0 [usable: 0]
ListTransactions(66): 0 to 1 [usable: 1]
ConsumerGroupHeartbeat(68): 0 to 1 [usable: 1]
ConsumerGroupDescribe(69): 0 to 1 [usable: 1]
GetTelemetrySubscriptions(71): UNSUPPORTED
PushTelemetry(72): UNSUPPORTED
ListClientMetricsResources(74): 0 [usable: 0]
DescribeTopicPartitions(75): 0 [usable: 0]
ShareGroupHeartbeat(76): UNSUPPORTED
ShareGroupDescribe(77): UNSUPPORTED
ShareFetch(78): UNSUPPORTED
ShareAcknowledge(79): UNSUPPORTED
AddRaftVoter(80): 0 [usable: 0]
RemoveRaftVoter(81): 0 [usable: 0]
InitializeShareGroupState(83): UNSUPPORTED
ReadShareGroupState(84): UNSUPPORTED
WriteShareGroupState(85): UNSUPPORTED
DeleteShareGroupState(86): UNSUPPORTED
ReadShareGroupStateSummary(87): UNSUPPORTED""".splitlines()

# APIs of features Odradek's README lists as not yet supported, where its versions may be fewer than Kafka's:
# transaction version 2 (Produce v12, EndTxn v5, TxnOffsetCommit v5), quotas and dynamic quorums (KIP-853).
NOT_YET_SUPPORTED = {"Produce", "EndTxn", "TxnOffsetCommit", "AddRaftVoter", "RemoveRaftVoter"}


def test_broker_api_versions_lists_the_api_versions_of_kafka_4_0(tools, broker):
    result = tools.ok("kafka-broker-api-versions", *bs(broker))
    assert result.lines[0] == f"{broker.bootstrap} (id: 1 rack: null isFenced: false) -> (", result
    assert result.lines[-1] == ")", result
    listed = [line.strip().rstrip(",") for line in result.lines[1:-1]]
    assert [line.split("(")[0] for line in listed] == [line.split("(")[0] for line in KAFKA_API_VERSIONS], result
    differing = [(kafka, ours) for kafka, ours in zip(KAFKA_API_VERSIONS, listed, strict=True)
                 if kafka != ours and kafka.split("(")[0] not in NOT_YET_SUPPORTED]
    assert not differing, "\n".join(f"Kafka: {kafka}\nhere:  {ours}" for kafka, ours in differing)


def test_acls_without_an_authorizer_get_security_disabled(tools, broker):
    listed = tools.run("kafka-acls", *bs(broker), "--list")
    assert listed.returncode == 1, listed
    assert listed.lines[0] == ("Error while executing ACL command: org.apache.kafka.common.errors."
                               "SecurityDisabledException: No Authorizer is configured on the broker"), listed
    added = tools.run("kafka-acls", *bs(broker), "--add", "--allow-principal", "User:alice", "--operation", "Read",
                      "--topic", "acl-topic")
    assert added.returncode == 1 and ("Error while executing ACL command: org.apache.kafka.common.errors."
                                      "SecurityDisabledException: No Authorizer is configured.") in added.lines, added
    removed = tools.run("kafka-acls", *bs(broker), "--remove", "--allow-principal", "User:alice", "--operation",
                        "Read", "--topic", "acl-topic", "--force")
    assert removed.returncode == 1 and removed.lines[0] == (
        "Error while executing ACL command: org.apache.kafka.common.errors.SecurityDisabledException: "
        "No Authorizer is configured."), removed


# --- performance and latency tools ----------------------------------------------------------------------------


def test_producer_perf_test_with_acks_1_all_idempotent_and_transactional_and_consumer_perf_test(tools, broker):
    create_topic(tools, broker, "perf", 2)
    runs = [("acks=1",), ("acks=all",), ("acks=all", "enable.idempotence=true")]
    for props in runs:
        result = tools.ok("kafka-producer-perf-test", "--topic", "perf", "--num-records", 1000, "--record-size", 100,
                          "--throughput", -1, "--producer-props", f"bootstrap.servers={broker.bootstrap}", *props)
        assert re.fullmatch(r"1000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                            r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th.\n",
                            result.stdout), result
    transactional = tools.ok("kafka-producer-perf-test", "--topic", "perf", "--num-records", 1000, "--record-size",
                             100, "--throughput", -1, "--producer-props", f"bootstrap.servers={broker.bootstrap}",
                             "acks=all", "--transactional-id", "perf-txn", "--transaction-duration-ms", 100)
    assert transactional.stdout.startswith("1000 records sent, "), transactional
    # The last commit completes once its markers are written.
    tools.run_until(lambda r: {row["TransactionalId"]: row["TransactionState"] for row in table(
        r.stdout, "TransactionalId")}.get("perf-txn") == "CompleteCommit", "kafka-transactions", *bs(broker), "list")

    # Four runs of 1000 records, and the transactions' commit markers.
    ends = tools.ok("kafka-get-offsets", *bs(broker), "--topic", "perf").lines
    assert sum(int(line.split(":")[2]) for line in ends) >= 4000, ends

    consumed = tools.ok("kafka-consumer-perf-test", *bs(broker), "--topic", "perf", "--messages", 4000,
                        "--timeout", 60000)
    header, values = consumed.lines
    stats = dict(zip(header.split(", "), values.split(", "), strict=True))
    assert stats["data.consumed.in.nMsg"] == "4000" and float(stats["data.consumed.in.MB"]) == pytest.approx(
        4000 * 100 / 1024 / 1024, abs=0.001), consumed


def test_end_to_end_latency_creates_its_topic_and_measures_round_trips(tools, broker):
    result = tools.ok("kafka-e2e-latency", broker.bootstrap, "e2e-latency", 50, "all", 100)
    assert result.lines[0] == ('Topic "e2e-latency" does not exist. Will create topic with 1 partition(s) and '
                               'replication factor = 1'), result
    assert re.fullmatch(r"Avg latency: [\d.]+ ms", result.lines[-2]), result
    assert re.fullmatch(r"Percentiles: 50th = \d+, 99th = \d+, 99.9th = \d+", result.lines[-1]), result
    assert tools.ok("kafka-get-offsets", *bs(broker), "--topic", "e2e-latency").lines == ["e2e-latency:0:50"]
