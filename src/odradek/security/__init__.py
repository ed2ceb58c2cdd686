"""Security: TLS transport settings, principals, SASL mechanisms, the ACL authorizer."""
