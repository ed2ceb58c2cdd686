"""Settings spec.config and a pool's config cannot give: besides the operator's own keys, every per-listener
setting of its CONTROLLER and REPLICATION listeners (their mutual TLS) and the principal mapping rules, on which
super.users and OdradekUsers' ACLs rely."""

import copy

import pytest

from odradek.operator.cluster_spec import SpecError, parse_cluster
from tests.operator.test_certificates import CLUSTER


def with_config(key, pool=False):
    resource = copy.deepcopy(CLUSTER)
    holder = resource["spec"]["nodePools"][0] if pool else resource["spec"]
    holder["config"] = {key: "x"}
    return resource


@pytest.mark.parametrize(("key", "why"), [
    ("listener.name.replication.ssl.client.auth", "the operator sets the replication listener's settings itself"),
    ("listener.name.replication.ssl.truststore.location",
     "the operator sets the replication listener's settings itself"),
    ("listener.name.controller.ssl.client.auth", "the operator sets the controller listener's settings itself"),
    ("listener.name.controller.ssl.keystore.location",
     "the operator sets the controller listener's settings itself"),
    ("ssl.principal.mapping.rules", "ssl.principal.mapping.rules stays the default: super.users and OdradekUsers' "
                                    "ACLs name the principals it makes"),
    ("listener.name.external.ssl.principal.mapping.rules", "ssl.principal.mapping.rules stays the default: "
                                                           "super.users and OdradekUsers' ACLs name the principals "
                                                           "it makes"),
])
def test_settings_that_would_change_the_operators_listeners_or_the_principals_are_refused(key, why):
    for pool, path in ((False, "spec.config"), (True, r"spec.nodePools\[0\].config")):
        with pytest.raises(SpecError, match=rf"^{path}.{key}: {why}$") as refused:
            parse_cluster(with_config(key, pool))
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize("key", ["listener.name.external.ssl.cipher.suites", "ssl.cipher.suites",
                                 "listener.name.replicationx.ssl.cipher.suites"])
def test_other_listener_settings_are_left_to_the_spec(key):
    assert parse_cluster(with_config(key)).config == {key: "x"}
