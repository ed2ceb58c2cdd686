"""The console's reading of the nodes' own counters: Prometheus text parsed back, the /metrics URL made from a
node's metrics.listener, and bytes per second summed over nodes whose counters reset when they restart."""

from __future__ import annotations

import pytest

from odradek.console.node_metrics import (
    BYTES_IN,
    BYTES_OUT,
    MESSAGES_IN,
    NodeCounters,
    metrics_url,
    metrics_urls,
    parse_samples,
)
from odradek.console.sampler import Sampler
from odradek.metrics.registry import Registry


def test_samples_are_read_back_from_what_the_registry_renders():
    registry = Registry()
    counter = registry.counter(BYTES_IN, "Bytes in.", ("topic",))
    counter.labels("plain").inc(100)
    counter.labels('odd "quoted"\\name\nline').inc(5)
    registry.counter(BYTES_OUT, "Bytes out.").inc(42)
    registry.gauge("unrelated", "Not asked for.").set(1)
    samples = parse_samples(registry.render(), {BYTES_IN, BYTES_OUT})
    assert sorted(samples, key=repr) == sorted([
        (BYTES_IN, {"topic": "plain"}, 100.0),
        (BYTES_IN, {"topic": 'odd "quoted"\\name\nline'}, 5.0),
        (BYTES_OUT, {}, 42.0),
    ], key=repr)


def test_timestamps_and_label_spacing_are_accepted_and_garbage_is_refused():
    text = f'{MESSAGES_IN}{{ topic="a" , }} 12 1700000000000\n{MESSAGES_IN} +Inf\n'
    assert parse_samples(text, {MESSAGES_IN}) == [(MESSAGES_IN, {"topic": "a"}, 12.0),
                                                  (MESSAGES_IN, {}, float("inf"))]
    for bad in (f"{MESSAGES_IN} many", f'{MESSAGES_IN}{{topic=a}} 1', f'{MESSAGES_IN}{{topic="a}} 1'):
        with pytest.raises(ValueError, match="not a Prometheus sample"):
            parse_samples(bad, {MESSAGES_IN})


@pytest.mark.parametrize(("host", "listener", "url"), [
    ("10.0.0.5", "http://10.0.1.5:9644", "http://10.0.1.5:9644/metrics"),  # metrics on an address of their own
    ("127.0.0.1", "http://127.0.0.1:9644", "http://127.0.0.1:9644/metrics"),
    ("10.0.0.5", "http://0.0.0.0:9644", "http://10.0.0.5:9644/metrics"),
    ("10.0.0.5", "http://:9644/metrics", "http://10.0.0.5:9644/metrics"),
    ("fd00::5", "http://[::]:9644", "http://[fd00::5]:9644/metrics"),
])
def test_a_nodes_metrics_url_is_its_listener_with_wildcards_as_clients_reach_it(host, listener, url):
    assert metrics_url(host, listener) == url


@pytest.mark.parametrize(("listener", "reason"), [
    ("", "no metrics.listener"),
    ("http://127.0.0.1:0", "names no fixed port"),
    ("ftp://x:1", "expected http://host:port"),
])
def test_no_metrics_url_says_why(listener, reason):
    with pytest.raises(ValueError, match=reason):
        metrics_url("10.0.0.5", listener)


def reading(values: dict[int, dict], missing: dict[int, str] | None = None) -> NodeCounters:
    return NodeCounters({node: {(name, topic): v for (name, topic), v in counters.items()}
                         for node, counters in values.items()}, missing or {})


def test_byte_rates_sum_the_nodes_and_a_restarted_node_counts_zero_not_negative():
    sampler = Sampler(cluster=None, interval_s=5.0)  # add_byte_rates asks the cluster nothing
    sampler.add_byte_rates(reading({1: {(BYTES_IN, ""): 1000, (BYTES_IN, "t"): 1000, (BYTES_OUT, ""): 0,
                                        (MESSAGES_IN, ""): 9},
                                    2: {(BYTES_IN, ""): 500, (BYTES_IN, "t"): 500}}), 100.0)
    assert sampler.bytes_in.last is None  # one reading is no rate yet
    sampler.add_byte_rates(reading({1: {(BYTES_IN, ""): 3000, (BYTES_IN, "t"): 3000, (BYTES_OUT, ""): 400,
                                        (MESSAGES_IN, ""): 19},
                                    2: {(BYTES_IN, ""): 1500, (BYTES_IN, "t"): 1500}}), 110.0)
    assert sampler.bytes_in.last == (2000 + 1000) / 10
    assert sampler.bytes_out.last == 40
    assert sampler.topic_bytes_in == {"t": 300.0}
    # node 2 restarted: its counters start again from 0; node 1 went on
    sampler.add_byte_rates(reading({1: {(BYTES_IN, ""): 4000, (BYTES_IN, "t"): 4000, (BYTES_OUT, ""): 400},
                                    2: {(BYTES_IN, ""): 100, (BYTES_IN, "t"): 100}}), 120.0)
    assert sampler.bytes_in.last == 100.0
    assert sampler.topic_bytes_in == {"t": 100.0}
    assert sampler.byte_rates_note is None


def test_a_node_missed_once_is_left_out_with_a_note_then_counted_over_the_gap():
    sampler = Sampler(cluster=None, interval_s=5.0)
    sampler.add_byte_rates(reading({1: {(BYTES_IN, ""): 0}, 2: {(BYTES_IN, ""): 0}}), 100.0)
    sampler.add_byte_rates(reading({1: {(BYTES_IN, ""): 1000}}, {2: "http://n2:9644/metrics: no answer in time"}),
                           110.0)
    assert sampler.bytes_in.last == 100.0  # node 1 only, and the page says so
    assert sampler.byte_rates_note == "node 2: http://n2:9644/metrics: no answer in time"
    sampler.add_byte_rates(reading({1: {(BYTES_IN, ""): 2000}, 2: {(BYTES_IN, ""): 4000}}), 120.0)
    assert sampler.bytes_in.last == 100.0 + 4000 / 20  # node 2's growth over the 20 s since it was last read
    assert sampler.byte_rates_note is None


def test_nodes_that_cannot_be_told_apart_get_no_metrics_url():
    urls, unreachable = metrics_urls({
        1: ("10.0.0.1", "http://127.0.0.1:9644"),  # loopback, but clients reach the node elsewhere
        2: ("10.0.0.2", "http://10.0.0.9:9644"),
        3: ("10.0.0.3", "http://10.0.0.9:9644"),  # the same URL as node 2
        4: ("10.0.0.4", "http://:9644"),
        5: ("127.0.0.1", "http://127.0.0.1:9645"),  # a local dev cluster: loopback everywhere is fine
    })
    assert urls == {4: "http://10.0.0.4:9644/metrics", 5: "http://127.0.0.1:9645/metrics"}
    assert "loopback address of a node clients reach at 10.0.0.1" in unreachable[1]
    assert unreachable[2] == "http://10.0.0.9:9644/metrics is also the metrics URL of node 3"
    assert unreachable[3] == "http://10.0.0.9:9644/metrics is also the metrics URL of node 2"
