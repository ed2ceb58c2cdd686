"""A node whose only listener asks for SASL, with an authorizer, serves its schema registry: the registry keeps
its topic as a client of the node's inter-broker listener, logged in as the broker."""

from confluent_kafka import Consumer, KafkaError

from tests.links.test_link_security import SecuredNode
from tests.registry.conftest import registry_settings, wait_until_serving


def test_a_registry_on_a_node_whose_only_listener_asks_for_sasl(tmp_path):
    node = SecuredNode(tmp_path / "node", "SASL_PLAINTEXT")
    node.process.settings.update(registry_settings())
    node.process.start()
    try:
        registry = wait_until_serving(node.process.settings["schema.registry.listener"],
                                      log_text=node.process.log_text)
        status, body = registry.post("/subjects/orders-value/versions", {"schema": '"string"'})
        assert status == 200 and body["id"] >= 1, body
        assert registry.get("/subjects") == (200, ["orders-value"])
        # the schema is in the cluster's _schemas topic, as a client logged in there reads it
        consumer = Consumer(node.client("admin", **{"group.id": "check", "auto.offset.reset": "earliest",
                                                    "enable.partition.eof": True}))
        consumer.subscribe(["_schemas"])
        keys = []
        while True:
            message = consumer.poll(30)
            assert message is not None, "_schemas did not answer"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                break
            keys.append(message.key())
        consumer.close()
        assert any(b"orders-value" in (key or b"") for key in keys), keys
    finally:
        node.process.stop()
