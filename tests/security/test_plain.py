"""SASL PLAIN as Kafka's PlainSaslServer answers it (its PlainSaslServerTest cases), the users of PlainLoginModule,
and the client's message."""

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.security.jaas import JaasEntry, parse_jaas_config
from odradek.security.listener import ListenerSecurity
from odradek.security.plain import PlainServer, password_checker, plain_client_response, plain_users_from_jaas
from odradek.security.sasl_errors import SaslAuthenticationError

USERS = {"userA": "passwordA", "userB": "passwordB"}


def server() -> PlainServer:
    return PlainServer(password_checker(USERS))


def message(authorization_id: str, username: str, password: str) -> bytes:
    return f"{authorization_id}\0{username}\0{password}".encode()


def test_no_authorization_id():
    assert server().evaluate(message("", "userA", "passwordA")) == "userA"


def test_authorization_id_equal_to_username():
    assert server().evaluate(message("userA", "userA", "passwordA")) == "userA"


def test_authorization_id_different_from_username_is_refused():
    with pytest.raises(SaslAuthenticationError) as failure:
        server().evaluate(message("userB", "userA", "passwordA"))
    assert str(failure.value) == (
        "Authentication failed: Client requested an authorization id that is different from username")


@pytest.mark.parametrize("username, password", [("userA", "wrong"), ("nobody", "passwordA"), ("userA", "passwordB")])
def test_wrong_user_and_wrong_password_get_the_same_answer(username, password):
    with pytest.raises(SaslAuthenticationError) as failure:
        server().evaluate(message("", username, password))
    assert str(failure.value) == "Authentication failed: Invalid username or password"


def test_credentials_are_checked_before_the_authorization_id():
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        server().evaluate(message("userB", "userA", "wrong"))


@pytest.mark.parametrize("authorization_id, username, password, error", [
    ("", "", "", "Authentication failed: username not specified"),
    ("", "", "p", "Authentication failed: username not specified"),
    ("", "u", "", "Authentication failed: password not specified"),
    ("a", "", "", "Authentication failed: username not specified"),
    ("a", "", "p", "Authentication failed: username not specified"),
    ("a", "u", "", "Authentication failed: password not specified"),
])
def test_empty_tokens(authorization_id, username, password, error):
    with pytest.raises(SaslAuthenticationError) as failure:
        server().evaluate(message(authorization_id, username, password))
    assert str(failure.value) == error


@pytest.mark.parametrize("response, count", [
    (b"a\0u\0p\0", 4),
    (b"a\0u\0p\0x\0y", 4),
    (b"\0u", 2),
    (b"", 1),
])
def test_response_must_have_exactly_three_tokens(response, count):
    with pytest.raises(SaslAuthenticationError) as failure:
        server().evaluate(response)
    assert str(failure.value) == f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}"


def test_a_failing_credential_store_tells_the_client_nothing_more():
    def broken(username: str, password: str) -> bool:
        raise OSError("credential store unreachable at 10.0.0.7")

    with pytest.raises(SaslAuthenticationError) as failure:
        PlainServer(broken).evaluate(message("", "userA", "passwordA"))
    assert str(failure.value) == "Authentication failed: credentials for user could not be verified"


def test_utf8_credentials():
    plain = PlainServer(password_checker({"zoë": "pässwörd"}))
    assert plain.evaluate(plain_client_response("zoë", "pässwörd")) == "zoë"


def test_users_are_the_user_options_of_plain_login_module():
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    assert plain_users_from_jaas(entry) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_another_login_module_has_no_plain_users():
    entry = JaasEntry("org.apache.kafka.common.security.scram.ScramLoginModule", "required", {"user_alice": "x"})
    assert plain_users_from_jaas(entry) == {}


def test_client_response_is_authzid_username_password_separated_by_nul():
    assert plain_client_response("admin", "admin-secret") == b"\0admin\0admin-secret"
    assert plain_client_response("admin", "admin-secret", authzid="admin") == b"admin\0admin\0admin-secret"
    assert server().evaluate(plain_client_response("userB", "passwordB")) == "userB"


@pytest.mark.parametrize("mechanism", ["plain", "scram-sha-256"])
def test_a_java_callback_handler_for_plain_or_scram_stops_the_node(mechanism):
    # Checking the JAAS users instead of the operator's LDAP (say) would let in whom it keeps out.
    config = BrokerConfig({
        "listeners": "SASL://127.0.0.1:9092", "listener.security.protocol.map": "SASL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": mechanism.upper(),
        "listener.name.sasl.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                     'required user_alice="alice-secret";',
        f"listener.name.sasl.{mechanism}.sasl.server.callback.handler.class": "com.example.LdapCallbackHandler"})
    with pytest.raises(ConfigError, match="Java callback handlers are not supported"):
        ListenerSecurity(config, "SASL", lambda *_: None)
