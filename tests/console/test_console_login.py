"""Access control: with a SASL connection people log in with their own cluster credentials, and the cluster's
ACLs decide what each of them sees and may do. A node with a SASL_PLAINTEXT listener (PLAIN users from its JAAS
config, SCRAM users from the metadata log) and Kafka's StandardAuthorizer; the console started with only the
connection's security in --command-config."""

from __future__ import annotations

import re
import time

from tests.console.harness import ADMIN, ADMIN_PASSWORD, BOB, BOB_PASSWORD, Browser, ConsoleProcess


def log_in(browser: Browser, user: str, password: str, mechanism: str) -> tuple[int, str, str]:
    browser.get("/login")
    return browser.post("/login", {"username": user, "password": password, "mechanism": mechanism, "next": "/topics"})


def eventually(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def topic_names(html: str) -> list[str]:
    return re.findall(r'class="topic-link">([^<]+)</a>', html)


def test_people_log_in_as_cluster_users_and_see_what_their_acls_allow(secured_node, tmp_path):
    config = tmp_path / "console.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\n")
    console = ConsoleProcess(secured_node.bootstrap, tmp_path / "console.log",
                             ("--command-config", str(config))).wait_ready()
    try:
        admin = Browser(console.url)
        # Nobody gets in without logging in; the login form offers the mechanisms the console speaks.
        status, final, body = admin.get("/topics")
        assert final.endswith("/login?next=%2Ftopics") and 'name="password"' in body
        assert admin.get_json_status("/api/group?id=x") == 401
        # A wrong password is refused by the cluster itself.
        status, _, body = log_in(admin, ADMIN, "wrong", "PLAIN")
        assert status == 401 and "login failed" in body
        # The right one: in, with a fresh session id.
        cookie_before = {c.name: c.value for c in admin.jar}
        status, final, body = log_in(admin, ADMIN, ADMIN_PASSWORD, "PLAIN")
        assert status == 200 and final.endswith("/topics") and f"logged in as {ADMIN}" in body
        assert {c.name: c.value for c in admin.jar} != cookie_before
        # A form without the session's CSRF token is refused.
        status, _, _ = admin.post("/topics", {"name": "forged"}, csrf=False)
        assert status == 403
        # The admin (a super user) creates a topic and a SCRAM user in the console.
        status, _, body = admin.post("/topics", {"name": "secret", "partitions": "1"})
        assert status == 200 and "Created topic secret" in body
        admin.get("/security")
        status, _, body = admin.post("/security/users", {"user": "carol", "password": "carol-secret",
                                                         "mechanism": "SCRAM-SHA-256", "iterations": "4096"})
        assert status == 200 and "Set the SCRAM-SHA-256 credential of carol" in body
        assert re.search(r"<td>carol</td><td>SCRAM-SHA-256</td>", body)

        # Bob may see nothing yet.
        bob = Browser(console.url)
        status, _, body = log_in(bob, BOB, BOB_PASSWORD, "PLAIN")
        assert status == 200 and f"logged in as {BOB}" in body
        assert "secret" not in topic_names(body)
        # The admin allows bob to describe the topic; bob sees it, and still cannot delete it.
        admin.get("/security")
        status, _, body = admin.post("/security/acls", {"resource": "TOPIC", "name": "secret", "pattern": "LITERAL",
                                                        "principal": f"User:{BOB}", "host": "*",
                                                        "operation": "DESCRIBE", "permission": "ALLOW"})
        assert status == 200 and "Added: ALLOW User:bob DESCRIBE on TOPIC secret" in body
        assert "User:bob" in body
        # (the console keeps metadata for 2 s, and the binding reaches the authorizer through the metadata log)
        assert eventually(lambda: "secret" in topic_names(bob.get("/topics")[2]))
        bob.get("/topics/secret")
        status, _, body = bob.post("/topics/secret/delete", {"confirm": "secret"})
        assert "cannot delete topic" in body and "authorization failed" in body.lower()

        # Carol logs in with SCRAM-SHA-256, the credential the admin made a moment ago.
        carol = Browser(console.url)
        status, _, body = log_in(carol, "carol", "carol-secret", "SCRAM-SHA-256")
        assert status == 200 and "logged in as carol" in body

        # Logging out ends the session.
        status, final, _ = bob.post("/logout", {})
        assert final.endswith("/login")
        status, final, _ = bob.get("/topics")
        assert "/login" in final
    finally:
        console.stop()
