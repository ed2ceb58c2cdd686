"""TLS contexts from Kafka's ssl.* settings: a listener's server context and a node's client context (PEM only)."""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable

from odradek.config import BrokerConfig, ConfigError

PROTOCOL_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                     "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH_MODES = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}

Setting = Callable[[str], object]  # a setting's value as one listener sees it


def listener_settings(config: BrokerConfig, listener: str) -> Setting:
    return lambda name: config.listener_setting(listener, name)


def server_context(setting: Setting) -> ssl.SSLContext:
    """The context of an SSL or SASL_SSL listener: its key and certificate, its TLS versions and suites, and
    whether (and against which authorities) client certificates are verified."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _restrict(context, setting)
    _load_keystore(context, setting, required=True)
    mode = str(setting("ssl.client.auth")).strip().lower()
    if mode not in CLIENT_AUTH_MODES:
        raise ConfigError(f"Invalid value {setting('ssl.client.auth')} for configuration ssl.client.auth: "
                          "String must be one of: required, requested, none")
    if mode != "none":
        if not _load_truststore(context, setting):
            raise ConfigError(f"ssl.client.auth={mode} needs the trusted authorities: set ssl.truststore.location "
                              "or ssl.truststore.certificates")
        context.verify_mode = CLIENT_AUTH_MODES[mode]
    return context


def client_context(setting: Setting) -> ssl.SSLContext:
    """The context a node connects to another node's SSL or SASL_SSL listener with: it verifies the server
    against the truststore (the system's authorities without one), checks the host name unless
    ssl.endpoint.identification.algorithm is empty, and presents its own certificate when it has one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _restrict(context, setting)
    _load_keystore(context, setting, required=False)
    if not _load_truststore(context, setting):
        context.load_default_certs()
    algorithm = str(setting("ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(f"Invalid value {algorithm} for configuration ssl.endpoint.identification.algorithm: "
                          "expected https or empty")
    context.check_hostname = algorithm == "https"
    return context


def _restrict(context: ssl.SSLContext, setting: Setting) -> None:
    names = [name.strip() for name in str(setting("ssl.enabled.protocols") or "").split(",") if name.strip()]
    unknown = [name for name in names if name not in PROTOCOL_VERSIONS]
    if unknown or not names:
        raise ConfigError(f"Invalid value {','.join(names)} for configuration ssl.enabled.protocols: expected some "
                          f"of {', '.join(PROTOCOL_VERSIONS)}")
    versions = sorted(PROTOCOL_VERSIONS[name] for name in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    suites = [name.strip() for name in str(setting("ssl.cipher.suites") or "").split(",") if name.strip()]
    tls12_suites = []
    for name in suites:
        if _is_tls13_suite(name):
            continue
        tls12_suites.append(openssl_cipher_name(name))
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(tls12_suites[-1])
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites: {name} is not a cipher suite this node's OpenSSL offers") from None
    if tls12_suites:
        context.set_ciphers(":".join(tls12_suites))


def _is_tls13_suite(name: str) -> bool:
    # TLS 1.3's five suites have one name in IANA and OpenSSL, and Python's ssl cannot restrict them
    return name.startswith(("TLS_AES_", "TLS_CHACHA20_"))


_KEY_EXCHANGE = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}


def openssl_cipher_name(name: str) -> str:
    """A TLS 1.2 suite's IANA name, as Kafka's ssl.cipher.suites lists them (TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    as OpenSSL names it (ECDHE-RSA-AES256-GCM-SHA384); an OpenSSL name is returned as it is."""
    match = re.fullmatch(r"TLS_([A-Z0-9_]+?)_WITH_(AES_(\d+)_(GCM|CBC|CCM)|CHACHA20_POLY1305)_?(SHA\d*)?", name)
    if not match or match.group(1) not in _KEY_EXCHANGE:
        return name
    exchange, cipher, bits, mode, mac = match.group(1), match.group(2), match.group(3), match.group(4), match.group(5)
    if cipher == "CHACHA20_POLY1305":
        return f"{_KEY_EXCHANGE[exchange]}CHACHA20-POLY1305"
    body = f"AES{bits}" if mode == "CBC" else f"AES{bits}-{mode}"
    return f"{_KEY_EXCHANGE[exchange]}{body}" + (f"-{mac}" if mac and mode != "CCM" else "")


def _load_keystore(context: ssl.SSLContext, setting: Setting, required: bool) -> None:
    if str(setting("ssl.keystore.type")).upper() != "PEM":
        raise ConfigError(f"ssl.keystore.type {setting('ssl.keystore.type')} is not supported: Odradek reads PEM "
                          "keystores (convert with `openssl pkcs12 -in keystore.p12 -nodes`)")
    location, chain, key = setting("ssl.keystore.location"), setting("ssl.keystore.certificate.chain"), \
        setting("ssl.keystore.key")
    password = setting("ssl.key.password")
    if location and (chain or key):
        raise ConfigError("ssl.keystore.location and ssl.keystore.certificate.chain/ssl.keystore.key are "
                          "alternatives: set one or the other")
    if bool(chain) != bool(key):
        raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
    if not location and not chain:
        if required:
            raise ConfigError("a TLS listener needs its key and certificate: set ssl.keystore.location (a PEM file) "
                              "or ssl.keystore.certificate.chain and ssl.keystore.key")
        return
    try:
        if location:
            context.load_cert_chain(location, password=password)
        else:
            _load_cert_chain_text(context, chain, key, password)
    except FileNotFoundError:
        raise ConfigError(f"ssl.keystore.location: no such file {location}") from None
    except ssl.SSLError as exc:
        raise ConfigError(f"the keystore cannot be loaded ({exc.reason or exc}): a PEM private key and its "
                          "certificate chain are expected, with ssl.key.password if the key is encrypted") from None


def _load_cert_chain_text(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # ssl loads a key only from a file: a private one, removed at once
    descriptor, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(f"{key.strip()}\n{chain.strip()}\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _load_truststore(context: ssl.SSLContext, setting: Setting) -> bool:
    if str(setting("ssl.truststore.type")).upper() != "PEM":
        raise ConfigError(f"ssl.truststore.type {setting('ssl.truststore.type')} is not supported: Odradek reads "
                          "PEM truststores")
    location, certificates = setting("ssl.truststore.location"), setting("ssl.truststore.certificates")
    if location and certificates:
        raise ConfigError("ssl.truststore.location and ssl.truststore.certificates are alternatives: set one")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        elif certificates:
            context.load_verify_locations(cadata=certificates)
        else:
            return False
    except FileNotFoundError:
        raise ConfigError(f"ssl.truststore.location: no such file {location}") from None
    except ssl.SSLError as exc:
        raise ConfigError(f"the truststore cannot be loaded ({exc.reason or exc}): PEM certificates are "
                          "expected") from None
    return True
