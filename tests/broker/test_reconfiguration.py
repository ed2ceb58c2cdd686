"""A broker's own checks of a dynamic change against the settings it runs with (Kafka's reconfigurable
components): thread pools change by at most half or double at a time, connection limits stay usable."""

import pytest

from odradek.config import BrokerConfig
from odradek.dynamic_config import reconfiguration_problem

RUNNING = BrokerConfig({"num.io.threads": "8", "num.network.threads": "3", "log.cleaner.threads": "2"})


@pytest.mark.parametrize("changes,problem", [
    ({"num.io.threads": "16"}, None),
    ({"num.io.threads": "4"}, None),
    ({"num.io.threads": "17"}, "Dynamic thread count update validation failed for num.io.threads=17, value should "
                               "not be greater than double the current value 8"),
    ({"num.io.threads": "3"}, "Dynamic thread count update validation failed for num.io.threads=3, value should be "
                              "at least half the current value 8"),
    ({"num.network.threads": "1"}, None),  # 3 // 2 is 1, as in Kafka's integer arithmetic
    ({"log.cleaner.threads": "4"}, None),
    ({"log.cleaner.threads": "5"}, "Log cleaner threads cannot be increased to more than double the current value 2"),
    ({"log.cleaner.threads": "0"}, "Log cleaner threads should be at least 1"),
    ({"max.connections": "0"}, "Invalid max.connections 0"),
    ({"max.connections.per.ip": "0"}, "requirement failed: max.connections.per.ip can be set to zero only if "
                                      "max.connections.per.ip.overrides property is set."),
    ({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:10"}, None),
    ({"num.io.threads": None, "log.retention.ms": "1000"}, None),
    ({"num.io.threads": "many"}, None),  # a value that is not a number is the controller's to refuse
])
def test_changes_kafka_refuses_get_its_words(changes, problem):
    found = reconfiguration_problem(RUNNING, changes)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found
