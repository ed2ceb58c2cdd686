"""The TLS context and SASL login that librdkafka-named client properties ask for, for the connections Odradek
opens itself with `NodeConnection`/`NodeClients` (the CLI's raw requests, a cluster link's fetches):

    security.protocol                   plaintext (default), ssl, sasl_plaintext, sasl_ssl
    ssl.ca.location                     CA file or directory (default: the system's authorities)
    ssl.ca.pem                          CA certificates inline
    ssl.certificate.location, ssl.key.location, ssl.key.password    a client certificate (mutual TLS)
    ssl.endpoint.identification.algorithm   https (default: the name must match) or none
    enable.ssl.certificate.verification     true (default) or false
    sasl.mechanism (or sasl.mechanisms) PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with sasl.username, sasl.password

Other properties are librdkafka's business and ignored here. A setting that cannot be honoured is a
ValueError of one line, never ignored.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

from odradek.network.client import ClientSecurity

PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_SETTINGS = frozenset({
    "security.protocol", "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.key.location",
    "ssl.key.password", "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
    "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password"})


def speaks(properties: Mapping[str, str], settings: frozenset[str]) -> bool:
    """Whether a client of Odradek's own that knows `settings` (besides SECURITY_SETTINGS) can take these
    librdkafka-named properties: it knows every one, and the security they ask for is one it has (a Spark
    task takes librdkafka otherwise)."""
    if any(name not in settings and name not in SECURITY_SETTINGS for name in properties):
        return False
    try:
        client_security(properties)
    except ValueError:  # a mechanism or setting only librdkafka has
        return False
    return True


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """The TLS context and SASL login that librdkafka-named client properties ask for; None for plaintext.
    A setting this cannot honour is a ValueError, never ignored."""
    protocol = properties.get("security.protocol", "plaintext").strip().lower()
    if protocol not in PROTOCOLS:
        raise _invalid(f"security.protocol={protocol} (expected {', '.join(PROTOCOLS)})")
    if protocol == "plaintext":
        return None
    context = _ssl_context(properties) if protocol.endswith("ssl") else None
    if not protocol.startswith("sasl"):
        return ClientSecurity(ssl_context=context)
    mechanism = (properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "").strip().upper()
    if mechanism not in MECHANISMS:
        raise _invalid(f"sasl.mechanism={mechanism or 'GSSAPI (librdkafka default)'}: connections log in "
                       f"with {', '.join(MECHANISMS)}")
    username, password = properties.get("sasl.username"), properties.get("sasl.password")
    if not username or password is None:
        raise _invalid(f"sasl.mechanism={mechanism} needs sasl.username and sasl.password")
    from odradek.security.client_login import PlainLogin, ScramLogin
    from odradek.security.scram import ScramClient, ScramMechanism, random_nonce

    if mechanism == "PLAIN":
        return ClientSecurity(context, mechanism, lambda: PlainLogin(username, password))
    scram = ScramMechanism.by_name(mechanism)
    return ClientSecurity(context, mechanism,
                          lambda: ScramLogin(ScramClient(scram, username, password, random_nonce)))


def _ssl_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = properties.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "none"):
        raise _invalid(f"ssl.endpoint.identification.algorithm={algorithm} (expected https or none)")
    verify = properties.get("enable.ssl.certificate.verification", "true").strip().lower()
    if verify not in ("true", "false"):
        raise _invalid(f"enable.ssl.certificate.verification={verify} (expected true or false)")
    context.check_hostname = algorithm == "https" and verify == "true"
    if verify == "false":
        context.verify_mode = ssl.CERT_NONE
    location, pem = properties.get("ssl.ca.location"), properties.get("ssl.ca.pem")
    try:
        if pem:
            context.load_verify_locations(cadata=pem)
        elif location and location != "probe":
            if os.path.isdir(location):
                context.load_verify_locations(capath=location)
            else:
                context.load_verify_locations(cafile=location)
        else:
            context.load_default_certs()
    except (OSError, ssl.SSLError) as exc:
        raise _invalid(f"cannot load the CA certificates of ssl.ca.{'pem' if pem else 'location'}: "
                       f"{_reason(exc)}") from None
    certificate, key = properties.get("ssl.certificate.location"), properties.get("ssl.key.location")
    if certificate or key:
        try:
            context.load_cert_chain(certificate or key, key, properties.get("ssl.key.password") or None)
        except (OSError, ssl.SSLError) as exc:
            raise _invalid(f"cannot load ssl.certificate.location / ssl.key.location: {_reason(exc)}") from None
    return context


def _invalid(text: str) -> ValueError:
    return ValueError(f"invalid client configuration: {text}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)
