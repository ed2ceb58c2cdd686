"""Reconciling an OdradekUser: its credentials, ACLs and client quotas made to match its spec, as Strimzi's user
operator does for a KafkaUser.

Each user has a Secret named after it, labelled odradek.io/kind: OdradekUser (as Strimzi's strimzi.io/kind:
KafkaUser) and owned by the resource, whose data each pass makes exactly what its authentication needs. A Secret
of that name the resource does not own (say the cluster CA's, for a user named <cluster>-cluster-ca) is never
written nor deleted: the user is NotReady (SecretConflict) and nothing of it reaches the cluster.

- scram-sha-512: a password generated once (Strimzi's keys: `password` and `sasl.jaas.config`); every pass reads
  it back and upserts the broker's credential from it when the credential is missing or the password is not the
  one last upserted (a digest of which the Secret's annotation odradek.io/credential-digest keeps), so the Secret
  and the cluster agree even after the Secret was changed or the credential deleted by hand; not on every pass,
  as each upsert salts the password anew: a record in the metadata log, and a new salt under a client's SCRAM
  exchange under way. (A credential upserted by hand with another password is not noticed: Kafka describes a
  credential's mechanism and iterations, not its password.) Its name in Kafka is the resource's name.
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
user_secret, tls_user_secret, owns, credential_digest, secret_patch); the shell around them talks to the cluster
with confluent-kafka's AdminClient (in a thread) and, for client quotas, which that client has no API for, sends
DescribeClientQuotas and AlterClientQuotas itself, as `odradek quotas` does.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import secrets
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError
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
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)

from odradek.network.client import NodeConnection
from odradek.operator.admin_calls import REQUEST_TIMEOUT_S, RequestRefused, future_result
from odradek.operator.certificates import clients_ca_secret_name, issue_user_certificate
from odradek.operator.crds import CLUSTER_LABEL
from odradek.operator.kube import SECRETS, Kube, KubeError
from odradek.operator.status import observed_generation, status_conditions
from odradek.protocol.errors import ErrorCode
from odradek.security.client_properties import client_security

AUTHENTICATIONS = ("scram-sha-512", "tls")
KIND_LABEL, USER_KIND = "odradek.io/kind", "OdradekUser"  # on the users' Secrets, as Strimzi's strimzi.io/kind
CREDENTIAL_DIGEST = "odradek.io/credential-digest"  # on a SCRAM user's Secret: credential_digest of the broker's
SCRAM_ITERATIONS = 4096
PASSWORD_LENGTH = 32
# Letters and digits only: the password goes between the JAAS line's double quotes unescaped.
PASSWORD_ALPHABET = string.ascii_letters + string.digits
COMMON_NAME_MAX = 64  # X.509's upper bound on a CN, which a tls user's name is
CLUSTER_RESOURCE_NAME = "kafka-cluster"  # the one name of the cluster resource in Kafka's ACLs
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


def credential_digest(password: str) -> str:
    """The digest of the password last upserted as the user's credential, which its Secret keeps: its SHA-256.

    A plain digest, not an HMAC: it gives nothing away, as whoever can read the annotation can read the password
    in the same Secret's data, and a password new_password made (32 of 62 characters, about 190 bits) cannot be
    found from its digest anyway. The operator has no key of its own an HMAC could take that would outlive it."""
    return hashlib.sha256(password.encode()).hexdigest()


def user_secret(resource: Mapping, namespace: str, password: str) -> dict:
    """A SCRAM user's Secret as Strimzi shapes it: base64 `password` and `sasl.jaas.config`, labelled for the
    cluster and owned by the OdradekUser (so a real cluster's garbage collector removes it with the user); it is
    written once the password is the broker's credential, which its annotation says."""
    name = resource["metadata"]["name"]
    secret = _secret(resource, namespace, {"password": _b64(password),
                                           "sasl.jaas.config": _b64(jaas_config(name, password))})
    secret["metadata"]["annotations"] = {CREDENTIAL_DIGEST: credential_digest(password)}
    return secret


def tls_user_secret(resource: Mapping, namespace: str, certificate: Mapping[str, str]) -> dict:
    """A tls user's Secret, labelled and owned as user_secret's: `certificate` is issue_user_certificate's data."""
    return _secret(resource, namespace, certificate)


def owns(resource: Mapping, secret: Mapping) -> bool:
    """Whether `secret` is the user's own, which its passes may write and its deletion delete: one the resource
    owns (an ownerReference with its uid) or, for a resource without a uid (not read from a cluster), one labelled
    an OdradekUser's. Any other Secret of the user's name is someone else's."""
    meta = secret.get("metadata") or {}
    uid = (resource.get("metadata") or {}).get("uid")
    if uid:
        return any(reference.get("uid") == uid for reference in meta.get("ownerReferences") or [])
    return (meta.get("labels") or {}).get(KIND_LABEL) == USER_KIND


def secret_patch(current: Mapping, wanted: Mapping) -> dict | None:
    """The merge patch making the user's Secret `current` what `wanted` (user_secret's or tls_user_secret's) says:
    its labels and annotations set where they differ, the credential digest removed when no longer wanted, and
    its data exactly the wanted, without the keys it no longer needs (a user that switched authentication);
    None when nothing differs. Labels and annotations someone else added stay."""
    meta, wanted_meta = current.get("metadata") or {}, wanted["metadata"]
    patch: dict = {}
    for field in ("labels", "annotations"):
        have, want = meta.get(field) or {}, wanted_meta.get(field) or {}
        changes = {key: value for key, value in want.items() if have.get(key) != value}
        if field == "annotations" and CREDENTIAL_DIGEST in have and CREDENTIAL_DIGEST not in want:
            changes[CREDENTIAL_DIGEST] = None
        if changes:
            patch.setdefault("metadata", {})[field] = changes
    data, wanted_data = current.get("data") or {}, wanted["data"]
    if dict(data) != dict(wanted_data):
        patch["data"] = dict(wanted_data) | {key: None for key in data if key not in wanted_data}
    return patch or None


def _secret(resource: Mapping, namespace: str, data: Mapping[str, str]) -> dict:
    meta = resource["metadata"]
    name = meta["name"]
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": name, "namespace": namespace,
                           "labels": {CLUSTER_LABEL: (meta.get("labels") or {}).get(CLUSTER_LABEL, ""),
                                      KIND_LABEL: USER_KIND}},
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
    status: dict = observed_generation(resource)
    try:
        spec = parse_user(resource)
    except UserSpecError as e:
        status["conditions"] = status_conditions(old_status, [("NotReady", "InvalidSpec", str(e))])
        return status
    status["username"] = kafka_username(spec.name, spec.authentication)
    existing = await _existing_secret(kube, namespace, spec.name)
    if existing is not None and not owns(resource, existing):
        status["conditions"] = status_conditions(old_status, [(
            "NotReady", "SecretConflict",
            f"Secret {namespace}/{spec.name} exists and is not this user's: it is left alone")])
        return status
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
    annotations = ((existing or {}).get("metadata") or {}).get("annotations") or {}
    applied = password is not None and annotations.get(CREDENTIAL_DIGEST) == credential_digest(password)
    try:
        # The credential before the Secret, whose digest then says it was upserted: a password generated for a
        # Secret that could not be created is lost, and the next pass generates and upserts another.
        await asyncio.to_thread(_apply_credential, client_config, spec.name, password, applied)
        if existing is None:
            await kube.create(wanted)
        elif (patch := secret_patch(existing, wanted)) is not None:
            await kube.merge_patch(SECRETS, namespace, spec.name, patch)
        status["secret"] = spec.name
        await asyncio.to_thread(_apply_acls, client_config, spec)
        await _apply_quotas(client_config, {username: quotas
                                            for username, (_, quotas) in wanted_by_username(spec).items()})
    except RequestRefused as e:
        status["conditions"] = status_conditions(old_status, [("NotReady", "KafkaError", str(e))])
        return status
    status["conditions"] = status_conditions(old_status, [("Ready", "UserReady", "the user matches the spec")])
    return status


async def delete_user(kube: Kube, namespace: str, resource: Mapping, client_config: dict) -> None:
    """Remove the user's SCRAM credential, the ACLs and quotas of both its possible names in Kafka (whatever its
    spec says, which may be unreadable or have switched) and its Secret, if the Secret of its name is its own."""
    name = resource["metadata"]["name"]
    usernames = [kafka_username(name, authentication) for authentication in AUTHENTICATIONS]
    await asyncio.to_thread(_delete_credential_and_acls, client_config, name, usernames)
    await _apply_quotas(client_config, {username: {} for username in usernames})
    existing = await _existing_secret(kube, namespace, name)
    if existing is not None and owns(resource, existing):
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


def _apply_credential(client_config: dict, name: str, password: str | None, applied: bool) -> None:
    """Make the SCRAM-SHA-512 credential of `name` the password's, or delete it (None: a tls user, which may have
    been a SCRAM one). `applied` says the Secret's digest is the password's: then the credential is upserted only
    if the broker has none (each upsert salts anew, so it is made only when needed)."""
    admin = AdminClient(client_config)
    if password is None:
        future_result(admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(name, ScramMechanism.SCRAM_SHA_512)],
            request_timeout=REQUEST_TIMEOUT_S)[name], f"delete the SCRAM-SHA-512 credential of {name}",
            ignore=KafkaError.RESOURCE_NOT_FOUND)
        return
    if applied and _has_credential(admin, name):
        return
    mechanism = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    future_result(admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(name, mechanism, password.encode())],
        request_timeout=REQUEST_TIMEOUT_S)[name], f"set the SCRAM-SHA-512 credential of {name}")


def _has_credential(admin: AdminClient, name: str) -> bool:
    """Whether the broker has the SCRAM-SHA-512 credential of `name` with the iterations the operator sets."""
    described: UserScramCredentialsDescription | None = future_result(
        admin.describe_user_scram_credentials([name], request_timeout=REQUEST_TIMEOUT_S)[name],
        f"describe the SCRAM credentials of {name}", ignore=KafkaError.RESOURCE_NOT_FOUND)
    return described is not None and any(
        (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
        for info in described.scram_credential_infos)


def _apply_acls(client_config: dict, spec: UserSpec) -> None:
    """Give each of the user's names in Kafka the ACLs wanted_by_username says."""
    admin = AdminClient(client_config)
    for username, (acls, _) in wanted_by_username(spec).items():
        plan = plan_acls(acls, _current_acls(admin, username))
        if plan.create:
            for future in admin.create_acls([_binding(username, acl) for acl in plan.create],
                                            request_timeout=REQUEST_TIMEOUT_S).values():
                future_result(future, f"create the ACLs of {username}")
        if plan.delete:
            for future in admin.delete_acls([_binding_filter(username, acl) for acl in plan.delete],
                                            request_timeout=REQUEST_TIMEOUT_S).values():
                future_result(future, f"delete ACLs of {username}")


def _delete_credential_and_acls(client_config: dict, name: str, usernames: Iterable[str]) -> None:
    admin = AdminClient(client_config)
    deletion = UserScramCredentialDeletion(name, ScramMechanism.SCRAM_SHA_512)
    future_result(admin.alter_user_scram_credentials([deletion], request_timeout=REQUEST_TIMEOUT_S)[name],
            f"delete the SCRAM-SHA-512 credential of {name}", ignore=KafkaError.RESOURCE_NOT_FOUND)
    every_acl = [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal(username), None,
                                  AclOperation.ANY, AclPermissionType.ANY) for username in usernames]
    for future in admin.delete_acls(every_acl, request_timeout=REQUEST_TIMEOUT_S).values():
        future_result(future, f"delete the ACLs of {name}")


def _current_acls(admin: AdminClient, name: str) -> set[Acl]:
    """The principal's ALLOW rules; a DENY rule someone added by hand is not the spec's business and stays."""
    every_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal(name), None,
                                 AclOperation.ANY, AclPermissionType.ALLOW)
    resource_types = {v: k for k, v in RESOURCE_TYPES.items()}
    pattern_types = {v: k for k, v in PATTERN_TYPES.items()}
    operations = {v: k for k, v in OPERATIONS.items()}
    bindings = future_result(admin.describe_acls(every_acl, request_timeout=REQUEST_TIMEOUT_S),
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
        raise RequestRefused(f"cannot describe the quotas of {name}: "
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
            raise RequestRefused(f"cannot alter the quotas of {name}: "
                                   f"{entry['error_message'] or _error_name(entry['error_code'])}")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
