"""Reconciling an OdradekUser: its credentials, ACLs and client quotas made to match its spec, as Strimzi's user
operator does for a KafkaUser.

Each user has a Secret named after it, whose data each pass makes exactly what its authentication needs:

- scram-sha-512: a password generated once (Strimzi's keys: `password` and `sasl.jaas.config`); every pass reads
  it back and upserts the broker's credential from it, so the Secret and the cluster agree even after either was
  changed by hand. Its name in Kafka is the resource's name.
- tls: `user.crt` (the certificate, then the clients CA's), `user.key` and `ca.crt`, as Strimzi's, signed by the
  cluster's clients CA (the Secret certificates.clients_ca_secret_name names; NotReady until the cluster's
  reconciliation has made it) and kept until certificates.issue_user_certificate reissues it (a new signing CA,
  near its expiry). Strimzi's user.p12 and user.password (a PKCS #12 keystore for Java clients) are not written:
  every client Odradek tests with takes PEM files. Its name in Kafka is the certificate's principal name,
  `CN=<name>` (status.username, as Strimzi writes it), and a tls user has no SCRAM credential.

The principal User:<name in Kafka> ends each pass with exactly the ACLs the spec lists (none without
spec.authorization), and the quota entity user=<name in Kafka> (the principal's name, as Kafka's and Odradek's
quota entities are) exactly the quotas spec.quotas sets; the user's name under its other authentication ends with
none, so that a user switched from one to the other leaves nothing behind (its SCRAM credential deleted too). A
spec the CRD schema let through but Kafka cannot take changes nothing and is NotReady.

The decisions are pure functions (parse_user, kafka_username, wanted_by_username, plan_acls, plan_quotas,
user_secret, tls_user_secret, secret_data_patch); the shell around them talks to the cluster with
confluent-kafka's AdminClient (in a thread) and, for client quotas, which that client has no API for, sends
DescribeClientQuotas and AlterClientQuotas itself, as `odradek quotas` does.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import secrets
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.network.client import NodeConnection
from odradek.operator.certificates import clients_ca_secret_name, issue_user_certificate
from odradek.operator.crds import CLUSTER_LABEL
from odradek.operator.kube import SECRETS, Kube, KubeError
from odradek.operator.status import status_conditions
from odradek.protocol.errors import ErrorCode
from odradek.security.client_properties import client_security

AUTHENTICATIONS = ("scram-sha-512", "tls")
SCRAM_ITERATIONS = 4096
PASSWORD_LENGTH = 32
# Letters and digits only: the password goes between the JAAS line's double quotes unescaped.
PASSWORD_ALPHABET = string.ascii_letters + string.digits
COMMON_NAME_MAX = 64  # X.509's upper bound on a CN, which a tls user's name is
CLUSTER_RESOURCE_NAME = "kafka-cluster"  # the one name of the cluster resource in Kafka's ACLs
REQUEST_TIMEOUT_S = 30.0
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
MATCH_EXACT = 0
QUOTA_KEYS = {"producerByteRate": "producer_byte_rate", "consumerByteRate": "consumer_byte_rate",
              "requestPercentage": "request_percentage", "controllerMutationRate": "controller_mutation_rate"}
RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP, "cluster": ResourceType.BROKER,
                  "transactionalId": ResourceType.TRANSACTIONAL_ID}
PATTERN_TYPES = {"literal": ResourcePatternType.LITERAL, "prefix": ResourcePatternType.PREFIXED}
OPERATIONS = {name: AclOperation[_snake] for name, _snake in (
    ("Read", "READ"), ("Write", "WRITE"), ("Create", "CREATE"), ("Delete", "DELETE"), ("Alter", "ALTER"),
    ("Describe", "DESCRIBE"), ("ClusterAction", "CLUSTER_ACTION"), ("DescribeConfigs", "DESCRIBE_CONFIGS"),
    ("AlterConfigs", "ALTER_CONFIGS"), ("IdempotentWrite", "IDEMPOTENT_WRITE"), ("All", "ALL"))}


class UserSpecError(ValueError):
    """The spec asks for what Kafka cannot take (the CRD schema would normally have refused it)."""


class UserRequestError(Exception):
    """The cluster refused a request for a reason retrying will not change: reported as NotReady."""


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW rule of the user's principal, in the spec's words."""

    resource_type: str  # topic, group, cluster or transactionalId
    name: str
    pattern_type: str  # literal or prefix
    host: str
    operation: str  # one of ACL_OPERATIONS


@dataclass(frozen=True)
class UserSpec:
    name: str
    authentication: str  # scram-sha-512 or tls
    acls: frozenset[Acl]
    quotas: dict[str, float]  # Kafka's quota keys


@dataclass(frozen=True)
class AclPlan:
    create: tuple[Acl, ...]
    delete: tuple[Acl, ...]


def principal(username: str) -> str:
    """The principal of a name in Kafka (kafka_username)."""
    return f"User:{username}"


def kafka_username(name: str, authentication: str) -> str:
    """The name in Kafka of the user `name` authenticated so: its SCRAM user name, or its certificate's principal
    name under Odradek's default ssl.principal.mapping.rules (certificates.user_principal), CN=<name>."""
    return f"CN={name}" if authentication == "tls" else name


def wanted_by_username(spec: UserSpec) -> dict[str, tuple[frozenset[Acl], dict[str, float]]]:
    """The ACLs and quotas each of the user's two possible names in Kafka ends a pass with: the spec's for the name
    of its authentication, none for the other's (what a switch of authentication leaves behind)."""
    return {kafka_username(spec.name, authentication):
            (spec.acls, spec.quotas) if authentication == spec.authentication else (frozenset(), {})
            for authentication in AUTHENTICATIONS}


def parse_user(resource: Mapping) -> UserSpec:
    name = resource.get("metadata", {}).get("name") or ""
    if not name:
        raise UserSpecError("the resource has no metadata.name")
    spec = resource.get("spec") or {}
    authentication = (spec.get("authentication") or {}).get("type")
    if authentication not in ("scram-sha-512", "tls"):
        raise UserSpecError(f"spec.authentication.type must be scram-sha-512 or tls, got {authentication!r}")
    if authentication == "tls" and len(name) > COMMON_NAME_MAX:
        raise UserSpecError(f"a tls user's name is its certificate's common name, at most {COMMON_NAME_MAX} "
                            f"characters: {name} has {len(name)}")
    authorization = spec.get("authorization")
    acls: set[Acl] = set()
    if authorization is not None:
        if authorization.get("type") != "simple":
            raise UserSpecError(f"spec.authorization.type must be simple, got {authorization.get('type')!r}")
        for i, rule in enumerate(authorization.get("acls") or []):
            acls |= _acls_of(rule, f"spec.authorization.acls[{i}]")
    quotas = {}
    for key, value in (spec.get("quotas") or {}).items():
        if key not in QUOTA_KEYS:
            raise UserSpecError(f"spec.quotas.{key} is not a quota (expected one of {', '.join(QUOTA_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise UserSpecError(f"spec.quotas.{key} must be a number of at least 0, got {value!r}")
        quotas[QUOTA_KEYS[key]] = float(value)
    return UserSpec(name, authentication, frozenset(acls), quotas)


def _acls_of(rule: Mapping, where: str) -> set[Acl]:
    resource = rule.get("resource") or {}
    resource_type = resource.get("type")
    if resource_type not in RESOURCE_TYPES:
        raise UserSpecError(f"{where}.resource.type must be one of {', '.join(RESOURCE_TYPES)}, "
                            f"got {resource_type!r}")
    pattern_type = resource.get("patternType") or "literal"
    if pattern_type not in PATTERN_TYPES:
        raise UserSpecError(f"{where}.resource.patternType must be literal or prefix, got {pattern_type!r}")
    if resource_type == "cluster":
        name, pattern_type = CLUSTER_RESOURCE_NAME, "literal"
    else:
        name = resource.get("name")
        if not isinstance(name, str) or not name:
            raise UserSpecError(f"{where}.resource.name is needed for a {resource_type}")
    host = rule.get("host") or "*"
    operations = rule.get("operations") or []
    if not operations:
        raise UserSpecError(f"{where}.operations must name at least one operation")
    for operation in operations:
        if operation not in OPERATIONS:
            raise UserSpecError(f"{where}.operations: unknown operation {operation!r} "
                                f"(expected one of {', '.join(OPERATIONS)})")
    return {Acl(resource_type, name, pattern_type, host, operation) for operation in operations}


def plan_acls(wanted: Iterable[Acl], current: Iterable[Acl]) -> AclPlan:
    """The ACLs to create and delete for the principal to end with exactly `wanted`."""
    wanted, current = set(wanted), set(current)
    return AclPlan(create=tuple(sorted(wanted - current)), delete=tuple(sorted(current - wanted)))


def plan_quotas(wanted: Mapping[str, float], current: Mapping[str, float]) -> dict[str, float | None]:
    """AlterClientQuotas' ops for the entity to end with exactly `wanted`: key -> value to set, or None to remove."""
    ops: dict[str, float | None] = {key: value for key, value in wanted.items() if current.get(key) != value}
    ops |= {key: None for key in current if key not in wanted}
    return ops


def new_password() -> str:
    return "".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(PASSWORD_LENGTH))


def jaas_config(username: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{username}" '
            f'password="{password}";')


def user_secret(resource: Mapping, namespace: str, password: str) -> dict:
    """A SCRAM user's Secret as Strimzi shapes it: base64 `password` and `sasl.jaas.config`, labelled for the
    cluster and owned by the OdradekUser (so a real cluster's garbage collector removes it with the user)."""
    name = resource["metadata"]["name"]
    return _secret(resource, namespace, {"password": _b64(password),
                                         "sasl.jaas.config": _b64(jaas_config(name, password))})


def tls_user_secret(resource: Mapping, namespace: str, certificate: Mapping[str, str]) -> dict:
    """A tls user's Secret, labelled and owned as user_secret's: `certificate` is issue_user_certificate's data."""
    return _secret(resource, namespace, certificate)


def secret_data_patch(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict | None:
    """The merge patch making a Secret's data exactly `wanted`, removing the keys it no longer needs (a user that
    switched authentication); None when it already is."""
    if dict(current) == dict(wanted):
        return None
    return {"data": dict(wanted) | {key: None for key in current if key not in wanted}}


def _secret(resource: Mapping, namespace: str, data: Mapping[str, str]) -> dict:
    meta = resource["metadata"]
    name = meta["name"]
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": name, "namespace": namespace,
                           "labels": {CLUSTER_LABEL: (meta.get("labels") or {}).get(CLUSTER_LABEL, "")}},
              "data": dict(data)}
    if meta.get("uid"):
        secret["metadata"]["ownerReferences"] = [{
            "apiVersion": resource["apiVersion"], "kind": resource["kind"], "name": name, "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}]
    return secret


def secret_password(secret: Mapping) -> str | None:
    """The password a user's Secret holds; None when it holds none (or one that is not base64 UTF-8)."""
    encoded = (secret.get("data") or {}).get("password")
    try:
        return base64.b64decode(encoded, validate=True).decode() if encoded else None
    except ValueError:
        return None


async def reconcile_user(kube: Kube, namespace: str, resource: Mapping, client_config: dict) -> dict:
    """Make the user's Secret, credential, ACLs and quotas match its spec; the status to write (the whole status,
    not a patch). `client_config` reaches the cluster as an admin (librdkafka settings with bootstrap.servers)."""
    old_status = resource.get("status") or {}
    generation = resource.get("metadata", {}).get("generation")
    status: dict = {}
    if generation is not None:
        status["observedGeneration"] = generation
    try:
        spec = parse_user(resource)
    except UserSpecError as e:
        status["conditions"] = status_conditions(old_status, [("NotReady", "InvalidSpec", str(e))])
        return status
    status["username"] = kafka_username(spec.name, spec.authentication)
    existing = await _existing_secret(kube, namespace, spec.name)
    password = None
    if spec.authentication == "tls":
        cluster = (resource["metadata"].get("labels") or {}).get(CLUSTER_LABEL, "")
        clients_ca = await _existing_secret(kube, namespace, clients_ca_secret_name(cluster))
        if clients_ca is None:
            status["conditions"] = status_conditions(old_status, [(
                "NotReady", "ClientsCaMissing", f"the clients CA of cluster {cluster} does not exist yet")])
            return status
        try:
            certificate = issue_user_certificate(clients_ca.get("data") or {}, spec.name,
                                                 datetime.datetime.now(datetime.UTC),
                                                 existing=(existing or {}).get("data"))
        except ValueError as e:  # the CA's Secret edited by hand: the cluster's next pass makes it anew
            status["conditions"] = status_conditions(old_status, [("NotReady", "ClientsCaInvalid", str(e))])
            return status
        wanted = tls_user_secret(resource, namespace, certificate)
    else:
        password = secret_password(existing or {}) or new_password()
        wanted = user_secret(resource, namespace, password)
    if existing is None:
        await kube.create(wanted)
    elif (patch := secret_data_patch(existing.get("data") or {}, wanted["data"])) is not None:
        await kube.merge_patch(SECRETS, namespace, spec.name, patch)
    status["secret"] = spec.name
    try:
        await asyncio.to_thread(_apply_credential_and_acls, client_config, spec, password)
        await _apply_quotas(client_config, {username: quotas
                                            for username, (_, quotas) in wanted_by_username(spec).items()})
    except UserRequestError as e:
        status["conditions"] = status_conditions(old_status, [("NotReady", "KafkaError", str(e))])
        return status
    status["conditions"] = status_conditions(old_status, [("Ready", "UserReady", "the user matches the spec")])
    return status


async def delete_user(kube: Kube, namespace: str, resource: Mapping, client_config: dict) -> None:
    """Remove the user's SCRAM credential, the ACLs and quotas of both its possible names in Kafka (whatever its
    spec says, which may be unreadable or have switched) and its Secret."""
    name = resource["metadata"]["name"]
    usernames = [kafka_username(name, authentication) for authentication in AUTHENTICATIONS]
    await asyncio.to_thread(_delete_credential_and_acls, client_config, name, usernames)
    await _apply_quotas(client_config, {username: {} for username in usernames})
    await kube.delete(SECRETS, namespace, name)


async def _existing_secret(kube: Kube, namespace: str, name: str) -> dict | None:
    try:
        return await kube.get(SECRETS, namespace, name)
    except KubeError as e:
        if e.status != 404:
            raise
        return None


# ---------------------------------------------------------------------------------------------------
# Cluster I/O: confluent-kafka's AdminClient (blocking: run in a thread), and client quotas' raw requests


def _apply_credential_and_acls(client_config: dict, spec: UserSpec, password: str | None) -> None:
    """Upsert the SCRAM credential from `password`, or delete it (a tls user, which may have been a SCRAM one);
    then each name in Kafka's ACLs as wanted_by_username says."""
    admin = AdminClient(client_config)
    mechanism = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    if password is not None:
        _result(admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(spec.name, mechanism, password.encode())],
            request_timeout=REQUEST_TIMEOUT_S)[spec.name], f"set the SCRAM-SHA-512 credential of {spec.name}")
    else:
        _result(admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(spec.name, ScramMechanism.SCRAM_SHA_512)],
            request_timeout=REQUEST_TIMEOUT_S)[spec.name], f"delete the SCRAM-SHA-512 credential of {spec.name}",
            ignore=KafkaError.RESOURCE_NOT_FOUND)
    for username, (acls, _) in wanted_by_username(spec).items():
        plan = plan_acls(acls, _current_acls(admin, username))
        if plan.create:
            for future in admin.create_acls([_binding(username, acl) for acl in plan.create],
                                            request_timeout=REQUEST_TIMEOUT_S).values():
                _result(future, f"create the ACLs of {username}")
        if plan.delete:
            for future in admin.delete_acls([_binding_filter(username, acl) for acl in plan.delete],
                                            request_timeout=REQUEST_TIMEOUT_S).values():
                _result(future, f"delete ACLs of {username}")


def _delete_credential_and_acls(client_config: dict, name: str, usernames: Iterable[str]) -> None:
    admin = AdminClient(client_config)
    deletion = UserScramCredentialDeletion(name, ScramMechanism.SCRAM_SHA_512)
    _result(admin.alter_user_scram_credentials([deletion], request_timeout=REQUEST_TIMEOUT_S)[name],
            f"delete the SCRAM-SHA-512 credential of {name}", ignore=KafkaError.RESOURCE_NOT_FOUND)
    every_acl = [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal(username), None,
                                  AclOperation.ANY, AclPermissionType.ANY) for username in usernames]
    for future in admin.delete_acls(every_acl, request_timeout=REQUEST_TIMEOUT_S).values():
        _result(future, f"delete the ACLs of {name}")


def _current_acls(admin: AdminClient, name: str) -> set[Acl]:
    """The principal's ALLOW rules; a DENY rule someone added by hand is not the spec's business and stays."""
    every_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal(name), None,
                                 AclOperation.ANY, AclPermissionType.ALLOW)
    resource_types = {v: k for k, v in RESOURCE_TYPES.items()}
    pattern_types = {v: k for k, v in PATTERN_TYPES.items()}
    operations = {v: k for k, v in OPERATIONS.items()}
    bindings = _result(admin.describe_acls(every_acl, request_timeout=REQUEST_TIMEOUT_S),
                       f"describe the ACLs of {name}")
    return {Acl(resource_types[b.restype], b.name, pattern_types[b.resource_pattern_type], b.host,
                operations[b.operation])
            for b in bindings or []}


def _binding(name: str, acl: Acl) -> AclBinding:
    return AclBinding(RESOURCE_TYPES[acl.resource_type], acl.name, PATTERN_TYPES[acl.pattern_type], principal(name),
                      acl.host, OPERATIONS[acl.operation], AclPermissionType.ALLOW)


def _binding_filter(name: str, acl: Acl) -> AclBindingFilter:
    return AclBindingFilter(RESOURCE_TYPES[acl.resource_type], acl.name, PATTERN_TYPES[acl.pattern_type],
                            principal(name), acl.host, OPERATIONS[acl.operation], AclPermissionType.ALLOW)


def _result(future, doing: str, ignore: int | None = None):
    """The future's result; None for the error `ignore`. An error retrying cannot fix is a UserRequestError;
    others (the cluster unreachable, a timeout) raise as they are, for the caller to retry the pass."""
    try:
        return future.result(timeout=REQUEST_TIMEOUT_S + 5)
    except KafkaException as e:
        error: KafkaError = e.args[0]
        if error.code() == ignore:
            return None
        if error.retriable() or error.code() < 0:  # librdkafka's own errors: transport, timeouts
            raise
        raise UserRequestError(f"cannot {doing}: {error.str()}") from None


async def _apply_quotas(client_config: Mapping[str, str], wanted: Mapping[str, Mapping[str, float]]) -> None:
    """Make the client quotas of each entity user=<name> of `wanted` exactly its own, through the first bootstrap
    server that answers (a broker forwards AlterClientQuotas to the active controller). Each entity is described
    then altered to its plan: a server lost midway leaves nothing the next one's pass would not finish."""
    security = client_security(client_config)
    client_id = client_config.get("client.id") or "odradek-operator"
    unreachable: Exception | None = None
    for server in str(client_config["bootstrap.servers"]).split(","):
        host, _, port = server.strip().rpartition(":")
        connection = NodeConnection(host.strip("[]"), int(port), client_id=client_id,
                                    connect_timeout_s=REQUEST_TIMEOUT_S, security=security)
        try:
            for name, quotas in wanted.items():
                describe = {"components": [{"entity_type": "user", "match_type": MATCH_EXACT, "match": name}],
                            "strict": True}
                response = await connection.request(DESCRIBE_CLIENT_QUOTAS, 1, describe, REQUEST_TIMEOUT_S)
                await _alter_quotas(connection, name, quotas, response)
        except (ConnectionError, TimeoutError) as e:
            unreachable = e
            continue
        finally:
            connection.close()
        return
    raise ConnectionError(f"no server of {client_config['bootstrap.servers']} answered: {unreachable}")


async def _alter_quotas(connection: NodeConnection, name: str, wanted: Mapping[str, float], described: dict) -> None:
    if described["error_code"]:
        raise UserRequestError(f"cannot describe the quotas of {name}: "
                               f"{described['error_message'] or _error_name(described['error_code'])}")
    current = {value["key"]: value["value"] for entry in described["entries"] or [] for value in entry["values"]}
    ops = plan_quotas(wanted, current)
    if not ops:
        return
    alter = {"entries": [{"entity": [{"entity_type": "user", "entity_name": name}],
                          "ops": [{"key": key, "value": 0.0 if value is None else value, "remove": value is None}
                                  for key, value in ops.items()]}],
             "validate_only": False}
    response = await connection.request(ALTER_CLIENT_QUOTAS, 1, alter, REQUEST_TIMEOUT_S)
    for entry in response["entries"]:
        if entry["error_code"]:
            raise UserRequestError(f"cannot alter the quotas of {name}: "
                                   f"{entry['error_message'] or _error_name(entry['error_code'])}")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
