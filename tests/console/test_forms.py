"""The console's pure form handling: offset-reset planning, plans carried to the apply form, the message browser's
query, settings from the command line and from a node's listeners, chart samples."""

import pytest

from odradek.cli.groups import ResetInputs, reset_plan
from odradek.config import BrokerConfig
from odradek.console.cluster import ConsoleError
from odradek.console.pages import format_plan, key_values, parse_browse, parse_plan, reset_spec
from odradek.console.sampler import Series, group_lag, growth_rates
from odradek.console.settings import LOGIN_MECHANISMS, from_node_config, from_properties


def test_reset_targets_parse_like_the_cli():
    assert reset_spec("earliest", "").kind == "earliest"
    assert reset_spec("offset", " 12 ").value == 12
    assert reset_spec("shift", "-3").value == -3
    assert reset_spec("timestamp", "1700000000000").value == 1_700_000_000_000
    assert reset_spec("timestamp", "2024-01-01T00:00:00Z").value == 1_704_067_200_000
    for to, value in (("offset", ""), ("offset", "-1"), ("shift", "x"), ("timestamp", "yesterday"), ("nowhere", "")):
        with pytest.raises(ConsoleError):
            reset_spec(to, value)


def test_reset_plan_preview_then_apply_carries_exactly_the_plan():
    partitions = [("orders", 0), ("orders", 1)]
    inputs = ResetInputs({("orders", 0): 5, ("orders", 1): 9}, {("orders", 0): (2, 10), ("orders", 1): (0, 20)})
    plan = reset_plan(partitions, reset_spec("shift", "-4"), inputs)
    assert [(e.current_offset, e.new_offset) for e in plan] == [(5, 2), (9, 5)]  # clamped at the log start
    assert parse_plan(format_plan(plan)) == {("orders", 0): 2, ("orders", 1): 5}
    latest = reset_plan(partitions, reset_spec("latest", ""), inputs)
    assert parse_plan(format_plan(latest)) == {("orders", 0): 10, ("orders", 1): 20}


def test_plans_that_do_not_parse_are_refused():
    for bad in ("", "orders:0", "orders:x:1", ":0:1", "orders:0:-1"):
        with pytest.raises(ConsoleError):
            parse_plan(bad)


def test_browse_query_defaults_and_checks():
    q = parse_browse({}, 3)
    assert q.partition is None and q.newest_first and q.page_size == 50 and not q.record_filter.active
    q = parse_browse({"partition": "2", "start": "offset", "offset": "7", "q": "abc", "field": "key",
                      "path": "$.a == 1", "format": "hex", "size": "20", "cursor": "2:9"}, 3)
    assert (q.partition, q.offset, q.format, q.page_size, q.positions) == (2, 7, "hex", 20, {2: 9})
    assert q.record_filter.active and "cursor" not in q.params
    assert parse_browse({}, 10_000).partition == 0  # too many partitions to merge: the first one
    for bad in ({"partition": "3"}, {"start": "sideways"}, {"start": "offset"}, {"path": "user"},
                {"format": "xml"}, {"size": "0"}, {"cursor": "x"}, {"start": "timestamp", "timestamp": "soon"}):
        with pytest.raises(ConsoleError):
            parse_browse(bad, 3)


def test_key_value_lines():
    assert key_values("a=1\n\n b = x=y \n", "configs") == [("a", "1"), ("b", " x=y ")]
    with pytest.raises(ConsoleError):
        key_values("novalue", "headers")


def test_settings_from_the_command_line():
    plain = from_properties("h:1", {})
    assert not plain.login_required and plain.client_properties() == {}
    sasl = from_properties("h:1", {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                   "sasl.username": "admin", "sasl.password": "secret", "ssl.ca.location": "/ca"})
    assert sasl.login_mechanisms == ("SCRAM-SHA-512",)
    assert "sasl.username" not in sasl.properties and "sasl.password" not in sasl.properties
    props = sasl.client_properties("alice", "pw")
    assert props["sasl.username"] == "alice" and props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["ssl.ca.location"] == "/ca"
    assert from_properties("h:1", {"security.protocol": "sasl_plaintext"}).login_mechanisms == LOGIN_MECHANISMS
    gssapi = from_properties("h:1", {"security.protocol": "sasl_plaintext", "sasl.mechanism": "GSSAPI"})
    assert gssapi.login_required and not gssapi.login_mechanisms and "GSSAPI" in gssapi.note


def test_settings_from_a_node_use_its_client_listener():
    config = BrokerConfig({"listeners": "PLAINTEXT://:19092,CONTROLLER://127.0.0.1:19093", "log.dirs": "/tmp/x"})
    settings = from_node_config(config)
    assert settings.bootstrap == "127.0.0.1:19092" and not settings.login_required
    secured = BrokerConfig({
        "listeners": "SECURE://127.0.0.1:19094,CONTROLLER://127.0.0.1:19095", "log.dirs": "/tmp/x",
        "listener.security.protocol.map": "SECURE:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"})
    settings = from_node_config(secured)
    assert settings.bootstrap == "127.0.0.1:19094"
    assert settings.login_mechanisms == ("SCRAM-SHA-256", "PLAIN")
    assert settings.properties["security.protocol"] == "sasl_plaintext"


def test_rates_and_lag_from_samples():
    assert growth_rates({"a": 10, "b": 50, "gone": 3}, {"a": 30, "b": 20, "new": 9}, 2.0) == {"a": 10.0, "b": 0.0}
    assert growth_rates({"a": 1}, {"a": 2}, 0) == {}
    assert group_lag({("t", 0): 5, ("t", 1): 12, ("u", 0): 1}, {("t", 0): 10, ("t", 1): 10}) == 5
    series = Series(limit=3)
    for i in range(5):
        series.add(float(i), float(i * i))
    assert series.values() == [(2.0, 4.0), (3.0, 9.0), (4.0, 16.0)] and series.last == 16.0


def test_records_render_escaped_whatever_they_hold():
    from odradek.console.messages import Record
    from odradek.console.pages import records_table

    evil = b'<img src=x onerror="alert(1)">'
    out = records_table([Record(0, 1, 0, evil, b'{"x": "</pre><script>1</script>"}', (("<h>", evil),))], "auto")
    assert "<img" not in out and "<script>" not in out and "<h>" not in out
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in out
    assert 'id="no-records"' in records_table([], "auto")


def test_console_command_listen_addresses():
    import argparse

    from odradek.cli.console import listen_address
    from odradek.console.web import is_loopback

    assert listen_address("http://127.0.0.1:9645") == ("127.0.0.1", 9645)
    assert listen_address("0.0.0.0:0") == ("0.0.0.0", 0)
    assert listen_address("http://[::1]:8080/") == ("::1", 8080)
    for bad in ("https://127.0.0.1:1", "http://127.0.0.1", "http://h:1/console", "nonsense"):
        with pytest.raises(argparse.ArgumentTypeError):
            listen_address(bad)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")
