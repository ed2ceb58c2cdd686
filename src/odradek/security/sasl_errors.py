"""The error a SASL mechanism raises when a client fails to authenticate; its message is what the client is told."""


class SaslAuthenticationError(Exception):
    """Sent to the client as SASL_AUTHENTICATION_FAILED with this message, so it must not leak secrets."""
