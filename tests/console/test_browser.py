"""The console in headless Chromium (Selenium), against a real node: create a topic, produce a record, find it by
a value filter, watch a consumer group's lag rise and fall, reset its offsets (dry run, then apply), delete the
topic. A screenshot of every page visited goes to test-artifacts/console/ at the repository's root."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.conftest import free_port
from tests.console.harness import ADMIN, ADMIN_PASSWORD, ConsoleProcess, register_schema
from tests.registry.conftest import wait_until_serving

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
DEADLINE = 90  # seconds a page may take to show what a step waits for

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason="headless Chromium is not installed (Debian's chromium and chromium-driver: make system-deps)")


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """The screenshot directory, emptied of the previous run's."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*"):
        if old.is_file():
            old.unlink()
    return ARTIFACTS


class Walk:
    """A Chromium session that screenshots every page it visits, numbered in the order visited."""

    def __init__(self, base: str, prefix: str):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1600",
                         "--disable-gpu"):
            options.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.base = base
        self.prefix = prefix
        self.shots = 0

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def shot(self, name: str) -> Path:
        self.shots += 1
        path = ARTIFACTS / f"{self.prefix}-{self.shots:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def element(self, css: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def wait(self, condition, what: str):
        """Until condition(driver) is true: the page's own refreshes replace elements under our feet."""
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, DEADLINE, poll_frequency=0.25,
                                 ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
                                 ).until(condition)
        except Exception:
            self.shot(f"failed-{what.replace(' ', '-')[:40]}")
            (ARTIFACTS / f"{self.prefix}-failed-page.html").write_text(self.driver.page_source)
            raise

    def wait_text(self, css: str, expected: str, what: str) -> None:
        self.wait(lambda d: self.element(css).text.strip() == expected, what)

    def wait_shown(self, count: int, what: str) -> None:
        """The message browser's summary: 'N shown; M records read (...)'."""
        self.wait(lambda d: self.element("#scan-summary").text.startswith(f"{count} shown;"), what)

    def wait_contains(self, css: str, expected: str, what: str) -> None:
        self.wait(lambda d: expected in self.element(css).text, what)

    def fill(self, css: str, text: str) -> None:
        field = self.element(css)
        field.clear()
        field.send_keys(text)

    def choose(self, css: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.element(css)).select_by_value(value)

    def click(self, css: str) -> None:
        self.element(css).click()

    def quit(self) -> None:
        self.driver.quit()


def consume(consumer: Consumer, count: int, timeout: float = 60.0) -> int:
    """Poll until `count` records came, then commit them synchronously."""
    got = 0
    deadline = time.monotonic() + timeout
    while got < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    assert got == count, f"consumed {got} of {count} records"
    consumer.commit(asynchronous=False)
    return got


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def topic_config(admin: AdminClient, topic: str, name: str) -> tuple[str, str]:
    """(value, source) of one config of the topic, as the admin client describes it."""
    from confluent_kafka.admin import ConfigResource, ConfigSource

    resource = ConfigResource("topic", topic)
    entry = admin.describe_configs([resource])[resource].result(30)[name]
    return entry.value, ConfigSource(entry.source).name


def test_walk_topic_produce_browse_group_lag_reset_delete(node_factory, tmp_path, artifacts):
    node = node_factory({"group.initial.rebalance.delay.ms": "0"})
    console = ConsoleProcess(node.bootstrap, tmp_path / "console.log").wait_ready()
    walk = Walk(console.url, "walk")
    topic, group = "console-walk", "console-walk-group"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    consumer = None
    try:
        # The overview: one node, its controller, quorum and disks.
        walk.open("/")
        walk.wait_text("#broker-count", "1", "overview shows the node")
        walk.wait(lambda d: "Metadata quorum" in d.page_source, "overview shows the quorum")
        walk.shot("overview")

        # Create a topic of two partitions in the UI.
        walk.open("/topics")
        walk.wait(lambda d: walk.element("#create-topic-form"), "topics page")
        walk.shot("topics-empty")
        walk.fill("#new-topic-name", topic)
        walk.fill("#new-topic-partitions", "2")
        walk.click("#create-topic")
        walk.wait_text("#partition-total", "2", "the new topic's page")
        walk.wait(lambda d: len(d.find_elements("css selector", "#partitions tbody tr")) == 2, "two partitions")
        walk.shot("topic-created")
        walk.open("/topics")
        walk.wait(lambda d: topic in walk.element("#topics").text, "the topic in the list")
        walk.shot("topics-list")

        # Produce a record in the UI, to partition 1.
        walk.open(f"/topics/{topic}/produce")
        walk.fill("#produce-key", "order-1")
        walk.fill("#produce-value", json.dumps({"greeting": "hello from the console", "n": 1}))
        walk.fill("#produce-headers", "source=ui")
        walk.choose("#produce-partition", "1")
        walk.shot("produce-form")
        walk.click("#produce-submit")
        walk.wait(lambda d: "Produced a record to partition 1 at offset 0" in d.page_source, "produced")
        walk.shot("produced")

        # Find it in the message browser by a value filter (and not by one that does not match).
        producer = Producer({"bootstrap.servers": node.bootstrap})
        for i in range(30):
            producer.produce(topic, key=f"k{i}".encode(), value=f"filler {i}".encode(), partition=i % 2)
        producer.flush(30)
        walk.open(f"/topics/{topic}/messages")
        walk.wait_shown(31, "all 31 records newest first")
        walk.fill("#browse-filter", "hello from the console")
        walk.choose("#browse-field", "value")
        walk.click("#browse-submit")
        walk.wait_shown(1, "one record matches the value filter")
        walk.wait_contains("#messages", "hello from the console", "the record in the table")
        assert "source: ui" in walk.element("#messages").text
        assert "order-1" in walk.element("#messages").text
        walk.shot("message-found")
        walk.open(f"/topics/{topic}/messages?path=%24.n+%3D%3D+2")
        walk.wait_shown(0, "a JSON path that matches nothing")
        walk.shot("message-json-path-no-match")

        # A real consumer group reads everything: lag 0.
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "max.poll.interval.ms": 600000})
        consumer.subscribe([topic])
        consume(consumer, 31)
        walk.open(f"/group?id={group}")
        walk.wait_text("#group-state", "Stable", "the group is stable")
        walk.wait_text("#group-lag", "0", "no lag")
        walk.shot("group-caught-up")

        # Produce more: the lag rises on the page, which refreshes itself.
        for i in range(40):
            producer.produce(topic, value=f"more {i}".encode(), partition=i % 2)
        producer.flush(30)
        walk.wait_text("#group-lag", "40", "lag rises to 40")
        walk.shot("group-lag-risen")

        # Consume them: the lag falls back to 0, and the chart has drawn the climb.
        consume(consumer, 40)
        walk.wait_text("#group-lag", "0", "lag falls to 0")
        walk.wait(lambda d: d.find_elements("css selector", "#lag-chart polyline"), "the lag chart")
        walk.shot("group-lag-fallen")

        # Stop the consumer: the group empties; a dry run shows the plan and changes nothing.
        consumer.close()
        consumer = None
        walk.wait_text("#group-state", "Empty", "the group is empty")
        walk.choose("#reset-to", "earliest")
        walk.click("#reset-preview")
        walk.wait(lambda d: walk.element("#dry-run"), "the dry run")
        rows = [r.text for r in walk.driver.find_elements("css selector", "#reset-plan tbody tr")]
        assert len(rows) == 2 and all(f"{topic} " in row for row in rows), rows
        assert committed(admin, group) == {0: 35, 1: 36}  # the preview committed nothing
        walk.shot("reset-dry-run")
        walk.click("#reset-apply")
        walk.wait(lambda d: "Reset the offsets of 2 partitions" in d.page_source, "the reset applied")
        walk.wait_text("#group-lag", "71", "the whole topic is lag again")
        assert committed(admin, group) == {0: 0, 1: 0}
        walk.shot("reset-applied")

        # The other pages render against a plain node.
        for path, name, marker in (("/groups", "groups", group), ("/transactions", "transactions", 'id="transactions"'),
                                   ("/quorum", "quorum", 'id="voters"'), ("/security", "acls-and-users", "no authorizer"),
                                   (f"/topics/{topic}", "topic-before-delete", 'id="configs"')):
            walk.open(path)
            walk.wait(lambda d: d.find_elements("css selector", "main h1"), f"{name} page")
            assert marker in walk.driver.page_source, walk.element("main").text
            walk.shot(name)

        # Edit a config in place, then reset it to its default; add a partition.
        def config_form(name: str):
            return walk.driver.find_element("xpath", f"//form[input[@name='name' and @value='{name}']]")

        value = config_form("retention.ms").find_element("css selector", "input[name='value']")
        value.clear()
        value.send_keys("3600000")
        config_form("retention.ms").find_element("css selector", "button[value='set']").click()
        walk.wait(lambda d: "Set retention.ms=3600000" in d.page_source, "the config set")
        assert topic_config(admin, topic, "retention.ms") == ("3600000", "DYNAMIC_TOPIC_CONFIG")
        walk.shot("config-set")
        config_form("retention.ms").find_element("css selector", "button[value='delete']").click()
        walk.wait(lambda d: "retention.ms is back to its default" in d.page_source, "the config reset")
        assert topic_config(admin, topic, "retention.ms")[1] != "DYNAMIC_TOPIC_CONFIG"
        walk.fill("#partition-count-input", "3")
        walk.driver.find_element("xpath", "//button[text()='Add partitions']").click()
        walk.wait(lambda d: f"{topic} now has 3 partitions" in d.page_source, "the partition added")
        walk.wait_text("#partition-total", "3", "three partitions on the page")
        walk.shot("partition-added")

        # Delete the group (the browser asks to confirm first).
        walk.open(f"/group?id={group}")
        walk.wait_text("#group-state", "Empty", "the group page again")
        walk.click("#delete-group")
        from selenium.webdriver.support import expected_conditions

        walk.wait(expected_conditions.alert_is_present(), "the browser asks to confirm").accept()
        walk.wait(lambda d: f"Deleted group {group}" in d.page_source, "the group deleted")
        assert group not in [g.group_id for g in admin.list_consumer_groups().result(30).valid]
        walk.shot("group-deleted")

        # Delete the topic: type its name to confirm.
        walk.open(f"/topics/{topic}")
        walk.wait(lambda d: walk.element("#delete-confirm"), "the topic page again")
        walk.fill("#delete-confirm", topic)
        walk.click("#delete-topic")
        walk.wait(lambda d: f"Deleted topic {topic}" in d.page_source, "the topic deleted")
        walk.shot("topic-deleted")

        def gone_from_the_list(driver) -> bool:
            driver.get(walk.base + "/topics")
            return topic not in walk.element("main").text

        walk.wait(gone_from_the_list, "the topic gone from the list")
        assert topic not in admin.list_topics(timeout=10).topics
    finally:
        if consumer is not None:
            consumer.close()
        walk.quit()
        console.stop()
    assert len(list(artifacts.glob("walk-*.png"))) == walk.shots >= 18


def test_the_console_a_node_serves_in_the_browser(node_factory, artifacts):
    http_port, registry_url = free_port(), f"http://127.0.0.1:{free_port()}"
    node = node_factory({"metrics.listener": f"http://127.0.0.1:{http_port}", "schema.registry.listener": registry_url})
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("served", 3, 1)])["served"].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(12):
        producer.produce("served", value=json.dumps({"i": i, "even": i % 2 == 0}).encode(), partition=i % 3)
    producer.flush(30)
    walk = Walk(f"http://127.0.0.1:{http_port}", "node")
    try:
        walk.open("/")
        walk.wait_text("#broker-count", "1", "the node's console overview")

        def writing_shows_in_the_chart(driver) -> bool:
            for i in range(50):
                producer.produce("served", value=json.dumps({"i": 1000 + i, "even": False}).encode(),
                                 partition=i % 3)
            producer.flush(30)
            rate, bytes_in = walk.element("#records-in").text, walk.element("#bytes-in").text
            return (rate not in ("measuring…", "0.0/s") and bytes_in not in ("measuring…", "0 B/s")
                    and driver.find_elements("css selector", "#throughput-chart polyline")
                    and driver.find_elements("css selector", "#bytes-chart polyline"))

        walk.wait(writing_shows_in_the_chart, "records/s and bytes/s in the overview")
        walk.shot("overview")
        walk.open("/topics/served")
        walk.wait_text("#partition-total", "3", "the topic page")
        walk.shot("topic")
        walk.open("/topics/served/messages?path=%24.even+%3D%3D+true&format=json")
        walk.wait_shown(6, "six even records")  # out of the 12, and the many odd ones written for the chart
        walk.shot("messages-json-path")
        walk.click("#live-tail")
        walk.wait_contains("#tail-status", "live", "the tail runs")
        producer.produce("served", value=json.dumps({"i": 99, "even": True}).encode(), partition=0)
        producer.flush(30)
        walk.wait(lambda d: d.find_elements("css selector", "#messages tr.fresh"), "the tailed record")
        assert '"i": 99' in walk.element("#messages tr.fresh").text
        walk.shot("messages-live-tail")

        # The node's schema registry: a subject of two versions, its schema and the diff.
        wait_until_serving(registry_url)
        fields = [{"name": "i", "type": "int"}]
        register_schema(registry_url, "served-value", {"type": "record", "name": "Served", "fields": fields})
        register_schema(registry_url, "served-value", {"type": "record", "name": "Served", "fields": [
            *fields, {"name": "even", "type": "boolean", "default": False}]})
        walk.open("/schemas")
        walk.wait_contains("#subjects", "served-value", "the subjects")
        walk.shot("schemas")
        walk.click("a.subject-link")
        walk.wait_contains("#schema-text", '"name": "even"', "the latest schema")
        assert any('"even"' in e.text for e in walk.driver.find_elements("css selector", "#schema-diff .add"))
        walk.shot("schema")
    finally:
        walk.quit()


def test_logging_in_to_a_sasl_cluster_in_the_browser(secured_node, tmp_path, artifacts):
    config = tmp_path / "console.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\n")
    console = ConsoleProcess(secured_node.bootstrap, tmp_path / "console.log",
                             ("--command-config", str(config))).wait_ready()
    walk = Walk(console.url, "login")
    try:
        walk.open("/topics")
        walk.wait(lambda d: "/login" in d.current_url and walk.element("#password"), "the login form")
        walk.shot("form")
        walk.fill("#username", ADMIN)
        walk.fill("#password", "not the password")
        walk.choose("select[name=mechanism]", "PLAIN")
        walk.click("#login")
        walk.wait(lambda d: "login failed" in d.page_source, "a refused login")
        walk.shot("refused")
        walk.fill("#password", ADMIN_PASSWORD)
        walk.choose("select[name=mechanism]", "PLAIN")
        walk.click("#login")
        walk.wait(lambda d: f"logged in as {ADMIN}" in d.page_source and d.current_url.endswith("/topics"),
                  "logged in, back at the topics")
        walk.shot("logged-in")
        walk.click("#logout")
        walk.wait(lambda d: "/login" in d.current_url, "logged out")
    finally:
        walk.quit()
        console.stop()
