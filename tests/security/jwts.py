"""Throwaway signing keys for OAUTHBEARER tests: JWTs signed as an identity provider signs them, and the JWKS
(JSON Web Key Set) a broker checks them against, made with Python's `cryptography`."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES = {"ES256": (ec.SECP256R1, "P-256", 32), "ES384": (ec.SECP384R1, "P-384", 48),
           "ES512": (ec.SECP521R1, "P-521", 66)}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64_json(value: object) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def _b64_int(number: int, size: int | None = None) -> str:
    return b64(number.to_bytes(size or (number.bit_length() + 7) // 8, "big"))


@dataclass
class SigningKey:
    """A private key of one JWS algorithm, with the key id its JWK carries."""

    alg: str
    kid: str | None
    private: object

    @classmethod
    def generate(cls, alg: str = "RS256", kid: str | None = "key-1", rsa_bits: int = 2048) -> SigningKey:
        if alg.startswith(("RS", "PS")):
            private = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
        elif alg in _CURVES:
            private = ec.generate_private_key(_CURVES[alg][0]())
        elif alg == "EdDSA":
            private = ed25519.Ed25519PrivateKey.generate()
        else:
            raise ValueError(alg)
        return cls(alg, kid, private)

    def jwk(self, **extra) -> dict:
        """The public key as a JWK."""
        public = self.private.public_key()
        if self.alg.startswith(("RS", "PS")):
            numbers = public.public_numbers()
            entry = {"kty": "RSA", "n": _b64_int(numbers.n), "e": _b64_int(numbers.e)}
        elif self.alg in _CURVES:
            numbers, (_, crv, size) = public.public_numbers(), _CURVES[self.alg]
            entry = {"kty": "EC", "crv": crv, "x": _b64_int(numbers.x, size), "y": _b64_int(numbers.y, size)}
        else:
            from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
            entry = {"kty": "OKP", "crv": "Ed25519", "x": b64(public.public_bytes(Encoding.Raw, PublicFormat.Raw))}
        if self.kid is not None:
            entry["kid"] = self.kid
        return {**entry, "use": "sig", **extra}

    def sign(self, data: bytes) -> bytes:
        if self.alg == "EdDSA":
            return self.private.sign(data)
        digest = _HASHES[self.alg[2:]]()
        if self.alg.startswith("RS"):
            return self.private.sign(data, padding.PKCS1v15(), digest)
        if self.alg.startswith("PS"):
            return self.private.sign(data, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest)
        r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(digest)))
        size = _CURVES[self.alg][2]
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")

    def token(self, claims: dict, **header) -> str:
        """A compact JWS of these claims, signed with this key."""
        header = {"alg": self.alg, "typ": "JWT", **({"kid": self.kid} if self.kid else {}), **header}
        signing_input = f"{b64_json(header)}.{b64_json(claims)}"
        return f"{signing_input}.{b64(self.sign(signing_input.encode()))}"


def jwks(*keys: SigningKey) -> str:
    return json.dumps({"keys": [key.jwk() for key in keys]})


def claims(subject: str = "alice", lifetime_s: float = 3600, now: float | None = None, **more) -> dict:
    """A token's claims: its subject, issued now, expiring after `lifetime_s`."""
    now = time.time() if now is None else now
    return {"sub": subject, "iat": int(now), "exp": int(now + lifetime_s), **more}
