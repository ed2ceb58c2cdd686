"""The console's reading of the nodes' own counters: Prometheus text parsed back, the /metrics URL made from a
node's metrics.listener, and bytes per second summed over nodes whose counters reset when they restart."""

from __future__ import annotations

import pytest

from odradek.console.node_metrics import BYTES_IN, BYTES_OUT, MESSAGES_IN, metrics_url, parse_samples
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
    ("10.0.0.5", "http://127.0.0.1:9644", "http://127.0.0.1:9644/metrics"),
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


def test_byte_rates_sum_the_nodes_and_a_restarted_node_counts_zero_not_negative():
    sampler = Sampler(cluster=None, interval_s=5.0)  # _add_byte_rates asks the cluster nothing
    sampler._add_byte_rates({(1, BYTES_IN, ""): 1000, (1, BYTES_IN, "t"): 1000, (2, BYTES_IN, ""): 500,
                             (2, BYTES_IN, "t"): 500, (1, BYTES_OUT, ""): 0, (1, MESSAGES_IN, ""): 9}, 100.0)
    assert sampler.bytes_in.last is None  # one sample is no rate yet
    sampler._add_byte_rates({(1, BYTES_IN, ""): 3000, (1, BYTES_IN, "t"): 3000, (2, BYTES_IN, ""): 1500,
                             (2, BYTES_IN, "t"): 1500, (1, BYTES_OUT, ""): 400, (1, MESSAGES_IN, ""): 19}, 110.0)
    assert sampler.bytes_in.last == (2000 + 1000) / 10
    assert sampler.bytes_out.last == 40
    assert sampler.topic_bytes_in == {"t": 300.0}
    # node 2 restarted: its counters start again from 0; node 1 went on
    sampler._add_byte_rates({(1, BYTES_IN, ""): 4000, (1, BYTES_IN, "t"): 4000, (2, BYTES_IN, ""): 100,
                             (2, BYTES_IN, "t"): 100, (1, BYTES_OUT, ""): 400}, 120.0)
    assert sampler.bytes_in.last == 100.0
    assert sampler.topic_bytes_in == {"t": 100.0}
    # a sample without the nodes' counters (they could not be read) leaves the series as they were
    sampler._add_byte_rates(None, 130.0)
    assert [v for _, v in sampler.bytes_in.values()] == [300.0, 100.0]
