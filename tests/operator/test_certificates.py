"""The operator's certificates: CAs kept across passes and renewed near expiry without a moment when nodes distrust
each other, node certificates re-issued exactly when they must, and real nodes that run the TLS render() writes
with what certificates.py issues: a quorum over mutual TLS, users identified by their certificate's CN."""

import base64
import copy
import datetime
import time
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from cryptography import x509
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
    VerificationError,
)

from odradek.broker.node import format_storage
from odradek.config import BrokerConfig, parse_properties
from odradek.operator import certificates as certificates_module
from odradek.operator.certificates import (
    CA_VALIDITY,
    RENEW_BEFORE,
    TRUST_BEFORE_SIGNING,
    certificate_hash,
    desired_secrets,
    issue_user_certificate,
    node_certificate_hashes,
)
from odradek.operator.cluster_spec import assign_node_ids, parse_cluster
from odradek.operator.render import CERTS_DIR, NODE_ID_LABEL, POOL_LABEL, nodes, render
from odradek.security.principal import SslPrincipalMapper
from tests.conftest import FAST_CLUSTER_SETTINGS, NodeProcess, free_port

NAMESPACE = "streaming"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)

CLUSTER = yaml.safe_load("""
apiVersion: odradek.io/v1beta1
kind: OdradekCluster
metadata: {name: small}
spec:
  nodePools:
    - {name: nodes, replicas: 3, roles: [broker, controller], storage: {size: 10Gi}}
  listeners:
    - {name: plain, port: 9092, type: internal}
    - {name: external, port: 9094, type: loadbalancer, tls: true, authentication: {type: tls}}
""")


def issued(resource=CLUSTER, existing=None, now=T0, external_addresses=None, previous_ids=None):
    """The Secrets of a pass, by name, with their data."""
    spec = parse_cluster(resource)
    cluster_nodes = nodes(spec, assign_node_ids(spec, previous_ids or {}))
    secrets = desired_secrets(spec, cluster_nodes, NAMESPACE, existing or {}, now, external_addresses)
    return {secret["metadata"]["name"]: secret for secret in secrets}


def data(secrets):
    return {name: secret["data"] for name, secret in secrets.items()}


def pem(secret_data, key):
    return base64.b64decode(secret_data[key])


def certificates(secret_data, key):
    return x509.load_pem_x509_certificates(pem(secret_data, key))


def verify_server(chain, bundle, name, now):
    """Verify `chain` (the leaf first) for DNS name `name` against the certificates of `bundle`, as a client
    checks a node's certificate."""
    verifier = PolicyBuilder().store(Store(bundle)).time(now).build_server_verifier(x509.DNSName(name))
    verifier.verify(chain[0], chain[1:])


def verify_client(chain, bundle, now):
    """As verify_server, for a client certificate, which (as Strimzi's) names no host: no SAN is required."""
    leaf_policy = ExtensionPolicy.webpki_defaults_ee().may_be_present(x509.SubjectAlternativeName,
                                                                      Criticality.AGNOSTIC, None)
    verifier = PolicyBuilder().store(Store(bundle)).time(now) \
        .extension_policies(ca_policy=ExtensionPolicy.webpki_defaults_ca(), ee_policy=leaf_policy) \
        .build_client_verifier()
    verifier.verify(chain[0], chain[1:])


def node_address(pod):
    return f"{pod}.small-nodes.{NAMESPACE}.svc"


def test_a_new_cluster_gets_two_cas_the_operator_certificate_and_a_secret_per_node():
    secrets = issued()
    assert list(secrets) == ["small-cluster-ca", "small-cluster-ca-cert", "small-clients-ca", "small-clients-ca-cert",
                             "small-operator-certs", "small-nodes-0-certs", "small-nodes-1-certs",
                             "small-nodes-2-certs"]
    for secret in secrets.values():
        kubernetes_validate.validate(secret, "1.30", strict=True)
        assert secret["metadata"]["namespace"] == NAMESPACE and secret["type"] == "Opaque"
        assert secret["metadata"]["labels"]["odradek.io/cluster"] == "small"
    assert set(secrets["small-cluster-ca"]["data"]) == {"ca.key", "ca.crt"}
    assert set(secrets["small-cluster-ca-cert"]["data"]) == {"ca.crt"}  # no key where clients look
    assert set(secrets["small-operator-certs"]["data"]) == {"operator.crt", "operator.key", "ca.crt"}
    assert set(secrets["small-nodes-0-certs"]["data"]) == {"node.crt", "node.key", "node.pem", "ca.crt",
                                                           "clients-ca.crt"}
    cluster_ca = certificates(secrets["small-cluster-ca"]["data"], "ca.crt")[0]
    clients_ca = certificates(secrets["small-clients-ca"]["data"], "ca.crt")[0]
    assert cluster_ca.subject.rfc4514_string() == "CN=cluster-ca v0,OU=small,O=odradek"
    assert clients_ca.subject.rfc4514_string() == "CN=clients-ca v0,OU=small,O=odradek"
    assert cluster_ca.not_valid_after_utc - T0 == CA_VALIDITY
    node = secrets["small-nodes-1-certs"]["data"]
    assert certificates(node, "ca.crt") == [cluster_ca] and certificates(node, "clients-ca.crt") == [clients_ca]
    # the keystore is the key, then the chain: what ssl.keystore.location takes
    assert pem(node, "node.pem") == pem(node, "node.key") + pem(node, "node.crt")


def test_a_node_certificate_is_for_the_nodes_names_and_verifies_against_the_cluster_ca():
    secrets = issued(external_addresses={(1, "external"): ("203.0.113.7", 9094),
                                         (2, "external"): ("kafka-2.example.com", 9094)})
    bundle = certificates(secrets["small-cluster-ca-cert"]["data"], "ca.crt")
    node = secrets["small-nodes-1-certs"]["data"]
    chain = certificates(node, "node.crt")
    leaf = chain[0]
    assert leaf.subject.rfc4514_string() == "CN=small-node,O=odradek"
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {
        node_address("small-nodes-1"), node_address("small-nodes-1") + ".cluster.local",
        *(f"{service}{suffix}" for service in ("small-nodes", "small-bootstrap", "small-external-bootstrap")
          for suffix in ("", f".{NAMESPACE}", f".{NAMESPACE}.svc", f".{NAMESPACE}.svc.cluster.local"))}
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["203.0.113.7"]
    for name in (node_address("small-nodes-1"), f"small-bootstrap.{NAMESPACE}.svc"):
        verify_server(chain, bundle, name, T0 + DAY)
    verify_client(chain, bundle, T0 + DAY)  # the same certificate is the node's client certificate
    with pytest.raises(VerificationError):
        verify_server(chain, bundle, node_address("small-nodes-2"), T0 + DAY)
    assert "kafka-2.example.com" in certificates(secrets["small-nodes-2-certs"]["data"], "node.crt")[0].extensions \
        .get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    # nor does the clients CA vouch for a node
    with pytest.raises(VerificationError):
        verify_client(chain, certificates(secrets["small-clients-ca-cert"]["data"], "ca.crt"), T0 + DAY)
    operator = certificates(secrets["small-operator-certs"]["data"], "operator.crt")
    assert operator[0].subject.rfc4514_string() == "CN=odradek-operator,O=odradek"
    verify_client(operator, bundle, T0 + DAY)


def test_the_principals_are_the_subjects_under_the_default_mapping_rules():
    mapper = SslPrincipalMapper()  # render() writes no ssl.principal.mapping.rules: DEFAULT
    secrets = issued()
    node = certificates(secrets["small-nodes-0-certs"]["data"], "node.crt")[0]
    operator = certificates(secrets["small-operator-certs"]["data"], "operator.crt")[0]
    user = issue_user_certificate(secrets["small-clients-ca"]["data"], "alice", T0)
    alice = certificates(user, "user.crt")[0]
    # Java's RFC 2253 name, as Odradek writes it, is the RFC 4514 one for these subjects
    assert [mapper.map(c.subject.rfc4514_string()) for c in (node, operator, alice)] == [
        "CN=small-node,O=odradek", "CN=odradek-operator,O=odradek", "CN=alice"]


def test_a_second_pass_changes_nothing_byte_for_byte():
    first = issued()
    for later in (T0 + DAY, T0 + CA_VALIDITY - RENEW_BEFORE - DAY):
        again = issued(existing=data(first), now=later)
        assert again == first


def test_a_node_certificate_is_reissued_exactly_when_its_names_its_ca_or_its_expiry_require():
    first = issued()
    existing = data(first)
    # a new external address: that node's certificate only, with its old key gone
    moved = issued(existing=existing, now=T0 + DAY, external_addresses={(0, "external"): ("198.51.100.1", 9094)})
    changed = {name for name in first if moved[name] != first[name]}
    assert changed == {"small-nodes-0-certs"}
    assert moved["small-nodes-0-certs"]["data"]["node.key"] != existing["small-nodes-0-certs"]["node.key"]
    # another node: its Secret added, no other touched
    grown = copy.deepcopy(CLUSTER)
    grown["spec"]["nodePools"][0]["replicas"] = 4
    more = issued(grown, existing=existing, now=T0 + DAY, previous_ids={"nodes": [0, 1, 2]})
    assert {name: more[name] for name in first} == first and "small-nodes-3-certs" in more
    # unreadable data or a certificate of another CA: issued anew
    broken = copy.deepcopy(existing)
    broken["small-nodes-1-certs"]["node.crt"] = base64.b64encode(b"not a certificate").decode()
    broken["small-nodes-2-certs"]["node.crt"] = issued()["small-nodes-2-certs"]["data"]["node.crt"]
    repaired = issued(existing=broken, now=T0 + DAY)
    assert {name for name in first if repaired[name] != first[name]} == {"small-nodes-1-certs", "small-nodes-2-certs"}
    for name in ("small-nodes-1-certs", "small-nodes-2-certs"):
        verify_server(certificates(repaired[name]["data"], "node.crt"),
                      certificates(repaired["small-cluster-ca-cert"]["data"], "ca.crt"),
                      node_address(name.removesuffix("-certs")), T0 + DAY)


def test_certificates_near_their_expiry_are_reissued_and_the_ca_far_from_its_own_is_kept(monkeypatch):
    monkeypatch.setattr(certificates_module, "CERTIFICATE_VALIDITY", 40 * DAY)
    first = issued()
    assert issued(existing=data(first), now=T0 + 9 * DAY) == first
    renewed = issued(existing=data(first), now=T0 + 11 * DAY)
    assert {name for name in first if renewed[name] != first[name]} == {
        "small-operator-certs", "small-nodes-0-certs", "small-nodes-1-certs", "small-nodes-2-certs"}
    leaf = certificates(renewed["small-nodes-0-certs"]["data"], "node.crt")[0]
    assert leaf.not_valid_after_utc > T0 + 50 * DAY


def test_a_ca_renewal_never_leaves_a_node_with_a_certificate_another_node_does_not_trust():
    before = issued()
    old_ca = certificates(before["small-cluster-ca"]["data"], "ca.crt")[0]
    # within RENEW_BEFORE of the CA's expiry: the next CA is trusted, but does not sign yet
    renewal = T0 + CA_VALIDITY - RENEW_BEFORE + DAY
    trusting = issued(existing=data(before), now=renewal)
    private = trusting["small-cluster-ca"]["data"]
    assert private["ca.key"] == before["small-cluster-ca"]["data"]["ca.key"] and "next-ca.key" in private
    bundle = certificates(trusting["small-cluster-ca-cert"]["data"], "ca.crt")
    assert bundle[0] == old_ca and bundle[1].subject.rfc4514_string() == "CN=cluster-ca v1,OU=small,O=odradek"
    node_trust = certificates(trusting["small-nodes-0-certs"]["data"], "ca.crt")
    assert node_trust == bundle
    for name, key in (("small-nodes-0-certs", "node.crt"), ("small-operator-certs", "operator.crt")):
        assert certificates(trusting[name]["data"], key)[1] == old_ca  # still the old CA's
    # until the next CA has been trusted long enough, passes change nothing
    assert issued(existing=data(trusting), now=renewal + TRUST_BEFORE_SIGNING - DAY) == trusting
    # then it signs: every certificate anew, and the old CA stays trusted
    switch = renewal + TRUST_BEFORE_SIGNING + DAY
    signing = issued(existing=data(trusting), now=switch)
    new_ca = bundle[1]
    assert certificates(signing["small-cluster-ca"]["data"], "ca.crt") == [new_ca]
    assert certificates(signing["small-cluster-ca-cert"]["data"], "ca.crt") == [new_ca, old_ca]
    new_chain = certificates(signing["small-nodes-0-certs"]["data"], "node.crt")
    old_chain = certificates(trusting["small-nodes-1-certs"]["data"], "node.crt")
    assert new_chain[1] == new_ca
    # a restarted node and one not yet restarted trust each other, both ways
    verify_server(new_chain, node_trust, node_address("small-nodes-0"), switch)
    verify_client(new_chain, node_trust, switch)
    new_trust = certificates(signing["small-nodes-0-certs"]["data"], "ca.crt")
    verify_server(old_chain, new_trust, node_address("small-nodes-1"), switch)
    verify_client(old_chain, new_trust, switch)
    # once the old CA has expired it leaves the bundle
    expired = issued(existing=data(signing), now=old_ca.not_valid_after_utc + DAY)
    assert certificates(expired["small-cluster-ca-cert"]["data"], "ca.crt") == [new_ca]
    assert expired["small-nodes-0-certs"]["data"]["node.crt"] == signing["small-nodes-0-certs"]["data"]["node.crt"]


def test_an_expired_ca_is_replaced_at_once():
    before = issued()
    later = issued(existing=data(before), now=T0 + 2 * CA_VALIDITY)
    ca = certificates(later["small-cluster-ca-cert"]["data"], "ca.crt")
    assert len(ca) == 1 and ca[0].not_valid_before_utc > T0 + CA_VALIDITY
    verify_server(certificates(later["small-nodes-0-certs"]["data"], "node.crt"), ca, node_address("small-nodes-0"),
                  T0 + 2 * CA_VALIDITY)



def merge_patched(stored, desired):
    """What the Secrets hold after a merge patch of `desired` over `stored`: keys desired no longer are kept."""
    return {name: {**stored.get(name, {}), **secret_data} for name, secret_data in desired.items()}


def subjects(secret_data, key="ca.crt"):
    return [certificate.subject.rfc4514_string() for certificate in certificates(secret_data, key)]


def test_ca_renewals_follow_each_other_year_after_year_when_patches_keep_the_keys_a_pass_dropped():
    """Daily passes over two renewals of each CA, each against the Secrets as merge patches leave them; a node
    not yet restarted (the previous pass's Secret) and one restarted (this pass's) trust each other, the bundle
    is the one the dropped keys' absence would give, and each year a new CA signs."""
    stored = data(issued())
    last = issued(existing=stored)
    signing = []
    for day in range(1, 2 * 365 + 10):
        now = T0 + day * DAY
        secrets = issued(existing=stored, now=now)
        # the same CAs and bundles as from the data without the dropped keys
        clean = issued(existing=data(last), now=now)
        for name in ("small-cluster-ca", "small-clients-ca"):
            assert set(secrets[name]["data"]) == set(clean[name]["data"]), (day, name)
            assert subjects(secrets[f"{name}-cert"]["data"]) == subjects(clean[f"{name}-cert"]["data"]), (day, name)
        old_node, new_node = last["small-nodes-1-certs"]["data"], secrets["small-nodes-0-certs"]["data"]
        for chain, trust, pod in ((certificates(old_node, "node.crt"), certificates(new_node, "ca.crt"), "small-nodes-1"),
                                  (certificates(new_node, "node.crt"), certificates(old_node, "ca.crt"), "small-nodes-0")):
            verify_server(chain, trust, node_address(pod), now)
            verify_client(chain, trust, now)
        bundle = subjects(secrets["small-cluster-ca-cert"]["data"])
        assert len(set(bundle)) == len(bundle), day  # never a CA twice (the signing one as its own previous)
        signer = subjects(secrets["small-cluster-ca"]["data"])[0]
        if not signing or signing[-1][1] != signer:
            signing.append((day, signer))
        stored, last = merge_patched(stored, data(secrets)), secrets
    # a next CA each year RENEW_BEFORE before the signing one expires, signing TRUST_BEFORE_SIGNING later
    first = (CA_VALIDITY - RENEW_BEFORE + TRUST_BEFORE_SIGNING).days
    assert signing == [(1, "CN=cluster-ca v0,OU=small,O=odradek"), (first, "CN=cluster-ca v1,OU=small,O=odradek"),
                       (first + (CA_VALIDITY - RENEW_BEFORE).days, "CN=cluster-ca v2,OU=small,O=odradek")]
    assert subjects(last["small-clients-ca"]["data"]) == ["CN=clients-ca v2,OU=small,O=odradek"]


def test_a_stale_next_or_previous_ca_left_in_the_secret_is_dropped():
    renewal = T0 + CA_VALIDITY - RENEW_BEFORE + DAY
    trusting = issued(existing=data(issued()), now=renewal)
    switch = renewal + TRUST_BEFORE_SIGNING + DAY
    signing = issued(existing=data(trusting), now=switch)
    private = signing["small-cluster-ca"]["data"]
    assert set(private) == {"ca.key", "ca.crt", "previous-ca.crt"}
    # the promoted CA still as the next one, or as its own previous: both dropped, nothing else changes
    kept_next = data(signing) | {"small-cluster-ca": private | {"next-ca.key": private["ca.key"],
                                                               "next-ca.crt": private["ca.crt"]}}
    assert issued(existing=kept_next, now=switch + DAY) == signing
    own_previous = data(signing) | {"small-cluster-ca": private | {"previous-ca.crt": private["ca.crt"]}}
    again = issued(existing=own_previous, now=switch + DAY)
    assert set(again["small-cluster-ca"]["data"]) == {"ca.key", "ca.crt"}
    assert subjects(again["small-cluster-ca-cert"]["data"]) == ["CN=cluster-ca v1,OU=small,O=odradek"]


def test_a_nodes_certificates_secret_carries_the_nodes_labels():
    secrets = issued()
    labels = secrets["small-nodes-2-certs"]["metadata"]["labels"]
    assert labels[NODE_ID_LABEL] == "2" and labels[POOL_LABEL] == "nodes" and labels["odradek.io/cluster"] == "small"
    for name in ("small-cluster-ca", "small-operator-certs"):  # not a node's: the cluster's labels only
        assert NODE_ID_LABEL not in secrets[name]["metadata"]["labels"]

def test_a_user_certificate_is_kept_while_good_and_reissued_when_the_clients_ca_signs_anew():
    before = issued()
    clients_ca = before["small-clients-ca"]["data"]
    alice = issue_user_certificate(clients_ca, "alice", T0)
    assert set(alice) == {"user.crt", "user.key", "ca.crt"}
    chain = certificates(alice, "user.crt")
    assert chain[0].subject.rfc4514_string() == "CN=alice"
    assert certificates(alice, "ca.crt") == certificates(clients_ca, "ca.crt")
    brokers_trust = certificates(before["small-nodes-0-certs"]["data"], "clients-ca.crt")
    verify_client(chain, brokers_trust, T0 + DAY)
    with pytest.raises(VerificationError):  # a user certificate is no node's
        verify_client(chain, certificates(before["small-cluster-ca-cert"]["data"], "ca.crt"), T0 + DAY)
    assert issue_user_certificate(clients_ca, "alice", T0 + DAY, existing=alice) == alice
    assert issue_user_certificate(clients_ca, "bob", T0 + DAY, existing=alice) != alice
    # after the clients CA's renewal, the user gets a certificate of the new CA, which brokers already trust
    renewal = T0 + CA_VALIDITY - RENEW_BEFORE + DAY
    trusting = issued(existing=data(before), now=renewal)
    signing = issued(existing=data(trusting), now=renewal + TRUST_BEFORE_SIGNING + DAY)
    renewed = issue_user_certificate(signing["small-clients-ca"]["data"], "alice", renewal + TRUST_BEFORE_SIGNING,
                                     existing=alice)
    assert renewed != alice
    verify_client(certificates(renewed, "user.crt"),
                  certificates(trusting["small-nodes-0-certs"]["data"], "clients-ca.crt"), renewal + 8 * DAY)


def test_the_certificate_hash_changes_exactly_when_a_nodes_secret_does():
    spec = parse_cluster(CLUSTER)
    cluster_nodes = nodes(spec, assign_node_ids(spec, {}))
    first = desired_secrets(spec, cluster_nodes, NAMESPACE, {}, T0)
    hashes = node_certificate_hashes(first, cluster_nodes)
    assert set(hashes) == {"small-nodes-0", "small-nodes-1", "small-nodes-2"} and len(set(hashes.values())) == 3
    existing = {secret["metadata"]["name"]: secret["data"] for secret in first}
    assert hashes["small-nodes-0"] == certificate_hash(existing["small-nodes-0-certs"])
    moved = desired_secrets(spec, cluster_nodes, NAMESPACE, existing, T0 + DAY, {(2, "external"): ("192.0.2.9", 1)})
    after = node_certificate_hashes(moved, cluster_nodes)
    assert {name for name in hashes if after[name] != hashes[name]} == {"small-nodes-2"}
    renewal = T0 + CA_VALIDITY - RENEW_BEFORE + DAY  # a CA joining the bundle restarts every node
    trusting = node_certificate_hashes(desired_secrets(spec, cluster_nodes, NAMESPACE, existing, renewal),
                                       cluster_nodes)
    assert all(trusting[name] != hashes[name] for name in hashes)


# --- real nodes ------------------------------------------------------------------------------------------------

E2E_CLUSTER = yaml.safe_load("""
apiVersion: odradek.io/v1beta1
kind: OdradekCluster
metadata: {name: secure}
spec:
  nodePools:
    - {name: nodes, replicas: 3, roles: [broker, controller], storage: {size: 1Gi}}
  listeners:
    - {name: users, port: 9093, type: loadbalancer, tls: true, authentication: {type: tls}}
  config: {offsets.topic.replication.factor: "3", min.insync.replicas: "2"}
  metrics: {enabled: false}
  authorization: {type: simple}
""")
DEADLINE_S = 60


class RenderedCluster:
    """Three nodes run with the server.properties render() writes and the Secrets desired_secrets() issues, moved
    to 127.0.0.1: each listener on a free port, the certificates' files in a directory per node. The pod DNS
    names do not resolve here, so each node's external address is 127.0.0.1, which puts 127.0.0.1 among its
    certificate's names: host names stay checked (ssl.endpoint.identification.algorithm=https) between nodes."""

    def __init__(self, directory: Path):
        spec = parse_cluster(E2E_CLUSTER)
        node_ids = assign_node_ids(spec, {})
        cluster_nodes = nodes(spec, node_ids)
        self.ports = {node.node_id: {"CONTROLLER": free_port(), "REPLICATION": free_port(), "USERS": free_port()}
                      for node in cluster_nodes}
        external = {(node_id, "users"): ("127.0.0.1", ports["USERS"]) for node_id, ports in self.ports.items()}
        self.secrets = {secret["metadata"]["name"]: secret["data"]
                        for secret in desired_secrets(spec, cluster_nodes, "default", {}, _now(), external)}
        objects = render(spec, node_ids, "unused", "default", external)
        config_maps = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "ConfigMap"}
        voters = ",".join(f"{node_id}@127.0.0.1:{ports['CONTROLLER']}" for node_id, ports in self.ports.items())
        cluster_id = "c2VjdXJlLWNsdXN0ZXItaWQ"
        self.nodes = []
        for node in cluster_nodes:
            certs = directory / node.name / "certs"
            certs.mkdir(parents=True)
            for key, value in self.secrets[f"{node.name}-certs"].items():
                (certs / key).write_bytes(base64.b64decode(value))
            text = config_maps[f"{node.name}-config"]["data"]["server.properties"].replace(CERTS_DIR, str(certs))
            ports = self.ports[node.node_id]
            settings = parse_properties(text) | FAST_CLUSTER_SETTINGS | {
                "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
                "advertised.listeners": f"REPLICATION://127.0.0.1:{ports['REPLICATION']},"
                                        f"USERS://127.0.0.1:{ports['USERS']}",
                "controller.quorum.voters": voters, "log.dirs": str(directory / node.name / "data"),
                "balancer.mode": "off"}
            process = NodeProcess(directory / node.name / "data", port=ports["USERS"], settings=settings)
            format_storage(BrokerConfig(settings), cluster_id)
            self.nodes.append(process)

    def start(self) -> "RenderedCluster":
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            node.wait_listening(DEADLINE_S)
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def bootstrap(self, listener: str) -> str:
        return ",".join(f"127.0.0.1:{ports[listener]}" for ports in self.ports.values())

    def tls(self, certificate_key: str, key_key: str, secret: str) -> dict:
        """librdkafka settings presenting the certificate of `secret` and trusting the cluster CA."""
        return {"security.protocol": "ssl", "ssl.ca.pem": _text(self.secrets["secure-cluster-ca-cert"]["ca.crt"]),
                "ssl.certificate.pem": _text(self.secrets[secret][certificate_key]),
                "ssl.key.pem": _text(self.secrets[secret][key_key])}

    @property
    def operator(self) -> dict:
        return {"bootstrap.servers": self.bootstrap("REPLICATION")} | self.tls("operator.crt", "operator.key",
                                                                               "secure-operator-certs")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _text(encoded: str) -> str:
    return base64.b64decode(encoded).decode()


@pytest.fixture
def rendered_cluster(tmp_path):
    cluster = RenderedCluster(tmp_path).start()
    yield cluster
    cluster.stop()


def wait_for(condition, what: str, timeout: float = DEADLINE_S):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = condition()
        except KafkaException as e:
            last = e
        else:
            if result:
                return result
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def fully_replicated(admin: AdminClient, topic: str, partitions: int) -> bool:
    metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
    return (metadata is not None and metadata.error is None and len(metadata.partitions) == partitions
            and all(len(p.isrs) == 3 for p in metadata.partitions.values()))


def refusal(settings: dict) -> str:
    """What librdkafka reports when a connection with these settings is refused."""
    errors = []
    admin = AdminClient(settings | {"error_cb": errors.append, "reconnect.backoff.ms": 1000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)  # never answered
    wait_for(lambda: admin.poll(0.5) >= 0 and errors, "the refusal to be reported")
    return " ".join(error.str() for error in errors)


def created(admin: AdminClient, topic: str, partitions: int) -> bool:
    try:
        admin.create_topics([NewTopic(topic, partitions, 3)], request_timeout=20)[topic].result(30)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # created by an attempt that timed out
            raise
    return True


def test_real_nodes_with_the_rendered_tls_form_a_quorum_and_know_users_by_their_certificate(rendered_cluster):
    cluster = rendered_cluster
    admin = AdminClient(cluster.operator)
    # the operator's certificate is a super user on REPLICATION: it creates a topic the nodes replicate over mTLS
    wait_for(lambda: created(admin, "orders", 3), "the operator to create a topic")
    wait_for(lambda: fully_replicated(admin, "orders", 3), "every partition's ISR to hold the three nodes")

    alice = issue_user_certificate(cluster.secrets["secure-clients-ca"], "alice", _now())
    cluster.secrets["alice"] = alice
    users = {"bootstrap.servers": cluster.bootstrap("USERS")} | cluster.tls("user.crt", "user.key", "alice")

    # without an ACL for User:CN=alice the write is refused ...
    outcomes = []
    producer = Producer(users | {"message.timeout.ms": 20000})
    producer.produce("orders", b"refused", on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(30)
    assert outcomes and outcomes[0] is not None and outcomes[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ... and allowed with one: the principal is the certificate's subject, CN=alice
    bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, "User:CN=alice", "*", operation,
                           AclPermissionType.ALLOW)
                for kind, name, operation in ((ResourceType.TOPIC, "orders", AclOperation.WRITE),
                                              (ResourceType.TOPIC, "orders", AclOperation.READ),
                                              (ResourceType.GROUP, "billing", AclOperation.READ))]
    for future in admin.create_acls(bindings, request_timeout=20).values():
        future.result(20)

    def delivered() -> bool:
        outcomes.clear()
        producer.produce("orders", b"paid", partition=0, on_delivery=lambda err, msg: outcomes.append(err))
        producer.flush(30)
        return outcomes == [None]

    wait_for(delivered, "alice's write to be allowed once the ACL reaches every node")
    consumer = Consumer(users | {"group.id": "billing", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    try:
        message = wait_for(lambda: (m := consumer.poll(1)) is not None and m.error() is None and m,
                           "alice to read what she wrote")
        assert message.value() == b"paid"
    finally:
        consumer.close()

    # no certificate, or a user's (the clients CA's), gets nowhere on REPLICATION
    without = {"bootstrap.servers": cluster.bootstrap("REPLICATION"), "security.protocol": "ssl",
               "ssl.ca.pem": _text(cluster.secrets["secure-cluster-ca-cert"]["ca.crt"])}
    assert "certificate required" in refusal(without)
    assert "unknown ca" in refusal(without | cluster.tls("user.crt", "user.key", "alice"))
