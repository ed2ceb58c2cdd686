"""How a node connects to a listener of another node: TLS with its own keystore and truststore, and a SASL
login (PLAIN or SCRAM) with the `username` and `password` of the listener's JAAS configuration, as Kafka's
inter-broker and controller clients do."""

from __future__ import annotations

from odradek.config import BrokerConfig, ConfigError
from odradek.network.client import ClientSecurity
from odradek.security.jaas import parse_jaas_config
from odradek.security.plain import plain_client_response
from odradek.security.sasl_errors import SaslAuthenticationError
from odradek.security.scram import ScramClient, ScramMechanism, random_nonce
from odradek.security.tls import client_context, listener_settings

INTER_BROKER_MECHANISM = "sasl.mechanism.inter.broker.protocol"
CONTROLLER_MECHANISM = "sasl.mechanism.controller.protocol"


def client_security(config: BrokerConfig, listener: str, mechanism_setting: str) -> ClientSecurity | None:
    """The security for connections to `listener` on other nodes; None for a PLAINTEXT listener."""
    if not listener:  # a controller-only node has no inter-broker listener
        return None
    protocol = config.security_protocol_of(listener)
    if protocol == "PLAINTEXT":
        return None
    context = client_context(listener_settings(config, listener)) if protocol in ("SSL", "SASL_SSL") else None
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(ssl_context=context)
    mechanism, username, password = node_credentials(config, listener, mechanism_setting)
    if mechanism == "PLAIN":
        return ClientSecurity(context, mechanism, lambda: PlainLogin(username, password))
    scram = ScramMechanism.by_name(mechanism)
    return ClientSecurity(context, mechanism, lambda: ScramLogin(ScramClient(scram, username, password, random_nonce)))


def node_credentials(config: BrokerConfig, listener: str, mechanism_setting: str) -> tuple[str, str, str]:
    """(mechanism, username, password) this node logs in with to a SASL `listener`: the mechanism
    `mechanism_setting` names, and the username and password of the listener's JAAS configuration for it."""
    mechanism = str(config[mechanism_setting]).strip().upper()
    protocol = config.security_protocol_of(listener)
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if mechanism != "PLAIN" and ScramMechanism.by_name(mechanism) is None:
        raise ConfigError(f"{mechanism_setting}={mechanism}: listener {listener} is {protocol}, and nodes log in "
                          "with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    text = config.listener_setting(listener, "sasl.jaas.config", mechanism=mechanism.lower())
    options = parse_jaas_config(text, key=key).options if text else {}
    username, password = options.get("username"), options.get("password")
    if not username or not password:
        raise ConfigError(f"{key}: the username and password this node logs in with to listener {listener} "
                          f"({mechanism}) are missing")
    return mechanism, username, password


class PlainLogin:
    def __init__(self, username: str, password: str):
        self.username = username
        self.password = password

    def first(self) -> bytes:
        return plain_client_response(self.username, self.password)

    def next(self, server_token: bytes) -> bytes | None:
        return None


class ScramLogin:
    def __init__(self, client: ScramClient):
        self.client = client
        self._sent_final = False

    def first(self) -> bytes:
        return self.client.first_message()

    def next(self, server_token: bytes) -> bytes | None:
        try:
            if not self._sent_final:
                self._sent_final = True
                return self.client.final_message(server_token)
            self.client.verify_server_final(server_token)
            return None
        except SaslAuthenticationError as exc:
            raise ValueError(str(exc)) from None
