"""Throwaway certificate authorities for TLS tests: a CA, node certificates for 127.0.0.1/localhost and client
certificates with chosen subjects, written as the PEM files Kafka's ssl.keystore/truststore settings take."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    certificate: Path  # the certificate alone (PEM)
    key: Path  # its private key alone (PKCS#8 PEM, encrypted with the password given, if any)
    keystore: Path  # key and certificate chain in one file: ssl.keystore.location with ssl.keystore.type=PEM


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "Odradek Test CA"):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256()))
        self.path = directory / f"{name.replace(' ', '-').lower()}.pem"  # ssl.truststore.location
        self.path.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, subject: list[tuple] | None = None, key_password: str | None = None,
              valid_days: float = 30) -> Issued:
        """A certificate for `name` (its CN unless `subject` lists (oid, value) pairs), good for 127.0.0.1 and
        localhost as a server and as a client."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = subject or [(NameOID.COMMON_NAME, name)]
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes]))
            .issuer_name(self.certificate.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=valid_days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(self.key, hashes.SHA256()))
        encryption = (serialization.BestAvailableEncryption(key_password.encode()) if key_password
                      else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        certificate_pem = certificate.public_bytes(serialization.Encoding.PEM)
        chain_pem = certificate_pem + self.certificate.public_bytes(serialization.Encoding.PEM)
        stem = self.directory / name.replace(" ", "-").lower()
        issued = Issued(Path(f"{stem}.crt.pem"), Path(f"{stem}.key.pem"), Path(f"{stem}.keystore.pem"))
        issued.certificate.write_bytes(certificate_pem)
        issued.key.write_bytes(key_pem)
        issued.keystore.write_bytes(key_pem + chain_pem)
        return issued
