"""A node's own clients (cluster links) reach its inter-broker listener and log in as the node does, with the
listener's TLS settings and JAAS credentials as librdkafka properties."""

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.security.internal_client import internal_client_properties

NODE_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
             'password="broker-secret" user_broker="broker-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="node" '
              'password="node-secret";')


def config(**settings: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": "/tmp/unused", **settings})


def test_a_plaintext_listener_needs_no_login():
    assert internal_client_properties(config(listeners="PLAINTEXT://127.0.0.1:9092")) == (
        "127.0.0.1:9092", {"security.protocol": "plaintext"})


def test_the_inter_broker_listener_with_the_nodes_own_plain_login_and_truststore():
    settings = config(**{
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://0.0.0.0:9093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://broker-1.example:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": NODE_JAAS,
        "ssl.keystore.location": "/etc/odradek/node.pem", "ssl.truststore.location": "/etc/odradek/ca.pem"})
    bootstrap, properties = internal_client_properties(settings)
    assert bootstrap == "broker-1.example:9093"  # as other brokers reach it: the name its certificate is for
    assert properties == {
        "security.protocol": "sasl_ssl", "ssl.ca.location": "/etc/odradek/ca.pem",
        "ssl.certificate.location": "/etc/odradek/node.pem", "ssl.key.location": "/etc/odradek/node.pem",
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanism": "PLAIN", "sasl.username": "broker", "sasl.password": "broker-secret"}


def test_scram_per_listener_tls_overrides_inline_pems_and_no_host_name_check():
    settings = config(**{
        "listeners": "SASL_SSL://:9093", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.truststore.location": "/node-wide/ca.pem",
        "listener.name.sasl_ssl.ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
        "ssl.keystore.certificate.chain": "CHAIN", "ssl.keystore.key": "KEY", "ssl.key.password": "pw",
        "ssl.endpoint.identification.algorithm": ""})
    bootstrap, properties = internal_client_properties(settings)
    assert bootstrap.endswith(":9093")
    assert properties == {
        "security.protocol": "sasl_ssl", "ssl.ca.pem": "-----BEGIN CERTIFICATE-----",
        "ssl.certificate.pem": "CHAIN", "ssl.key.pem": "KEY", "ssl.key.password": "pw",
        "ssl.endpoint.identification.algorithm": "none",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "node", "sasl.password": "node-secret"}


def test_a_wildcard_bind_address_is_reached_on_the_loopback():
    settings = config(**{"listeners": "SASL_PLAINTEXT://[::]:9094", "advertised.listeners": "SASL_PLAINTEXT://:9094",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN",
                         "listener.name.sasl_plaintext.plain.sasl.jaas.config": NODE_JAAS})
    assert internal_client_properties(settings) == ("127.0.0.1:9094", {
        "security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN", "sasl.username": "broker",
        "sasl.password": "broker-secret"})


def test_a_sasl_listener_without_the_nodes_credentials_is_a_config_error():
    settings = config(**{"listeners": "SASL_PLAINTEXT://127.0.0.1:9094",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN",
                         "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                             'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'})
    with pytest.raises(ConfigError, match="username and password this node logs in with"):
        internal_client_properties(settings)
