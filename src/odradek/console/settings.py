"""How the console reaches its cluster: a bootstrap server and librdkafka-named client properties, and whether
people log in (when the connection is SASL, each with their own credentials, so the cluster's ACLs apply).

From the command line (`odradek console --bootstrap-server ... --command-config FILE`) or from the node that
serves the console (its own client listener, as any client would reach it). The schema registry the Schemas
pages show is `--schema-registry URL`, or the serving node's own schema.registry.listener.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

LOGIN_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")  # what the console logs in with
CREDENTIALS = ("sasl.username", "sasl.password")
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_SCAN_BUDGET = 10_000  # records a filtered message page may read beyond the page itself
DEFAULT_SAMPLE_INTERVAL_S = 5.0


@dataclass(frozen=True)
class ConsoleSettings:
    bootstrap: str
    properties: Mapping[str, str] = field(default_factory=dict)  # TLS and SASL mechanism, never credentials
    login_mechanisms: tuple[str, ...] = ()  # empty: no login (a plaintext or TLS-only connection)
    timeout_s: float = DEFAULT_TIMEOUT_S
    scan_budget: int = DEFAULT_SCAN_BUDGET
    sample_interval_s: float = DEFAULT_SAMPLE_INTERVAL_S
    note: str = ""  # why the console cannot log in, when it cannot
    schema_registry: str = ""  # the schema registry's base URL; empty: no Schemas pages

    @property
    def login_required(self) -> bool:
        return bool(self.login_mechanisms) or bool(self.note)

    def client_properties(self, username: str | None = None, password: str | None = None,
                          mechanism: str | None = None) -> dict[str, str]:
        """The librdkafka properties of one identity: the shared ones plus that user's SASL login."""
        properties = dict(self.properties)
        if username is not None:
            properties.update({"sasl.mechanism": mechanism or self.login_mechanisms[0], "sasl.username": username,
                               "sasl.password": password or ""})
        return properties


def from_properties(bootstrap: str, properties: Mapping[str, str], **options) -> ConsoleSettings:
    """Settings for `odradek console`: a SASL security.protocol means logging in; the file's own sasl.username
    and sasl.password are not used (each person logs in as themselves); its sasl.mechanism, when given, is the
    only one offered."""
    shared = {k: v for k, v in properties.items() if k not in CREDENTIALS}
    protocol = shared.get("security.protocol", "plaintext").strip().lower()
    if not protocol.startswith("sasl"):
        return ConsoleSettings(bootstrap, shared, **options)
    named = (shared.pop("sasl.mechanism", None) or shared.pop("sasl.mechanisms", None) or "").strip().upper()
    if named and named not in LOGIN_MECHANISMS:
        return ConsoleSettings(bootstrap, shared, (), note=f"sasl.mechanism={named}: the console logs people in "
                                                          f"with {', '.join(LOGIN_MECHANISMS)}", **options)
    return ConsoleSettings(bootstrap, shared, (named,) if named else LOGIN_MECHANISMS, **options)


def node_registry_url(config) -> str:
    """The URL of a node's own schema registry (schema.registry.listener, a wildcard host as 127.0.0.1), or ""."""
    from odradek.config import parse_metrics_listener

    try:
        value = config["schema.registry.listener"]
    except KeyError:
        return ""
    if not value:
        return ""
    host, port = parse_metrics_listener(value, "schema.registry.listener", "8081")
    host = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def from_node_config(config, **options) -> ConsoleSettings:
    """Settings for the console a node serves: a client of the node's own client listener (the first
    PLAINTEXT one if there is one, else the first), with the listener's security as a client needs it, and
    the node's own schema registry when it serves one."""
    options.setdefault("schema_registry", node_registry_url(config))
    listeners = list(config.listeners)
    if not listeners:
        raise ValueError("the node has no client listener for the console to connect to")
    protocols = {listener.name: config.security_protocol_of(listener.name) for listener in listeners}
    listener = next((li for li in listeners if protocols[li.name] == "PLAINTEXT"), listeners[0])
    protocol = protocols[listener.name]
    host = listener.host if listener.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    bootstrap = f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"
    properties = {"security.protocol": protocol.lower()}
    if protocol in ("SSL", "SASL_SSL"):
        location = config.listener_setting(listener.name, "ssl.truststore.location")
        certificates = config.listener_setting(listener.name, "ssl.truststore.certificates")
        if certificates:
            properties["ssl.ca.pem"] = str(certificates)
        elif location:
            properties["ssl.ca.location"] = str(location)
    if not protocol.startswith("SASL"):
        return ConsoleSettings(bootstrap, properties, **options)
    enabled = str(config.listener_setting(listener.name, "sasl.enabled.mechanisms") or "")
    offered = {m.strip().upper() for m in enabled.split(",") if m.strip()}
    mechanisms = tuple(m for m in LOGIN_MECHANISMS if m in offered)
    if not mechanisms:
        return ConsoleSettings(bootstrap, properties, (), note=f"listener {listener.name} offers "
                               f"{', '.join(sorted(offered)) or 'no mechanism'}; the console logs people in with "
                               f"{', '.join(LOGIN_MECHANISMS)}", **options)
    return ConsoleSettings(bootstrap, properties, mechanisms, **options)
