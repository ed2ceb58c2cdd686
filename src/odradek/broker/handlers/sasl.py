"""SaslHandshake and SaslAuthenticate on a listener without SASL: Kafka answers both with ILLEGAL_SASL_STATE
once a connection is past authentication, which on a PLAINTEXT listener it always is."""

from odradek.protocol.errors import ErrorCode


def handle_sasl_handshake(broker, ctx, request: dict) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


def handle_sasl_authenticate(broker, ctx, request: dict) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
