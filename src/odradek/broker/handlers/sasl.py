"""SaslHandshake and SaslAuthenticate: the request-framed SASL exchange of a connection's SaslAuthenticator.

On a listener without SASL Kafka answers both with ILLEGAL_SASL_STATE: such a connection is past
authentication from the start. A failed authentication is answered at once and the connection closed
connection.failed.authentication.delay.ms later.
"""

import time

from odradek.network.server import CloseConnection
from odradek.protocol.errors import ErrorCode


def handle_sasl_handshake(broker, ctx, request: dict) -> dict:
    authenticator = ctx.connection.authenticator
    if authenticator is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    if ctx.api_version == 0:
        raise CloseConnection("SaslHandshake v0 (SASL tokens outside Kafka requests) is not supported: the client "
                              "must use SaslHandshake v1 and SaslAuthenticate")
    error, mechanisms, close = authenticator.handshake(request["mechanism"])
    ctx.connection.close_after_response = close
    return {"error_code": error, "mechanisms": mechanisms}


def handle_sasl_authenticate(broker, ctx, request: dict):
    authenticator = ctx.connection.authenticator
    if authenticator is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                "error_message": "SaslAuthenticate request received after successful authentication",
                "auth_bytes": b"", "session_lifetime_ms": 0}
    result = authenticator.authenticate(request["auth_bytes"], int(time.monotonic() * 1000), ctx.api_version)
    response = {"error_code": result.error_code, "error_message": result.error_message,
                "auth_bytes": result.token, "session_lifetime_ms": result.session_lifetime_ms}
    if result.close:
        ctx.connection.close_after_response = True
    if result.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        # Kafka answers at once and closes after a delay, so guessing passwords stays slow
        ctx.connection.close_delay_s = broker.config["connection.failed.authentication.delay.ms"] / 1000
    if authenticator.state == authenticator.AUTHENTICATED:
        ctx.connection.principal = authenticator.principal
    return response
