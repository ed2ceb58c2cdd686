"""A metrics registry: counters, gauges and histograms with labels, rendered as Prometheus text format 0.0.4.

Sans-I/O: nothing here reads a clock or a socket. Metrics that are counted as things happen live in the
registry (`Counter`, `Gauge`, `Histogram`); metrics computed when scraped come from collectors, callables
that return `MetricFamily` values built from state the caller already has. `Registry.render()` is the body
of a `GET /metrics` answer (content type `CONTENT_TYPE`); `render(names)` only the families named, as
Prometheus' client libraries answer `/metrics?name[]=...`.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = ("counter", "gauge", "histogram", "untyped")

# Milliseconds: from a fraction of a millisecond (an in-memory answer) to a long poll or a slow fsync.
DEFAULT_MS_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                      10000.0)


def check_metric_name(name: str) -> str:
    if not _METRIC_NAME.match(name):
        raise ValueError(f"invalid metric name {name!r}")
    return name


def check_label_names(names: Sequence[str]) -> tuple[str, ...]:
    for name in names:
        if not _LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"invalid label name {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate label names in {list(names)}")
    return tuple(names)


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it: integers without a fraction, +Inf, -Inf, NaN."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def format_bound(bound: float) -> str:
    """A histogram bucket's `le` as Prometheus' client libraries write it (1.0, 0.5, +Inf)."""
    if math.isinf(bound):
        return "+Inf"
    return repr(float(bound))


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


@dataclass
class MetricFamily:
    """One metric's HELP, TYPE and samples. A sample is (sample name, label pairs, value); for a histogram
    the sample names end in _bucket, _sum and _count."""

    name: str
    type: str
    help: str
    labelnames: tuple[str, ...] = ()
    samples: list[tuple[str, tuple[tuple[str, str], ...], float]] = field(default_factory=list)

    def __post_init__(self):
        check_metric_name(self.name)
        if self.type not in TYPES:
            raise ValueError(f"unknown metric type {self.type!r}")
        self.labelnames = check_label_names(self.labelnames)

    def add(self, labelvalues: Sequence[object], value: float, suffix: str = "") -> MetricFamily:
        """Add a sample with these label values (in `labelnames` order)."""
        if len(labelvalues) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected, got {len(labelvalues)}")
        self.samples.append((self.name + suffix, tuple(zip(self.labelnames, map(str, labelvalues), strict=True)),
                             value))
        return self


def gauge_family(name: str, help: str, labelnames: Sequence[str] = ()) -> MetricFamily:
    return MetricFamily(name, "gauge", help, tuple(labelnames))


def counter_family(name: str, help: str, labelnames: Sequence[str] = ()) -> MetricFamily:
    return MetricFamily(name, "counter", help, tuple(labelnames))


class _Metric:
    type = "untyped"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()):
        self.name = check_metric_name(name)
        self.help = help
        self.labelnames = check_label_names(labelnames)
        self._children: dict[tuple[str, ...], object] = {}

    def labels(self, *values: object):
        """The child for these label values (created on first use)."""
        key = tuple(map(str, values))
        child = self._children.get(key)
        if child is None:
            if len(key) != len(self.labelnames):
                raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected, got {len(key)}")
            child = self._children[key] = self._new_child()
        return child

    def remove(self, *values: object) -> None:
        self._children.pop(tuple(map(str, values)), None)

    def clear(self) -> None:
        self._children.clear()

    def _unlabelled(self):
        if self.labelnames:
            raise ValueError(f"{self.name} has labels {list(self.labelnames)}: use .labels(...)")
        return self.labels()

    def _new_child(self):
        raise NotImplementedError

    def collect(self) -> MetricFamily:
        raise NotImplementedError


class _Value:
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class _CounterChild(_Value):
    __slots__ = ()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        self.value += amount


class _GaugeChild(_Value):
    __slots__ = ()

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = value


class _ValueMetric(_Metric):
    def inc(self, amount: float = 1) -> None:
        self._unlabelled().inc(amount)

    @property
    def value(self) -> float:
        return self._unlabelled().value

    def collect(self) -> MetricFamily:
        family = MetricFamily(self.name, self.type, self.help, self.labelnames)
        for key, child in self._children.items():
            family.add(key, child.value)
        return family


class Counter(_ValueMetric):
    """A value that only goes up; by convention its name ends in _total."""

    type = "counter"

    def _new_child(self):
        return _CounterChild()


class Gauge(_ValueMetric):
    """A value that goes up and down."""

    type = "gauge"

    def _new_child(self):
        return _GaugeChild()

    def set(self, value: float) -> None:
        self._unlabelled().set(value)

    def dec(self, amount: float = 1) -> None:
        self._unlabelled().dec(amount)


class _HistogramChild:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is (largest bound, +Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)


class Histogram(_Metric):
    """Observations counted into buckets by upper bound (`le`), with their sum and count."""

    type = "histogram"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = (),
                 buckets: Sequence[float] = DEFAULT_MS_BUCKETS):
        if "le" in labelnames:
            raise ValueError("a histogram cannot have a label named le")
        super().__init__(name, help, labelnames)
        bounds = [float(b) for b in buckets if not math.isinf(b)]
        if not bounds or bounds != sorted(set(bounds)):
            raise ValueError(f"{name}: bucket bounds must be increasing and distinct, got {list(buckets)}")
        self.bounds = tuple(bounds)

    def _new_child(self):
        return _HistogramChild(self.bounds)

    def observe(self, value: float) -> None:
        self._unlabelled().observe(value)

    def collect(self) -> MetricFamily:
        family = MetricFamily(self.name, self.type, self.help, self.labelnames)
        for key, child in self._children.items():
            labels = tuple(zip(self.labelnames, key, strict=True))
            cumulative = 0
            for bound, count in zip((*self.bounds, math.inf), child.counts, strict=True):
                cumulative += count
                family.samples.append((self.name + "_bucket", (*labels, ("le", format_bound(bound))), cumulative))
            family.samples.append((self.name + "_sum", labels, child.sum))
            family.samples.append((self.name + "_count", labels, cumulative))
        return family


Collector = Callable[[], Iterable[MetricFamily]]


class Registry:
    """The metrics a node serves: registered metrics, then what the collectors compute at scrape time."""

    def __init__(self):
        self._metrics: dict[str, _Metric] = {}
        self._collectors: list[Collector] = []

    def register(self, metric: _Metric) -> _Metric:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} is already registered")
        self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Counter:
        return self.register(Counter(name, help, labelnames))

    def gauge(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Gauge:
        return self.register(Gauge(name, help, labelnames))

    def histogram(self, name: str, help: str, labelnames: Sequence[str] = (),
                  buckets: Sequence[float] = DEFAULT_MS_BUCKETS) -> Histogram:
        return self.register(Histogram(name, help, labelnames, buckets))

    def add_collector(self, collector: Collector) -> None:
        self._collectors.append(collector)

    def collect(self) -> list[MetricFamily]:
        """Every family once; a name given twice (two collectors, or a collector and a metric) is a bug."""
        families = [metric.collect() for metric in self._metrics.values()]
        for collector in self._collectors:
            families.extend(collector())
        seen: set[str] = set()
        for family in families:
            if family.name in seen:
                raise ValueError(f"metric family {family.name} is collected twice")
            seen.add(family.name)
        return families

    def render(self, names: Collection[str] | None = None) -> str:
        """Every family, or only those named in `names` (what a `name[]` query asks for)."""
        families = self.collect()
        if names is not None:
            families = [family for family in families if family.name in names]
        return render(families)


def render(families: Iterable[MetricFamily]) -> str:
    """Prometheus text exposition format 0.0.4."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for name, labels, value in family.samples:
            if labels:
                text = ",".join(f'{key}="{escape_label_value(val)}"' for key, val in labels)
                lines.append(f"{name}{{{text}}} {format_value(value)}")
            else:
                lines.append(f"{name} {format_value(value)}")
    return "\n".join(lines) + "\n" if lines else ""
