"""Cluster links through the console a destination node serves: the REST API (`/api/links...`, JSON in and out,
used as a script uses it: no session, no CSRF token) agrees with `odradek links`, answers bad requests with
their HTTP status and one line, and the Links pages list, show, create and delete links through their forms."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import free_port
from tests.console.harness import Browser
from tests.links.test_cluster_links import links, partitions_equal, produce_mixed
from tests.sql.server_process import wait_for


class RestClient:
    """JSON requests to the console's REST API."""

    def __init__(self, base: str):
        self.base = base

    def request(self, method: str, path: str, body: object = None, content_type: str = "application/json"
                ) -> tuple[int, object]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": content_type} if data is not None else {})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def ok(self, method: str, path: str, body: object = None) -> object:
        status, answer = self.request(method, path, body)
        assert status in (200, 201), (method, path, status, answer)
        return answer


def destination_with_console(node_factory):
    http_port = free_port()
    node = node_factory({"metrics.listener": f"http://127.0.0.1:{http_port}"}, name="destination")
    return node, f"http://127.0.0.1:{http_port}"


def assert_refused(answer: tuple[int, object], status: int, words: str) -> None:
    """An error of the REST API: this status, in the body too, and one line that says `words`."""
    code, body = answer
    assert code == status and body["error_code"] == status, answer
    assert words in body["message"] and "\n" not in body["message"], answer


def cli_json(bootstrap: str, *argv: str) -> object:
    result = links(bootstrap, *argv, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_link_managed_through_the_rest_api_as_the_cli_sees_it(node_factory):
    source = node_factory(name="source")
    destination, console = destination_with_console(node_factory)
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
    produce_mixed(source.bootstrap, "orders", "rest")
    api = RestClient(console)

    created = api.request("POST", "/api/links", {"name": "dc1", "source_bootstrap": source.bootstrap,
                                                 "topics": ["ord.*"], "groups": "app.*"})
    assert created == (201, {"name": "dc1", "selected_topics": ["orders"]}), created
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 2),
                    what="the mirror to hold the source's batches")

    assert api.ok("GET", "/api/links") == cli_json(destination.bootstrap, "list") == [
        {"name": "dc1", "source": source.bootstrap, "topics": "ord.*", "state": "ACTIVE", "mirrors": 1,
         "promoted": 0}]
    described = api.ok("GET", "/api/links/dc1")
    assert described == cli_json(destination.bootstrap, "describe", "dc1")
    assert (described["groups"], described["sync_configs"], described["sync_acls"]) == (["app.*"], False, False)
    assert [(p["topic"], p["partition"], p["state"], p["lag"]) for p in described["partitions"]] == [
        ("orders", 0, "ACTIVE", 0), ("orders", 1, "ACTIVE", 0)]
    assert all(p["source_end"] == p["mirror_end"] > 0 for p in described["partitions"])

    # the console's pages show the same
    browser = Browser(console)
    status, _, page = browser.get("/links")
    assert status == 200 and 'class="link-name">dc1</a>' in page and f"<td>{source.bootstrap}</td>" in page
    status, _, page = browser.get("/links/dc1")
    assert status == 200 and '<span id="link-state">ACTIVE</span>' in page
    assert len(re.findall(r"<td>ACTIVE</td><td>[\d,]+</td><td>[\d,]+</td><td>0</td>", page)) == 2, page

    assert api.ok("POST", "/api/links/dc1/pause", {}) == {"name": "dc1", "paused": True}
    assert api.ok("GET", "/api/links/dc1")["paused"] is True
    assert cli_json(destination.bootstrap, "list")[0]["state"] == "PAUSED"
    assert api.ok("POST", "/api/links/dc1/resume", {}) == {"name": "dc1", "paused": False}
    assert api.ok("GET", "/api/links")[0]["state"] == "ACTIVE"

    assert_refused(api.request("DELETE", "/api/links/dc1"), 409, "promote or delete them first")
    assert_refused(api.request("POST", "/api/links/dc1/promote", {"topics": ["payments"]}), 400,
                   "not an active mirror topic of link dc1: payments")

    promoted = api.ok("POST", "/api/links/dc1/promote", {"topics": ["orders"]})
    assert promoted == {"name": "dc1", "topics": ["orders"], "warnings": []}, promoted
    # every node applied the promotion before the answer: the first write is taken, after the mirrored records
    delivered = []
    producer = Producer({"bootstrap.servers": destination.bootstrap})
    producer.produce("orders", b"after promotion", partition=0,
                     on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert delivered == [(None, described["partitions"][0]["mirror_end"])], delivered
    assert api.ok("GET", "/api/links") == [{"name": "dc1", "source": source.bootstrap, "topics": "ord.*",
                                            "state": "ACTIVE", "mirrors": 0, "promoted": 1}]

    assert api.ok("DELETE", "/api/links/dc1") == {"name": "dc1", "deleted": True}
    assert api.ok("GET", "/api/links") == []


def test_bad_requests_get_their_status_and_one_line_and_create_nothing(node_factory):
    node, console = destination_with_console(node_factory)
    api = RestClient(console)
    good = {"name": "l1", "source_bootstrap": node.bootstrap, "topics": ["x"]}
    for body, status, words in (
        ({**good, "name": "bad name"}, 400, "link name 'bad name'"),
        ({**good, "topics": ["x("]}, 400, "pattern 'x('"),
        ({**good, "source_bootstrap": "nowhere"}, 400, "source bootstrap"),
        ({**good, "topics": []}, 400, "at least one topic pattern"),
        ({**good, "topics": [1]}, 400, "topics: expected a list of strings"),
        ({**good, "sync_acl": True}, 400, "unknown field sync_acl"),
        ({**good, "source_config": {"security.protocol": 1}}, 400, "source_config"),
        ({key: value for key, value in good.items() if key != "name"}, 400, "name: required"),
        (b"{not json", 400, "the body is not JSON"),
        (b"[]", 400, "a JSON object"),
    ):
        assert_refused(api.request("POST", "/api/links", body), status, words)
    # the body a cross-site form could send, without the session's CSRF token
    assert_refused(api.request("POST", "/api/links", json.dumps(good).encode(), content_type="text/plain"), 403,
                   "application/json")
    for method, path in (("GET", "/api/links/nope"), ("POST", "/api/links/nope/pause"),
                         ("POST", "/api/links/nope/promote"), ("DELETE", "/api/links/nope")):
        assert_refused(api.request(method, path, {} if method == "POST" else None), 404, "no link named nope")
    assert api.ok("GET", "/api/links") == []
    assert "__cluster_links" not in AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10).topics

    # the Links page of a cluster without links: it says so, and its form creates one (here a link of the cluster
    # to itself that mirrors nothing), with the session's CSRF token
    browser = Browser(console)
    status, _, page = browser.get("/links")
    assert status == 200 and '<p class="empty" id="links">no links</p>' in page and 'id="create-link-form"' in page
    status, final, page = browser.post("/links", {"name": "from-form", "source_bootstrap": node.bootstrap,
                                                  "topics": "nothing-.*, none", "sync_acls": "1",
                                                  "source_config": "client.id = console-test\n"})
    assert status == 200 and final.endswith("/links/from-form"), (final, page)
    assert "Created link from-form: 0 source topics selected now" in page and "no mirror topics yet" in page
    described = api.ok("GET", "/api/links/from-form")
    assert (described["topics"], described["sync_acls"], described["sync_configs"]) == (["nothing-.*", "none"],
                                                                                        True, False)
    # a form the links refuse says why
    status, final, page = browser.post("/links", {"name": "from-form", "source_bootstrap": node.bootstrap,
                                                  "topics": "x"})
    assert "link from-form already exists" in page
    # the CLI's --sync-acls
    assert links(node.bootstrap, "create", "from-cli", "--source-bootstrap", node.bootstrap, "--topics", "none",
                 "--sync-acls").returncode == 0
    assert cli_json(node.bootstrap, "describe", "from-cli")["sync_acls"] is True

    browser.get("/links/from-form")
    status, final, page = browser.post("/links/from-form/delete", {})
    assert status == 200 and final.endswith("/links") and "Deleted link from-form" in page
    assert [row["name"] for row in api.ok("GET", "/api/links")] == ["from-cli"]
