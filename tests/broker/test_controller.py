"""The controller and its metadata log: validation, durability across reopen, torn tails."""

import os

import pytest

from odradek.config import BrokerConfig
from odradek.controller.controller import Controller
from odradek.controller.metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE
from odradek.controller.metadata_log import LOG_FILE
from odradek.protocol.errors import ErrorCode, KafkaError


def open_controller(directory, **settings) -> tuple[Controller, list]:
    seen: list[dict] = []
    controller = Controller(BrokerConfig({k.replace("_", "."): v for k, v in settings.items()}), str(directory),
                            "cluster-x", seen.extend)
    controller.start()
    return controller, seen


def test_topics_and_configs_survive_reopen(tmp_path):
    controller, seen = open_controller(tmp_path)
    controller.create_topic("orders", 3, configs={"retention.ms": "1000"})
    controller.create_partitions("orders", 5, None)
    controller.alter_configs(TOPIC_RESOURCE, "orders", {"retention.ms": None, "segment.ms": "60000"})
    controller.create_topic("gone")
    controller.delete_topic("gone")
    first_id = controller.allocate_producer_id()
    controller.close()
    assert [r["type"] for r in seen].count("PartitionRecord") == 6

    reopened, _ = open_controller(tmp_path)
    image = reopened.image
    assert image.cluster_id == "cluster-x"
    assert sorted(image.topics) == ["orders"]
    assert sorted(image.topics["orders"].partitions) == [0, 1, 2, 3, 4]
    assert image.topics["orders"].configs == {"segment.ms": "60000"}
    assert reopened.allocate_producer_id() > first_id  # ids are never reused after a restart


def test_torn_tail_of_the_metadata_log_is_dropped(tmp_path):
    controller, _ = open_controller(tmp_path)
    controller.create_topic("kept")
    controller.close()
    path = os.path.join(tmp_path, LOG_FILE)
    size = os.path.getsize(path)
    controller, _ = open_controller(tmp_path)
    controller.create_topic("torn")
    controller.close()
    with open(path, "r+b") as f:
        f.truncate(size + 10)  # the second write was cut short by a crash
    reopened, _ = open_controller(tmp_path)
    assert sorted(reopened.image.topics) == ["kept"]
    reopened.create_topic("after")  # appends continue from the valid prefix
    reopened.close()
    assert sorted(open_controller(tmp_path)[0].image.topics) == ["after", "kept"]


@pytest.mark.parametrize("call,code", [
    (lambda c: c.create_topic("bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (lambda c: c.create_topic("existing"), ErrorCode.TOPIC_ALREADY_EXISTS),
    (lambda c: c.create_topic("new", 0), ErrorCode.INVALID_PARTITIONS),
    (lambda c: c.create_topic("new", 1, 2), ErrorCode.INVALID_REPLICATION_FACTOR),
    (lambda c: c.create_topic("new", configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
    (lambda c: c.create_topic("new", configs={"no.such": "1"}), ErrorCode.INVALID_CONFIG),
    (lambda c: c.create_topic("new", assignments={0: [7]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (lambda c: c.create_partitions("existing", 1, None), ErrorCode.INVALID_PARTITIONS),
    (lambda c: c.create_partitions("missing", 4, None), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (lambda c: c.delete_topic("missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (lambda c: c.alter_configs(BROKER_RESOURCE, "1", {"log.dirs": "/x"}), ErrorCode.INVALID_CONFIG),
])
def test_invalid_changes_are_rejected_without_writing(tmp_path, call, code):
    controller, _ = open_controller(tmp_path)
    controller.create_topic("existing")
    size = os.path.getsize(os.path.join(tmp_path, LOG_FILE))
    with pytest.raises(KafkaError) as failure:
        call(controller)
    assert failure.value.code == code
    assert os.path.getsize(os.path.join(tmp_path, LOG_FILE)) == size


def test_names_colliding_on_dot_and_underscore_are_rejected(tmp_path):
    controller, _ = open_controller(tmp_path)
    controller.create_topic("a.b")
    with pytest.raises(KafkaError) as failure:
        controller.create_topic("a_b")
    assert failure.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_validate_only_writes_nothing(tmp_path):
    controller, seen = open_controller(tmp_path)
    assert controller.create_topic("dry", 4, validate_only=True) is None
    assert "dry" not in controller.image.topics
    assert [r["type"] for r in seen] == ["ClusterRecord"]


def test_dynamic_broker_default_flows_into_topic_configs(tmp_path):
    controller, _ = open_controller(tmp_path)
    topic = controller.create_topic("t")
    controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "5000"})
    assert controller.log_config(topic).retention_ms == 5000
