"""TLS contexts from Kafka's ssl.* settings: what loads, what is refused with which message, and the
translation of Kafka's (IANA) cipher suite names to OpenSSL's."""

import ssl

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.security.tls import client_context, listener_settings, openssl_cipher_name, server_context
from tests.security.certificates import CertificateAuthority


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    authority = CertificateAuthority(directory)
    return authority, authority.issue("node"), authority.issue("locked", key_password="key-secret")


def settings(**given) -> object:
    props = {"listeners": "SECURE://127.0.0.1:9093", "listener.security.protocol.map": "SECURE:SSL",
             **{key.replace("_", "."): value for key, value in given.items()}}
    return listener_settings(BrokerConfig(props), "SECURE")


def test_a_pem_keystore_file_or_pem_text_loads(pki):
    authority, node, _ = pki
    assert server_context(settings(ssl_keystore_location=str(node.keystore))).verify_mode == ssl.CERT_NONE
    text = settings(**{"ssl_keystore_certificate_chain": node.certificate.read_text(),
                       "ssl_keystore_key": node.key.read_text()})
    assert isinstance(server_context(text), ssl.SSLContext)


def test_an_encrypted_key_needs_its_password(pki):
    _, _, locked = pki
    with pytest.raises(ConfigError, match="ssl.key.password if the key is encrypted"):
        server_context(settings(ssl_keystore_location=str(locked.keystore), ssl_key_password="wrong"))
    server_context(settings(ssl_keystore_location=str(locked.keystore), ssl_key_password="key-secret"))


@pytest.mark.parametrize("given, message", [
    ({}, "a TLS listener needs its key and certificate"),
    ({"ssl_keystore_location": "/nonexistent.pem"}, "no such file /nonexistent.pem"),
    ({"ssl_keystore_type": "JKS"}, "ssl.keystore.type JKS is not supported"),
    ({"ssl_keystore_location": "NODE", "ssl_client_auth": "always"}, "String must be one of: required, requested"),
    ({"ssl_keystore_location": "NODE", "ssl_client_auth": "required"}, "needs the trusted authorities"),
    ({"ssl_keystore_location": "NODE", "ssl_enabled_protocols": "SSLv3"}, "ssl.enabled.protocols"),
    ({"ssl_keystore_location": "NODE", "ssl_cipher_suites": "TLS_NO_SUCH_SUITE"}, "TLS_NO_SUCH_SUITE is not a cipher"),
])
def test_unusable_settings_are_refused_with_a_message_naming_them(pki, given, message):
    _, node, _ = pki
    given = {key: str(node.keystore) if value == "NODE" else value for key, value in given.items()}
    with pytest.raises(ConfigError, match=message):
        server_context(settings(**given))


def test_client_certificates_required_or_requested(pki):
    authority, node, _ = pki
    base = {"ssl_keystore_location": str(node.keystore), "ssl_truststore_location": str(authority.path)}
    assert server_context(settings(**base, ssl_client_auth="required")).verify_mode == ssl.CERT_REQUIRED
    assert server_context(settings(**base, ssl_client_auth="requested")).verify_mode == ssl.CERT_OPTIONAL


def test_protocol_versions_and_cipher_suites_restrict_the_context(pki):
    _, node, _ = pki
    context = server_context(settings(ssl_keystore_location=str(node.keystore), ssl_enabled_protocols="TLSv1.3"))
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3
    context = server_context(settings(ssl_keystore_location=str(node.keystore),
                                      ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256"))
    tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-ECDSA-AES256-GCM-SHA384"}


@pytest.mark.parametrize("iana, openssl", [
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_DHE_RSA_WITH_AES_128_CBC_SHA", "DHE-RSA-AES128-SHA"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256"),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),  # already OpenSSL's
])
def test_kafka_cipher_suite_names_become_openssl_names(iana, openssl):
    assert openssl_cipher_name(iana) == openssl
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl)  # and OpenSSL knows it


def test_a_client_context_checks_host_names_unless_told_not_to(pki):
    authority, node, _ = pki
    checked = client_context(settings(ssl_truststore_location=str(authority.path)))
    assert checked.check_hostname and checked.verify_mode == ssl.CERT_REQUIRED
    unchecked = client_context(settings(ssl_truststore_location=str(authority.path),
                                        ssl_endpoint_identification_algorithm=""))
    assert not unchecked.check_hostname
