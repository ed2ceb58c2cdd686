"""Kafka's text form of a UUID (topic ids, cluster ids): URL-safe base64 of the 16 bytes, without padding."""

import base64


def uuid_to_text(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode()


def uuid_from_text(text: str) -> bytes:
    value = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(value) != 16:
        raise ValueError(f"{text!r} is not a 16-byte UUID")
    return value
