"""An OdradekCluster's certificates, Strimzi's way: a cluster CA that signs the nodes' and the operator's
certificates, a clients CA that signs users' certificates, as Secrets made from the Secrets that exist and `now`.

Sans-I/O: `desired_secrets` takes the existing Secrets' data (base64, as the API returns it) and gives back the
Secrets to create or patch; nothing changes, byte for byte, until something must (a CA near its expiry, a node
whose DNS names changed), so a pass patches nothing and restarts nothing needlessly.

Each CA is a pair of Secrets: `<cluster>-cluster-ca` holds its key (only the operator reads it) and
`<cluster>-cluster-ca-cert` its trust bundle `ca.crt` (what clients mount to trust the listeners); likewise
`<cluster>-clients-ca` and `<cluster>-clients-ca-cert`. Keys are ECDSA P-256: every TLS client (Java, librdkafka,
Python) takes them, and they are generated in a millisecond where RSA 2048 takes tens.

A CA is renewed in two steps, so that no node ever presents a certificate another node does not trust yet:
within RENEW_BEFORE of its expiry a next CA joins the trust bundle (the nodes restart to trust it, their
certificates unchanged); TRUST_BEFORE_SIGNING later it starts signing (the nodes restart with new certificates,
each trusted by the nodes not yet restarted), and the old CA stays in the bundle until it expires.
A next CA no newer than the signing one (the signing one itself, when a merge patch kept the next CA's keys
after its promotion) and a previous CA no older are dropped, so that a pass gives the same Secrets whether or not
the stored data still holds the keys an earlier pass dropped.

A CA that has expired outright (the operator not running for the whole RENEW_BEFORE) is replaced at once, and
every certificate with it: the nodes restart with certificates of the new CA, and while they roll, old and new
nodes cannot talk. Keeping the expired CA in the bundle would not bridge that: TLS verification (OpenSSL, which
the nodes use) rejects a chain whose CA has expired, so the cluster stopped talking when its CA expired anyway.

The principals, with Odradek's DEFAULT ssl.principal.mapping.rules (the subject as Java writes it): every node
is `User:CN=<cluster>-node,O=odradek` (one principal for all, as Strimzi's brokers share one, so that
super.users does not change when nodes are added), the operator `User:CN=odradek-operator,O=odradek`, and a
user with a certificate `User:CN=<user name>`.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from odradek.operator.cluster_spec import ClusterSpec
from odradek.operator.render import (
    CLIENTS_CA_BUNDLE_KEY,
    CLUSTER_CA_BUNDLE_KEY,
    NODE_ID_LABEL,
    NODE_KEYSTORE_KEY,
    OPERATOR_COMMON_NAME,
    ORGANIZATION,
    POOL_LABEL,
    ExternalAddresses,
    Node,
    bootstrap_service_name,
    cluster_labels,
    headless_service_name,
    node_address,
    node_certs_secret_name,
    node_common_name,
)

CA_VALIDITY = datetime.timedelta(days=365)
CERTIFICATE_VALIDITY = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=30)
# Long enough for every node to have restarted trusting the next CA before it signs anything.
TRUST_BEFORE_SIGNING = datetime.timedelta(days=7)
# Clocks differ: a certificate is valid from a little before it is made.
BACKDATE = datetime.timedelta(minutes=5)

# A CA's private Secret: the key and certificate that sign, the next CA while it waits to sign, and the previous
# CA's certificate, trusted until it expires.
CA_KEY, CA_CERT = "ca.key", "ca.crt"
NEXT_CA_KEY, NEXT_CA_CERT = "next-ca.key", "next-ca.crt"
PREVIOUS_CA_CERT = "previous-ca.crt"
NODE_CERT, NODE_KEY = "node.crt", "node.key"
OPERATOR_CERT, OPERATOR_KEY = "operator.crt", "operator.key"
USER_CERT, USER_KEY = "user.crt", "user.key"

Data = Mapping[str, str]  # a Secret's data: key -> base64
_COMMON_NAME_MAX = 64  # X.509's upper bound


def cluster_ca_secret_name(cluster: str) -> str:
    return f"{cluster}-cluster-ca"


def clients_ca_secret_name(cluster: str) -> str:
    return f"{cluster}-clients-ca"


def operator_secret_name(cluster: str) -> str:
    return f"{cluster}-operator-certs"


def user_principal(user_name: str) -> str:
    """The principal of a user's certificate (issue_user_certificate), for its ACLs."""
    return f"User:CN={user_name}"


def desired_secrets(spec: ClusterSpec, cluster_nodes: list[Node], namespace: str, existing: Mapping[str, Data],
                    now: datetime.datetime, external_addresses: ExternalAddresses | None = None) -> list[dict]:
    """The cluster's Secrets: the two CAs (each its private Secret and its `-cert` one), the operator's client
    certificate, then each node's `<pod>-certs`, labelled as the node's other objects (so that it is kept while
    a leaving node is drained). `existing` maps the names of the Secrets that exist to their data;
    `cluster_nodes` is render.nodes(); a node's external addresses are among its certificate's names."""
    cluster_ca = _authority(existing.get(cluster_ca_secret_name(spec.name)), "cluster-ca", spec.name, now)
    clients_ca = _authority(existing.get(clients_ca_secret_name(spec.name)), "clients-ca", spec.name, now)
    secrets = []
    for name, authority in ((cluster_ca_secret_name(spec.name), cluster_ca),
                            (clients_ca_secret_name(spec.name), clients_ca)):
        secrets += [_secret(name, namespace, spec, authority.data),
                    _secret(f"{name}-cert", namespace, spec, {CA_CERT: authority.bundle})]
    operator_name = operator_secret_name(spec.name)
    operator = _leaf(existing.get(operator_name), OPERATOR_CERT, OPERATOR_KEY, cluster_ca,
                     _subject(OPERATOR_COMMON_NAME), (), now, server=False)
    secrets.append(_secret(operator_name, namespace, spec, operator | {CA_CERT: cluster_ca.bundle}))
    for node in cluster_nodes:
        name = node_certs_secret_name(node.name)
        names = _node_names(spec, node, namespace, external_addresses or {})
        leaf = _leaf(existing.get(name), NODE_CERT, NODE_KEY, cluster_ca, _subject(node_common_name(spec.name)),
                     names, now, server=True)
        keystore = _encode(_decode(leaf[NODE_KEY]) + _decode(leaf[NODE_CERT]))
        node_labels = {POOL_LABEL: node.pool.name, NODE_ID_LABEL: str(node.node_id)}
        secrets.append(_secret(name, namespace, spec, leaf | {
            NODE_KEYSTORE_KEY: keystore, CLUSTER_CA_BUNDLE_KEY: cluster_ca.bundle,
            CLIENTS_CA_BUNDLE_KEY: clients_ca.bundle}, node_labels))
    return secrets


def certificate_hash(secret_data: Data) -> str:
    """A digest of a node's certificates Secret: when it changes, the node restarts to take them up."""
    return hashlib.sha256("".join(f"{key}={secret_data[key]}\n" for key in sorted(secret_data)).encode()).hexdigest()


def node_certificate_hashes(secrets: list[dict], cluster_nodes: list[Node]) -> dict[str, str]:
    """Each node's certificate_hash, by pod name, from desired_secrets(): render()'s `certificate_hashes`."""
    by_name = {secret["metadata"]["name"]: secret for secret in secrets}
    return {node.name: certificate_hash(by_name[node_certs_secret_name(node.name)]["data"]) for node in cluster_nodes}


def issue_user_certificate(clients_ca_secret_data: Data, user_name: str, now: datetime.datetime,
                           existing: Data | None = None) -> dict[str, str]:
    """A TLS OdradekUser's Secret data (base64): user.crt, user.key and ca.crt (the clients CA's certificate,
    as Strimzi gives it), signed by the clients CA (its private Secret's data); the principal is
    `User:CN=<user name>`. `existing` (the user's Secret's data) is returned as it is while still good: signed by
    the CA that signs now, for this user, and not within RENEW_BEFORE of its expiry."""
    if not 1 <= len(user_name) <= _COMMON_NAME_MAX:
        raise ValueError(f"user {user_name}: a TLS user's name is its certificate's CN, at most "
                         f"{_COMMON_NAME_MAX} characters")
    authority = _authority(clients_ca_secret_data, "clients-ca", None, now)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_name)])  # Strimzi's: the CN alone
    leaf = _leaf(existing, USER_CERT, USER_KEY, authority, subject, (), now, server=False)
    return leaf | {CA_CERT: authority.data[CA_CERT]}


@dataclass(frozen=True)
class _Authority:
    data: dict[str, str]  # its private Secret's data
    key: ec.EllipticCurvePrivateKey  # the key that signs
    certificate: x509.Certificate
    bundle: str  # base64 of every certificate to trust: the signing one, the next, the previous


def _authority(data: Data | None, role: str, cluster: str | None, now: datetime.datetime) -> _Authority:
    """The CA of `data`, stepped on: created when there is none (or it expired), a next CA made near its expiry,
    the next one signing once trusted long enough, the previous one dropped once expired. Without `cluster` (a
    user's certificate) it is only read: only the cluster's reconciliation changes a CA."""
    data = dict(data or {})
    current = _certificate(data.get(CA_CERT))
    upcoming = _certificate(data.get(NEXT_CA_CERT)) if _decode_key(data.get(NEXT_CA_KEY)) else None
    if upcoming is not None and current is not None and not _newer(upcoming, current):
        upcoming = None  # the signing CA itself, promoted already: promoting it again would drop the previous one
    if upcoming is None:  # an unreadable or stale next CA: one is made again when due
        data.pop(NEXT_CA_KEY, None)
        data.pop(NEXT_CA_CERT, None)
    if cluster is not None:
        current_good = current is not None and _decode_key(data.get(CA_KEY)) is not None and \
            now < current.not_valid_after_utc
        if upcoming is not None and (not current_good or now >= upcoming.not_valid_before_utc + BACKDATE
                                     + TRUST_BEFORE_SIGNING):
            data = {CA_KEY: data[NEXT_CA_KEY], CA_CERT: data[NEXT_CA_CERT]} | (
                {PREVIOUS_CA_CERT: data[CA_CERT]} if current_good else {})
            current, upcoming = upcoming, None
        elif not current_good:
            data = _new_ca(CA_KEY, CA_CERT, role, cluster, 0, now)
            current, upcoming = _certificate(data[CA_CERT]), None
        elif upcoming is None and now >= current.not_valid_after_utc - RENEW_BEFORE:
            data |= _new_ca(NEXT_CA_KEY, NEXT_CA_CERT, role, cluster, _generation(current) + 1, now)
        previous = _certificate(data.get(PREVIOUS_CA_CERT))
        if PREVIOUS_CA_CERT in data and (previous is None or now >= previous.not_valid_after_utc
                                         or not _newer(current, previous)):
            del data[PREVIOUS_CA_CERT]
    key = _decode_key(data.get(CA_KEY))
    if current is None or key is None:
        raise ValueError(f"no {role} key and certificate in its Secret")
    bundle = "".join(_decode(data[name]) for name in (CA_CERT, NEXT_CA_CERT, PREVIOUS_CA_CERT) if name in data)
    return _Authority(data, key, current, _encode(bundle))


def _new_ca(key_name: str, cert_name: str, role: str, cluster: str, generation: int,
            now: datetime.datetime) -> dict[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    # the generation keeps subjects apart, so that a bundle never holds two CAs of one name
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, cluster),
                         x509.NameAttribute(NameOID.COMMON_NAME, f"{role} v{generation}")])
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE).not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256()))
    return {key_name: _encode(_key_pem(key)), cert_name: _encode(_cert_pem(certificate))}


def _newer(certificate: x509.Certificate, than: x509.Certificate) -> bool:
    # a next CA is made near its predecessor's expiry, so it is valid from later
    return certificate.not_valid_before_utc > than.not_valid_before_utc


def _generation(certificate: x509.Certificate) -> int:
    (name,) = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    match = re.search(r" v(\d+)$", str(name.value))
    return int(match.group(1)) if match else 0


def _leaf(existing: Data | None, cert_name: str, key_name: str, authority: _Authority, subject: x509.Name,
          names: tuple[str, ...], now: datetime.datetime, server: bool) -> dict[str, str]:
    """The certificate (with the CA's after it: the chain) and key of `existing` while they are still good, else
    a new pair: the certificate signed by the CA that signs now, for `subject` and the DNS names or addresses
    `names`, good as a client certificate (and as a server's when `server`)."""
    existing = existing or {}
    certificate = _certificate(existing.get(cert_name))
    if certificate is not None and key_name in existing and certificate.subject == subject \
            and _names(certificate) == names and _issued_by(certificate, authority.certificate) \
            and now < certificate.not_valid_after_utc - RENEW_BEFORE:
        return {cert_name: existing[cert_name], key_name: existing[key_name]}
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server else \
        [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(authority.certificate.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE).not_valid_after(now + CERTIFICATE_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
                       critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(name) for name in names]),
                                        critical=False)
    issued = builder.sign(authority.key, hashes.SHA256())
    return {cert_name: _encode(_cert_pem(issued) + _cert_pem(authority.certificate)),
            key_name: _encode(_key_pem(key))}


def _node_names(spec: ClusterSpec, node: Node, namespace: str, external_addresses: ExternalAddresses) -> tuple[str, ...]:
    """The names a node is reached by: its own DNS name, the cluster's Services' (short and qualified), and the
    hosts of its external listeners once known; sorted, so that equal names compare equal."""
    address = node_address(spec.name, namespace, node.name)
    names = {address, f"{address}.cluster.local"}
    services = [headless_service_name(spec.name), bootstrap_service_name(spec.name)]
    services += [bootstrap_service_name(spec.name, listener.name) for listener in spec.listeners
                 if listener.is_external]
    for service in services:
        names |= {service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
                  f"{service}.{namespace}.svc.cluster.local"}
    names |= {host for (node_id, _), (host, _) in external_addresses.items() if node_id == node.node_id}
    return tuple(sorted(names))


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _names(certificate: x509.Certificate) -> tuple[str, ...]:
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(sorted([str(name) for name in extension.get_values_for_type(x509.IPAddress)]
                        + extension.get_values_for_type(x509.DNSName)))


def _issued_by(certificate: x509.Certificate, authority: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(authority)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _subject(common_name: str) -> x509.Name:
    # Java writes a subject from its last attribute: this one reads CN=<name>,O=odradek
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_usage(ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                         encipher_only=False, decipher_only=False)


def _secret(name: str, namespace: str, spec: ClusterSpec, data: Mapping[str, str],
            labels: Mapping[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": cluster_labels(spec) | dict(labels or {})},
            "data": dict(sorted(data.items()))}


def _certificate(encoded: str | None) -> x509.Certificate | None:
    """The first certificate of a PEM text in base64; None when absent or unreadable (then it is made anew)."""
    if not encoded:
        return None
    try:
        return x509.load_pem_x509_certificate(base64.b64decode(encoded))
    except ValueError:
        return None


def _decode_key(encoded: str | None) -> ec.EllipticCurvePrivateKey | None:
    if not encoded:
        return None
    try:
        key = serialization.load_pem_private_key(base64.b64decode(encoded), password=None)
    except ValueError:
        return None
    return key if isinstance(key, ec.EllipticCurvePrivateKey) else None


def _cert_pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _decode(encoded: str) -> str:
    return base64.b64decode(encoded).decode()
