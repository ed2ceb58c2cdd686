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
    ("num.partitions=zero", "num.partitions: expected a value of type int"),
    ("auto.create.topics.enable=maybe", "expected a value of type boolean"),
    ("listeners=nonsense", "cannot parse"),
    ("num.partitions=0", "must be positive"),
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
