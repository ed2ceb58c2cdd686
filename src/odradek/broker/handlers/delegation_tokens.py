"""The delegation token APIs, answered as Kafka answers them on a PLAINTEXT listener: tokens may only be
created, renewed, expired or described over an authenticated (SASL, or SSL with a client certificate)
connection, and Odradek has none yet."""

from odradek.protocol.errors import ErrorCode


def handle_create_delegation_token(broker, ctx, request: dict) -> dict:
    return {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "principal_type": "User",
            "principal_name": "ANONYMOUS", "token_requester_principal_type": "User",
            "token_requester_principal_name": "ANONYMOUS", "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1,
            "max_timestamp_ms": -1, "token_id": "", "hmac": b"", "throttle_time_ms": 0}


def handle_renew_delegation_token(broker, ctx, request: dict) -> dict:
    return {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "expiry_timestamp_ms": -1,
            "throttle_time_ms": 0}


handle_expire_delegation_token = handle_renew_delegation_token


def handle_describe_delegation_token(broker, ctx, request: dict) -> dict:
    return {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "tokens": [], "throttle_time_ms": 0}
