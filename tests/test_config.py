"""Configuration: parsing, Kafka defaults, validation, and the generated reference staying true."""

from pathlib import Path

import pytest

from odradek.config import BrokerConfig, ConfigError, parse_properties, validate_topic_name
from odradek.config_reference import render


def test_kafka_defaults():
    config = BrokerConfig()
    assert config["num.partitions"] == 1
    assert config["message.max.bytes"] == 1048588
    assert config["socket.request.max.bytes"] == 104857600
    assert config["auto.create.topics.enable"] is True
    assert config.log_dirs == ["/tmp/kafka-logs"]
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.topic_defaults()["segment.bytes"] == "1073741824"


def test_properties_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nnode.id=3\nlog.dirs = /a,/b\nlog.retention.hours: 1\nlisteners=PLAINTEXT://h:1\\\n234\n")
    config = BrokerConfig.load(str(path), ["num.partitions=6", "node.id=4"])
    assert config.node_id == 4
    assert config.log_dirs == ["/a", "/b"]
    assert config["num.partitions"] == 6
    assert config.retention_ms == 3_600_000
    assert config.listeners[0].port == 1234
    assert parse_properties("a=b=c")["a"] == "b=c"


@pytest.mark.parametrize("override,message", [
    ("num.partitions=zero", "Invalid value zero for configuration num.partitions: Not a number of type INT"),
    ("auto.create.topics.enable=maybe", "Expected value to be either true or false"),
    ("listeners=nonsense", "cannot parse"),
    ("num.partitions=0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ("log.segment.bytes=65536", "Invalid value 65536 for configuration log.segment.bytes: Value must be at least 1048576"),
    ("compression.lz4.level=18", "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
    ("max.connections.per.ip=0", "max.connections.per.ip can be set to zero only if"),
    ("max.connections.per.ip.overrides=localhost", "expected host:count"),
    ("listeners=PLAINTEXT://:9092,INTERNAL://:9094", "No security protocol defined for listener INTERNAL"),
    ("listener.security.protocol.map=PLAINTEXT:TLS", "unknown security protocol TLS"),
    ("novalue", "expects key=value"),
])
def test_bad_settings_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(None, [override])


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.load(str(tmp_path / "absent.properties"))


@pytest.mark.parametrize("name,ok", [("orders", True), ("a.b_c-9", True), ("", False), (".", False),
                                     ("x" * 250, False), ("bad/name", False), ("spaced name", False)])
def test_topic_names_follow_kafka_rules(name, ok):
    assert (validate_topic_name(name) is None) == ok


def test_configuration_reference_is_current():
    path = Path(__file__).parent.parent / "docs" / "configuration.md"
    assert path.read_text() == render(), "regenerate: python -m odradek.config_reference > docs/configuration.md"


QUORUM = {"controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"}


def test_kraft_settings_describe_the_node_roles():
    combined = BrokerConfig({**QUORUM, "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"})
    assert combined.process_roles == {"broker", "controller"} and combined.quorum_voters[2] == ("127.0.0.1", 9095)
    assert [lst.name for lst in combined.listeners] == ["PLAINTEXT"]
    assert [lst.name for lst in combined.controller_listeners] == ["CONTROLLER"]
    broker = BrokerConfig({**QUORUM, "node.id": "4", "process.roles": "broker", "listeners": "PLAINTEXT://:9092"})
    assert broker.process_roles == {"broker"} and broker.inter_broker_listener == "PLAINTEXT"
    controller = BrokerConfig({**QUORUM, "node.id": "2", "process.roles": "controller",
                               "listeners": "CONTROLLER://:9095"})
    assert controller.listeners == [] and controller.controller_listeners[0].port == 9095


@pytest.mark.parametrize("settings, message", [
    ({"process.roles": "broker,zookeeper"}, "process.roles"),
    ({"process.roles": "broker"}, "a node with only one role needs"),
    ({**QUORUM, "node.id": "4", "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"}, "must be a voter exactly"),
    ({**QUORUM, "node.id": "1", "process.roles": "broker", "listeners": "PLAINTEXT://:9092"}, "must be a voter"),
    ({**QUORUM, "listeners": "PLAINTEXT://:9092"}, "a controller listener"),
    ({**QUORUM, "node.id": "2", "process.roles": "controller", "listeners": "CONTROLLER://:9095",
      "controller.quorum.voters": "2@h:1,x@h:2"}, "cannot parse 'x@h:2'"),
    ({"controller.quorum.bootstrap.servers": "h:9093"}, "dynamic quorums are not supported"),
    ({"inter.broker.listener.name": "INTERNAL"}, "no listener is named INTERNAL"),
])
def test_kraft_settings_that_cannot_work_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(settings)


def test_broker_id_and_node_id_stand_for_each_other():
    assert BrokerConfig({"node.id": "3"})["broker.id"] == 3
    assert BrokerConfig({"broker.id": "3"}).node_id == 3
    assert BrokerConfig()["broker.id"] == -1  # neither given: node.id's default applies, broker.id is unset
    with pytest.raises(ConfigError, match="broker.id 2 must equal node.id 1"):
        BrokerConfig({"node.id": "1", "broker.id": "2"})


def test_listeners_get_their_security_protocols():
    config = BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093,INTERNAL://:9094",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"})
    assert config.security_protocols() == {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", "INTERNAL": "PLAINTEXT"}
    # An unmapped controller listener is PLAINTEXT only while the map is Kafka's default.
    assert BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"}).security_protocols()["CONTROLLER"] == "PLAINTEXT"
    with pytest.raises(ConfigError, match="No security protocol defined for listener CONTROLLER"):
        BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"})


def test_connection_overrides_resolve_host_names():
    config = BrokerConfig({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "localhost:5,10.0.0.1:7"})
    assert config.max_connections_per_ip_overrides() == {"127.0.0.1": 5, "10.0.0.1": 7}
