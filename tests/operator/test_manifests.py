"""The operator's shipped manifests: CRDs, operator Deployment, example resources and the image's Dockerfile."""

import copy
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from odradek.operator import crds as crds_module
from odradek.operator.crds import OPERATOR_OWNED_CONFIG, crds, render
from odradek.operator.image import CONFIG_PATH, IMAGE_REPOSITORY, NODE_COMMAND, image
from odradek.operator.render import RACK_CLUSTER_ROLE

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
EXAMPLES = DEPLOY / "examples"
KUBERNETES_VERSION = "1.30"
EXAMPLE_KINDS = {"cluster.yaml": "OdradekCluster", "topic.yaml": "OdradekTopic", "user.yaml": "OdradekUser",
                 "rebalance.yaml": "OdradekRebalance"}
JUNCTORS = ("allOf", "anyOf", "oneOf", "not")


def load_all(path: Path) -> list[dict]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def load_example(name: str) -> dict:
    [document] = load_all(EXAMPLES / name)
    return document


def package_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def crd_of(kind: str) -> dict:
    return next(crd for crd in crds() if crd["spec"]["names"]["kind"] == kind)


def schema_of(kind: str) -> dict:
    [version] = crd_of(kind)["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


# --- (a) deploy/crds.yaml is generated ----------------------------------------------------------------------

def test_deploy_crds_yaml_is_what_crds_renders():
    assert (DEPLOY / "crds.yaml").read_text() == render(), \
        "deploy/crds.yaml is stale: python -m odradek.operator.crds > deploy/crds.yaml"
    assert load_all(DEPLOY / "crds.yaml") == crds()


def test_module_prints_the_crds_as_multi_document_yaml():
    printed = subprocess.run([sys.executable, "-m", "odradek.operator.crds"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    assert printed == render()
    assert [document["kind"] for document in yaml.safe_load_all(printed)] == ["CustomResourceDefinition"] * 4


# --- (b) shipped manifests pass Kubernetes' own schemas ---------------------------------------------------

SHIPPED = sorted(DEPLOY.glob("*.yaml"))


def test_the_shipped_manifests_are_the_crds_and_the_operator():
    assert [path.name for path in SHIPPED] == ["crds.yaml", "operator.yaml"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_shipped_manifest_validates_against_the_kubernetes_openapi_schemas(path):
    documents = load_all(path)
    assert documents
    for document in documents:
        assert kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True) == KUBERNETES_VERSION


def test_strict_kubernetes_validation_rejects_an_unknown_field():
    crd = copy.deepcopy(crds()[0])
    crd["spec"]["versions"][0]["subresource"] = {"status": {}}  # a typo of subresources
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(crd, KUBERNETES_VERSION, strict=True)


def operator_objects() -> dict[str, dict]:
    """The first object of each kind: the operator's own ClusterRole comes before the nodes' rack role."""
    objects: dict[str, dict] = {}
    for document in load_all(DEPLOY / "operator.yaml"):
        objects.setdefault(document["kind"], document)
    return objects


def cluster_role(name: str) -> dict:
    return next(document for document in load_all(DEPLOY / "operator.yaml")
                if document["kind"] == "ClusterRole" and document["metadata"]["name"] == name)


def test_operator_deployment_runs_one_non_root_operator_of_this_version():
    objects = operator_objects()
    assert set(objects) == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"}
    deployment = objects["Deployment"]
    assert deployment["metadata"]["namespace"] == objects["Namespace"]["metadata"]["name"] == "odradek"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"] == "odradek-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 1000
    [container] = pod["containers"]
    assert container["image"] == f"{IMAGE_REPOSITORY}:{package_version()}" == image(package_version())
    assert container["command"] == ["odradek", "operator"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    binding = objects["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == objects["ClusterRole"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "odradek-operator", "namespace": "odradek"}]


def granted(cluster_role: dict) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in cluster_role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def test_operator_cluster_role_grants_what_the_operator_needs_and_no_wildcards():
    role = operator_objects()["ClusterRole"]
    grants = granted(role)
    assert not any("*" in entry for entry in grants)
    needed = set()
    for crd in crds():
        plural = crd["spec"]["names"]["plural"]
        needed |= {("odradek.io", plural, verb) for verb in ("get", "list", "watch", "patch")}
        needed |= {("odradek.io", f"{plural}/status", verb) for verb in ("get", "patch")}
    owned = {"": ["pods", "persistentvolumeclaims", "services", "configmaps", "secrets", "serviceaccounts"],
             "policy": ["poddisruptionbudgets"], "networking.k8s.io": ["networkpolicies"]}
    for group, resources in owned.items():
        needed |= {(group, resource, verb) for resource in resources
                   for verb in ("get", "list", "watch", "create", "update", "patch", "delete")}
    needed |= {("", "events", "create"), ("", "nodes", "get"), ("", "nodes", "list")}
    needed |= {("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")}
    assert needed <= grants, sorted(needed - grants)
    assert ("", "nodes", "update") not in grants and ("", "secrets", "deletecollection") not in grants


def test_the_operator_may_bind_the_rack_role_to_a_clusters_nodes_and_nothing_more():
    rack_role = cluster_role(RACK_CLUSTER_ROLE)
    assert rack_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    operator_role = operator_objects()["ClusterRole"]
    grants = granted(operator_role)
    # the rack ClusterRoleBindings render.rack_binding() gives, kept by the operator
    assert {("rbac.authorization.k8s.io", "clusterrolebindings", verb)
            for verb in ("get", "list", "create", "patch", "delete")} <= grants
    # Kubernetes lets the operator bind a role it holds every permission of (get nodes), or one it may bind
    assert granted(rack_role) <= grants
    binds = [rule for rule in operator_role["rules"] if "bind" in rule["verbs"]]
    assert binds == [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
                      "resourceNames": [RACK_CLUSTER_ROLE]}]
    assert not any(rule["resources"] == ["clusterroles"] and set(rule["verbs"]) & {"create", "update", "patch",
                                                                                "escalate"}
                   for rule in operator_role["rules"])


# --- (c) the CRDs' schemas are structural -----------------------------------------------------------------

FORBIDDEN_IN_JUNCTORS = ("type", "description", "default", "nullable", "additionalProperties",
                         "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type")


def junctor_violations(junctor: dict, outer: dict, where: str) -> list[str]:
    """A value validation under allOf/anyOf/oneOf/not: no types or defaults, only properties known outside."""
    problems = [f"{where}: {key} inside a junctor" for key in FORBIDDEN_IN_JUNCTORS if key in junctor]
    for name, nested in junctor.get("properties", {}).items():
        if name not in outer.get("properties", {}):
            problems.append(f"{where}.properties.{name}: not declared outside the junctor")
        else:
            problems += junctor_violations(nested, outer["properties"][name], f"{where}.properties.{name}")
    for key in JUNCTORS:
        for index, nested in enumerate(junctor.get(key, []) if key != "not" else [junctor.get("not")]):
            if nested is not None:
                problems += junctor_violations(nested, outer, f"{where}.{key}[{index}]")
    return problems


def structural_violations(schema: dict, where: str = "") -> list[str]:
    """What makes a schema non-structural in Kubernetes' sense (the apiserver's rules, restated small)."""
    problems = []
    schema_type = schema.get("type")
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    if schema_type is None and not int_or_string and not schema.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{where or '.'}: no type")
    if "properties" in schema and schema_type != "object":
        problems.append(f"{where}: properties on a {schema_type}")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{where}: properties together with additionalProperties")
    if "additionalProperties" in schema and schema_type != "object":
        problems.append(f"{where}: additionalProperties on a {schema_type}")
    if schema_type == "array" and "items" not in schema:
        problems.append(f"{where}: an array without items")
    if "items" in schema and schema_type != "array":
        problems.append(f"{where}: items on a {schema_type}")
    if schema.get("uniqueItems") is True:
        problems.append(f"{where}: uniqueItems (use x-kubernetes-list-type: set)")
    if int_or_string and schema.get("anyOf", [{"type": "integer"}, {"type": "string"}]) != [
            {"type": "integer"}, {"type": "string"}]:
        problems.append(f"{where}: int-or-string with another anyOf")
    for key in JUNCTORS:
        if key in schema and not (int_or_string and key == "anyOf"):
            nested = [schema[key]] if key == "not" else schema[key]
            for index, junctor in enumerate(nested):
                problems += junctor_violations(junctor, schema, f"{where}.{key}[{index}]")
    for name, child in schema.get("properties", {}).items():
        problems += structural_violations(child, f"{where}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += structural_violations(schema["additionalProperties"], f"{where}.*")
    if "items" in schema:
        problems += structural_violations(schema["items"], f"{where}[]")
    return problems


def root_violations(schema: dict) -> list[str]:
    """The root is an object; of metadata, a CRD may restrict only name and generateName."""
    problems = [] if schema.get("type") == "object" else ["root: not an object"]
    metadata = schema["properties"].get("metadata", {"type": "object"})
    if set(metadata) - {"type", "properties"} or set(metadata.get("properties", {})) - {"name", "generateName"}:
        problems.append("metadata: more than name and generateName")
    return problems


@pytest.mark.parametrize("crd", crds(), ids=lambda crd: crd["spec"]["names"]["kind"])
def test_crd_schema_is_structural(crd):
    [version] = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert structural_violations(schema) + root_violations(schema) == []


@pytest.mark.parametrize("schema, problem", [
    ({"type": "object", "properties": {"a": {"description": "untyped"}}}, ".a: no type"),
    ({"type": "string", "properties": {"a": {"type": "string"}}}, ": properties on a string"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
     ": properties together with additionalProperties"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"properties": {"b": {}}}]},
     ".anyOf[0].properties.b: not declared outside the junctor"),
    ({"type": "object", "properties": {"a": {"type": "string", "not": {"type": "string"}}}},
     ".a.not[0]: type inside a junctor"),
])
def test_structural_checker_catches_non_structural_schemas(schema, problem):
    assert problem in structural_violations(schema)


def test_structural_checker_accepts_quantities_and_preserved_fields():
    assert structural_violations({"type": "object", "properties": {
        "cpu": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "free": {"x-kubernetes-preserve-unknown-fields": True},
    }}) == []


def test_crds_are_named_and_shaped_as_the_spec_says():
    expected = {"OdradekCluster": "odc", "OdradekTopic": "odt", "OdradekUser": "odu", "OdradekRebalance": "odr"}
    assert [crd["spec"]["names"]["kind"] for crd in crds()] == list(expected)
    for crd in crds():
        names = crd["spec"]["names"]
        assert crd["metadata"]["name"] == f"{names['plural']}.odradek.io"
        assert crd["spec"]["group"] == "odradek.io" and crd["spec"]["scope"] == "Namespaced"
        assert names["shortNames"] == [expected[names["kind"]]]
        assert names["categories"] == ["odradek"]
        [version] = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
        assert version["subresources"] == {"status": {}}
    columns = {crd["spec"]["names"]["kind"]: [column["name"] for column in crd["spec"]["versions"][0][
        "additionalPrinterColumns"]] for crd in crds()}
    assert columns["OdradekCluster"] == ["Ready", "Nodes", "ClusterId", "Age"]
    assert columns["OdradekTopic"] == ["Cluster", "Partitions", "Replicas", "Ready"]


def schema_at(schema: dict, json_path: str) -> dict | None:
    """The schema node a printer column's simple JSONPath (.spec.a.b, filters allowed) points at."""
    node = schema
    for name in re.sub(r"\[\?\(.*?\)\]", "", json_path).strip(".").split("."):
        while node.get("type") == "array":
            node = node["items"]
        node = node.get("properties", {}).get(name)
        if node is None:
            return None
    return node


@pytest.mark.parametrize("crd", crds(), ids=lambda crd: crd["spec"]["names"]["kind"])
def test_printer_columns_point_at_fields_of_the_schema(crd):
    [version] = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"].startswith((".spec.", ".status.")):
            node = schema_at(schema, column["jsonPath"])
            assert node is not None, column
            assert node["type"] == column["type"], column


# --- (d) the example resources, and what the CRDs refuse ---------------------------------------------------

def apiserver_schema(schema: dict) -> dict:
    """The schema as kubectl's strict field validation applies it: unknown fields are errors, sets unique."""
    schema = copy.deepcopy(schema)

    def close(node: dict) -> None:
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        if node.get("x-kubernetes-list-type") == "set":
            node["uniqueItems"] = True
        for child in node.get("properties", {}).values():
            close(child)
        if isinstance(node.get("additionalProperties"), dict):
            close(node["additionalProperties"])
        if "items" in node:
            close(node["items"])

    close(schema)
    metadata = schema["properties"]["metadata"]
    metadata.pop("additionalProperties", None)  # the apiserver checks metadata itself
    return schema


def errors(resource: dict) -> list[str]:
    validator = jsonschema.Draft4Validator(apiserver_schema(schema_of(resource["kind"])))
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message}" for error in
            validator.iter_errors(resource)]


@pytest.mark.parametrize("name", sorted(EXAMPLE_KINDS))
def test_example_resource_is_valid_against_its_crd(name):
    resource = load_example(name)
    assert resource["apiVersion"] == "odradek.io/v1beta1"
    assert resource["kind"] == EXAMPLE_KINDS[name]
    assert errors(resource) == []


def test_the_examples_belong_to_the_example_cluster():
    cluster = load_example("cluster.yaml")["metadata"]["name"]
    for name in ("topic.yaml", "user.yaml", "rebalance.yaml"):
        assert load_example(name)["metadata"]["labels"]["odradek.io/cluster"] == cluster, name


def test_example_cluster_is_three_combined_nodes_with_tls_and_scram_listeners():
    spec = load_example("cluster.yaml")["spec"]
    [pool] = spec["nodePools"]
    assert pool["replicas"] == 3 and sorted(pool["roles"]) == ["broker", "controller"]
    listeners = {listener["name"]: listener for listener in spec["listeners"]}
    assert listeners["tls"]["tls"] is True and listeners["tls"]["authentication"]["type"] == "scram-sha-512"
    assert listeners["external"]["authentication"]["type"] == "tls"
    assert spec["authorization"] == {"type": "simple", "superUsers": ["admin"]}


def test_example_user_authenticates_with_scram_and_has_acls():
    spec = load_example("user.yaml")["spec"]
    assert spec["authentication"]["type"] == "scram-sha-512"
    assert spec["authorization"]["type"] == "simple" and len(spec["authorization"]["acls"]) >= 2


def changed(name: str, change) -> dict:
    resource = load_example(name)
    change(resource["spec"])
    return resource


def delete_storage_size(spec):
    del spec["nodePools"][0]["storage"]["size"]


INVALID = {
    "pool replicas -1": ("cluster.yaml", lambda spec: spec["nodePools"][0].update(replicas=-1)),
    "unknown listener type": ("cluster.yaml", lambda spec: spec["listeners"][0].update(type="route")),
    "missing storage size": ("cluster.yaml", delete_storage_size),
    "unknown spec field": ("cluster.yaml", lambda spec: spec.update(kafka={"version": "4.0"})),
    "unknown pool field": ("cluster.yaml", lambda spec: spec["nodePools"][0].update(storageSize="10Gi")),
    "no node pools": ("cluster.yaml", lambda spec: spec.update(nodePools=[])),
    "an unknown role": ("cluster.yaml", lambda spec: spec["nodePools"][0].update(roles=["broker", "zookeeper"])),
    "a role twice": ("cluster.yaml", lambda spec: spec["nodePools"][0].update(roles=["broker", "broker"])),
    "pool name not a DNS label": ("cluster.yaml", lambda spec: spec["nodePools"][0].update(name="Pool_1")),
    "storage size not a quantity": ("cluster.yaml", lambda spec: spec["nodePools"][0]["storage"].update(size="ten")),
    "listener port reserved for replication": ("cluster.yaml", lambda spec: spec["listeners"][0].update(port=9091)),
    "listener name too long": ("cluster.yaml", lambda spec: spec["listeners"][0].update(name="externalplain")),
    "listener named like the node's own": ("cluster.yaml", lambda spec: spec["listeners"][0].update(
        name="replication")),
    "listener authentication unknown": ("cluster.yaml", lambda spec: spec["listeners"][1].update(
        authentication={"type": "plain"})),
    "operator-owned node setting": ("cluster.yaml", lambda spec: spec["config"].update({"node.id": "7"})),
    "operator-owned pool setting": ("cluster.yaml", lambda spec: spec["nodePools"][0].update(
        config={"process.roles": "broker"})),
    "a number as a setting": ("cluster.yaml", lambda spec: spec["config"].update({"num.io.threads": 8})),
    "balancer mode off unquoted in YAML": ("cluster.yaml", lambda spec: spec.update(
        balancer=yaml.safe_load("mode: off"))),
    "authorization of an unknown type": ("cluster.yaml", lambda spec: spec["authorization"].update(type="opa")),
    "authorization without a type": ("cluster.yaml", lambda spec: spec["authorization"].pop("type")),
    "a super user holding the separator": ("cluster.yaml", lambda spec: spec["authorization"].update(
        superUsers=["alice;bob"])),
    "the operator's TLS setting": ("cluster.yaml", lambda spec: spec["config"].update(
        {"ssl.truststore.location": "/tmp/ca.pem"})),
    "the operator's super users": ("cluster.yaml", lambda spec: spec["config"].update({"super.users": "User:me"})),
    "topic without partitions": ("topic.yaml", lambda spec: spec.pop("partitions")),
    "topic with 0 replicas": ("topic.yaml", lambda spec: spec.update(replicas=0)),
    "topic name with a slash": ("topic.yaml", lambda spec: spec.update(topicName="shop/orders")),
    "user without authentication": ("user.yaml", lambda spec: spec.pop("authentication")),
    "acl on a topic without a name": ("user.yaml", lambda spec: spec["authorization"]["acls"][0]["resource"].pop(
        "name")),
    "acl operation unknown": ("user.yaml", lambda spec: spec["authorization"]["acls"][0].update(
        operations=["Fly"])),
    "add-brokers without brokers": ("rebalance.yaml", lambda spec: spec.pop("brokers")),
    "rebalance mode unknown": ("rebalance.yaml", lambda spec: spec.update(mode="partial")),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_crd_schema_rejects_invalid_resource(case):
    name, change = INVALID[case]
    assert errors(changed(name, change)), f"{case} was accepted"


def test_crd_schema_accepts_quoted_off_and_a_cluster_acl_without_name():
    assert errors(changed("cluster.yaml", lambda spec: spec.update(balancer=yaml.safe_load("mode: 'off'")))) == []
    assert errors(changed("cluster.yaml", lambda spec: spec.pop("authorization"))) == []
    assert errors(changed("cluster.yaml", lambda spec: spec["authorization"].pop("superUsers"))) == []
    full = changed("rebalance.yaml", lambda spec: (spec.pop("brokers"), spec.update(mode="full")))
    assert errors(full) == []
    assert errors({**full, "spec": {}}) == []


def test_every_operator_owned_setting_is_refused():
    for key in OPERATOR_OWNED_CONFIG:
        assert errors(changed("cluster.yaml", lambda spec, key=key: spec["config"].update({key: "x"}))), key


def test_cluster_name_must_start_service_names():
    cluster = load_example("cluster.yaml")
    cluster["metadata"]["name"] = "1st-cluster"
    assert errors(cluster)
    cluster["metadata"]["name"] = "first-cluster"
    assert errors(cluster) == []


def test_the_crd_refuses_the_settings_the_operator_core_owns():
    from odradek.operator.cluster_spec import OPERATOR_OWNED

    assert set(OPERATOR_OWNED_CONFIG) == set(OPERATOR_OWNED)


def test_example_status_fields_validate():
    cluster = load_example("cluster.yaml")
    cluster["status"] = {
        "observedGeneration": 2, "clusterId": "MkU3OEVBNTcwNTJENDM2Qg", "readyNodes": 3,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
                        "lastTransitionTime": "2025-01-01T00:00:00Z"}],
        "listeners": [{"name": "plain", "type": "internal",
                       "bootstrapServers": "my-cluster-bootstrap.default.svc:9092"}],
        "nodeIds": {"combined": [0, 1, 2]},
    }
    assert errors(cluster) == []
    rebalance = load_example("rebalance.yaml")
    rebalance["status"] = {"conditions": [{"type": "ProposalReady", "status": "True"}], "executionId": "e-1",
                           "optimizationResult": {"numReplicaMovements": 12, "dataToMoveMB": 40,
                                                  "excludedTopics": []}}
    assert errors(rebalance) == []
    rebalance["status"]["conditions"][0]["type"] = "Done"
    assert errors(rebalance)


# --- (e) the image ------------------------------------------------------------------------------------------

def dockerfile_instructions() -> dict[str, list[str]]:
    instructions: dict[str, list[str]] = {}
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.setdefault(keyword, []).append(rest.strip())
    return instructions


def test_image_runs_the_same_node_command_as_the_operators_pods():
    instructions = dockerfile_instructions()
    [entrypoint] = instructions["ENTRYPOINT"]
    [cmd] = instructions["CMD"]
    assert json.loads(entrypoint) + json.loads(cmd) == NODE_COMMAND
    assert NODE_COMMAND == ["odradek", "server", "--config", "/etc/odradek/server.properties"]
    assert NODE_COMMAND[-1] == CONFIG_PATH


def test_image_is_small_and_runs_as_a_non_root_user():
    instructions = dockerfile_instructions()
    assert instructions["FROM"] == ["python:3.11-slim"]
    assert instructions["USER"] == ["1000:1000"]
    assert instructions["STOPSIGNAL"] == ["SIGTERM"]
    assert set(instructions["EXPOSE"][0].split()) == {"9092", "9090", "9091", "9644"}
    assert any("pip install --no-cache-dir ." in run for run in instructions["RUN"])
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", ".git", "data", ".pytest_cache", ".hypothesis"} <= set(ignored)


def test_image_reference_is_the_package_version():
    assert image("1.2.3") == "odradek/odradek:1.2.3"
    assert image() == f"odradek/odradek:{package_version()}", "reinstall the package: pip install -e ."
    assert crds_module.API_VERSION == "odradek.io/v1beta1"
