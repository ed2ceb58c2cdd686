"""The metrics registry: Prometheus text format 0.0.4, escaping, histograms, and the checks on names."""

import math

import pytest

from odradek.metrics.registry import (
    Counter,
    Histogram,
    MetricFamily,
    Registry,
    format_value,
    gauge_family,
    render,
)


def lines(text: str) -> list[str]:
    assert text.endswith("\n")
    return text.splitlines()


def test_counter_and_gauge_render_help_type_and_samples():
    registry = Registry()
    messages = registry.counter("messages_total", "Records appended.", ("topic",))
    messages.labels("a").inc()
    messages.labels("a").inc(2)
    messages.labels("b").inc(0.5)
    registry.gauge("leaders", "Partitions led.").set(4)
    assert lines(registry.render()) == [
        "# HELP messages_total Records appended.",
        "# TYPE messages_total counter",
        'messages_total{topic="a"} 3',
        'messages_total{topic="b"} 0.5',
        "# HELP leaders Partitions led.",
        "# TYPE leaders gauge",
        "leaders 4",
    ]


def test_label_values_and_help_are_escaped():
    family = gauge_family("g", 'a \\ back\nslash "quoted"', ("label",)).add(('x"y\\z\nw',), 1)
    assert lines(render([family])) == [
        '# HELP g a \\\\ back\\nslash "quoted"',  # HELP escapes backslash and newline, not quotes
        "# TYPE g gauge",
        'g{label="x\\"y\\\\z\\nw"} 1',
    ]


def test_histogram_buckets_are_cumulative_with_sum_and_count():
    histogram = Histogram("request_ms", "Request time.", ("request",), buckets=(1, 10, 100))
    child = histogram.labels("Produce")
    for value in (0.5, 1, 1.5, 10, 99, 1000):  # a value equal to a bound falls in that bucket (le)
        child.observe(value)
    assert lines(render([histogram.collect()])) == [
        "# HELP request_ms Request time.",
        "# TYPE request_ms histogram",
        'request_ms_bucket{request="Produce",le="1.0"} 2',
        'request_ms_bucket{request="Produce",le="10.0"} 4',
        'request_ms_bucket{request="Produce",le="100.0"} 5',
        'request_ms_bucket{request="Produce",le="+Inf"} 6',
        'request_ms_sum{request="Produce"} 1112',
        'request_ms_count{request="Produce"} 6',
    ]


def test_values_are_written_as_prometheus_reads_them():
    assert format_value(3) == "3"
    assert format_value(3.0) == "3"
    assert format_value(0.25) == "0.25"
    assert format_value(math.inf) == "+Inf"
    assert format_value(-math.inf) == "-Inf"
    assert format_value(math.nan) == "NaN"
    assert format_value(True) == "1"
    assert float(format_value(1e20)) == 1e20


@pytest.mark.parametrize("name", ["", "9lives", "has-dash", "has space"])
def test_invalid_metric_names_are_refused(name):
    with pytest.raises(ValueError):
        Counter(name, "x")


@pytest.mark.parametrize("labels", [("bad-label",), ("__reserved",), ("a", "a")])
def test_invalid_label_names_are_refused(labels):
    with pytest.raises(ValueError):
        Counter("ok_total", "x", labels)


def test_a_histogram_cannot_use_le_and_needs_increasing_buckets():
    with pytest.raises(ValueError):
        Histogram("h", "x", ("le",))
    with pytest.raises(ValueError):
        Histogram("h", "x", buckets=(5, 1))


def test_label_values_must_match_label_names():
    counter = Counter("c_total", "x", ("topic", "partition"))
    with pytest.raises(ValueError):
        counter.labels("only-one")
    with pytest.raises(ValueError):
        counter.inc()  # a labelled metric has no unlabelled value
    with pytest.raises(ValueError):
        counter.labels("t", 0).inc(-1)  # counters only go up
    with pytest.raises(ValueError):
        gauge_family("g", "x", ("a",)).add((), 1)


def test_collectors_are_called_at_each_render_and_names_must_be_unique():
    registry = Registry()
    calls = []

    def collector():
        calls.append(1)
        return [gauge_family("scraped", "Computed when scraped.").add((), len(calls))]

    registry.add_collector(collector)
    assert "scraped 1" in registry.render()
    assert "scraped 2" in registry.render()
    registry.add_collector(lambda: [MetricFamily("scraped", "gauge", "again")])
    with pytest.raises(ValueError, match="collected twice"):
        registry.render()
    with pytest.raises(ValueError):
        registry.counter("x_total", "x")
        registry.counter("x_total", "x")


def test_an_empty_registry_renders_nothing():
    assert Registry().render() == ""


def test_render_with_names_keeps_only_those_families():
    registry = Registry()
    registry.counter("wanted_total", "Wanted.").inc(3)
    registry.counter("other_total", "Not wanted.").inc()
    registry.add_collector(lambda: [gauge_family("computed", "Computed.").add((), 7)])
    text = registry.render({"wanted_total", "computed", "no_such_metric"})
    assert "wanted_total 3" in text and "computed 7" in text
    assert "other_total" not in text
    assert registry.render(set()) == ""
