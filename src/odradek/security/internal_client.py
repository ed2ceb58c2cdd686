"""The librdkafka properties of a node's own Kafka clients of its cluster (the cluster links' reader and topic
sync): they connect to the node's inter-broker listener and log in as the node logs in to other brokers, so
the cluster sees the broker's own principal (normally a super user), as Kafka's brokers act as themselves
for their internal clients.

    security.protocol       the inter-broker listener's protocol
    ssl.ca.location / ssl.ca.pem                        ssl.truststore.location / ssl.truststore.certificates
    ssl.certificate.location, ssl.key.location          ssl.keystore.location (one PEM file holds both)
    ssl.certificate.pem, ssl.key.pem                    ssl.keystore.certificate.chain, ssl.keystore.key
    ssl.key.password                                    ssl.key.password
    ssl.endpoint.identification.algorithm               https, or none for an empty one
    sasl.mechanism, sasl.username, sasl.password        sasl.mechanism.inter.broker.protocol, and the
                                                        username and password of the listener's JAAS config

ssl.enabled.protocols and ssl.cipher.suites are not carried over: librdkafka negotiates the best the listener
offers. The settings are read as the listener sees them (listener.name.<listener>.* overrides first).
"""

from __future__ import annotations

from odradek.config import BrokerConfig, ConfigError
from odradek.security.client_login import INTER_BROKER_MECHANISM, node_credentials
from odradek.security.tls import Setting, listener_settings

WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def internal_client_properties(config: BrokerConfig) -> tuple[str, dict[str, str]]:
    """(bootstrap servers, librdkafka properties) of a client of this node's inter-broker listener, logged in
    with the node's own credentials. A ConfigError when the node has no inter-broker listener."""
    name = config.inter_broker_listener
    if not name:
        raise ConfigError("the node has no inter-broker listener (a controller-only node) for its own clients")
    protocol = config.security_protocol_of(name)
    properties = {"security.protocol": protocol.lower()}
    if protocol in ("SSL", "SASL_SSL"):
        properties.update(_tls_properties(listener_settings(config, name)))
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism, username, password = node_credentials(config, name, INTER_BROKER_MECHANISM)
        properties.update({"sasl.mechanism": mechanism, "sasl.username": username, "sasl.password": password})
    return _bootstrap(config, name), properties


def _bootstrap(config: BrokerConfig, name: str) -> str:
    """This node's endpoint of the listener as other brokers reach it (its advertised one: the name its
    certificate is for), a wildcard host as 127.0.0.1."""
    listener = next((li for li in config.advertised_listeners if li.name == name), None) or \
        next(li for li in config.listeners if li.name == name)
    host = "127.0.0.1" if listener.host in WILDCARD_HOSTS else listener.host
    return f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"


def _tls_properties(setting: Setting) -> dict[str, str]:
    properties = {}
    if setting("ssl.truststore.certificates"):
        properties["ssl.ca.pem"] = str(setting("ssl.truststore.certificates"))
    elif setting("ssl.truststore.location"):
        properties["ssl.ca.location"] = str(setting("ssl.truststore.location"))
    if setting("ssl.keystore.location"):
        properties["ssl.certificate.location"] = properties["ssl.key.location"] = str(setting("ssl.keystore.location"))
    elif setting("ssl.keystore.certificate.chain"):
        properties["ssl.certificate.pem"] = str(setting("ssl.keystore.certificate.chain"))
        properties["ssl.key.pem"] = str(setting("ssl.keystore.key"))
    if setting("ssl.key.password"):
        properties["ssl.key.password"] = str(setting("ssl.key.password"))
    algorithm = str(setting("ssl.endpoint.identification.algorithm") or "").strip().lower()
    properties["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    return properties
