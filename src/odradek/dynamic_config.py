"""A node's settings as they stand: the cluster's dynamic broker configs over its static configuration.

Kafka's precedence, highest first: this broker's own dynamic configs (`kafka-configs --entity-name 1`), the
cluster-wide dynamic defaults (`--entity-default`), the node's static configuration (its properties file
and --set), Kafka's defaults. The dynamic configs live in the metadata image, so every node sees the same.
`synonyms` gives the chain DescribeConfigs shows, built as Kafka builds it.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from odradek.config import (
    BROKER_CONFIG_BY_NAME,
    PER_IP_ZERO_NEEDS_OVERRIDES,
    BrokerConfig,
    ConfigError,
    broker_synonyms,
    convert,
    unprefixed,
)
from odradek.controller.metadata_image import MetadataImage

log = logging.getLogger(__name__)

# Settings Kafka has no default for (a node must set them); Odradek's default is for a quick start only.
NO_KAFKA_DEFAULT = frozenset({"node.id"})

# DescribeConfigs ConfigSource values
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


def config_text(value) -> str | None:
    """A setting's value as Kafka writes it (Java's text of booleans and doubles)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_text(value)
    return str(value)


def java_double_text(value: float) -> str:
    """Java's Double.toString: the shortest digits, in E notation outside [1e-3, 1e7)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    number = Decimal(repr(value))
    digits = "".join(map(str, number.as_tuple().digits)).rstrip("0") or "0"
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{number.adjusted()}"


class DynamicBrokerConfig:
    def __init__(self, static: BrokerConfig, image: MetadataImage, node_id: int):
        self.static = static
        self.image = image
        self.node_id = node_id
        self._current: BrokerConfig = static
        self._current_of: tuple | None = None

    @property
    def current(self) -> BrokerConfig:
        """The node's configuration with the dynamic configs applied (rebuilt only when they change)."""
        own, defaults = self.image.dynamic_broker_configs(self.node_id)
        key = (tuple(sorted(own.items())), tuple(sorted(defaults.items())))
        if key != self._current_of:
            known = {name: value for name, value in {**defaults, **own}.items()
                     if unprefixed(name) in BROKER_CONFIG_BY_NAME}
            try:
                self._current = BrokerConfig({**self.static.explicit, **known}) if known else self.static
            except ConfigError as exc:  # only a change made through the controller listener can get here
                log.warning("Keeping the previous settings: the dynamic broker configs do not apply: %s", exc)
            self._current_of = key
        return self._current

    def __getitem__(self, name: str):
        return self.current[name]

    def synonyms(self, name: str, broker_id: str) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of every setting that gives `name` its value as broker `broker_id` sees it,
        highest precedence first ("" for the cluster-wide defaults, which show only their own source).

        As in Kafka, sources come before names (a dynamic log.retention.ms before a static
        log.retention.hours), and settings before the first one named `name` are left out: a topic's
        retention.ms has no synonyms unless log.retention.ms itself is set somewhere or has a default.
        """
        names = broker_synonyms(name)
        own, defaults = self.image.dynamic_broker_configs(broker_id)
        statics = self.static.explicit
        chain = []
        for values, source in ((own, DYNAMIC_BROKER_CONFIG), (defaults, DYNAMIC_DEFAULT_BROKER_CONFIG),
                               (statics, STATIC_BROKER_CONFIG)):
            chain += [(n, values[n], source) for n in names if n in values]
        for n in names:
            definition = BROKER_CONFIG_BY_NAME.get(n)
            if definition is not None and definition.default is not None and not definition.dynamic_only \
                    and n not in NO_KAFKA_DEFAULT:
                chain.append((n, config_text(definition.default), DEFAULT_CONFIG))
        while chain and chain[0][0] != name:
            chain.pop(0)
        if broker_id == "":
            chain = [entry for entry in chain if entry[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        return chain


# Thread pools Kafka lets a broker resize at run time, by at most half or double at a time.
RESIZABLE_THREAD_POOLS = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                          "num.recovery.threads.per.data.dir", "background.threads")


def reconfiguration_problem(current: BrokerConfig, changes: dict[str, str | None]) -> str | None:
    """Why a broker with settings `current` refuses the dynamic `changes` (None deletes), in Kafka's words, or
    None. These are the checks Kafka's broker makes of its own running state before it forwards a change to
    the controller; a value of the wrong type or range is the controller's to refuse."""
    values = {}
    for name, text in changes.items():
        definition = BROKER_CONFIG_BY_NAME.get(name)
        if text is None or definition is None:
            continue
        try:
            values[name] = convert(definition, text)
        except ConfigError:
            return None
    for name in RESIZABLE_THREAD_POOLS:
        new, old = values.get(name), current[name]
        if new is None or new == old:
            continue
        prefix = f"Dynamic thread count update validation failed for {name}={new}"
        if new <= 0:
            return _refused(f"{prefix}, value should be at least 1")
        if new < old // 2:
            return _refused(f"{prefix}, value should be at least half the current value {old}")
        if new > old * 2:
            return _refused(f"{prefix}, value should not be greater than double the current value {old}")
    cleaner_threads, old = values.get("log.cleaner.threads"), current["log.cleaner.threads"]
    if cleaner_threads is not None:
        if cleaner_threads < 1:
            return _refused("Log cleaner threads should be at least 1")
        if cleaner_threads < old // 2:
            return _refused(f"Log cleaner threads cannot be reduced to less than half the current value {old}")
        if cleaner_threads > old * 2:
            return _refused(f"Log cleaner threads cannot be increased to more than double the current value {old}")
    if values.get("max.connections", 1) <= 0:
        return _refused(f"Invalid max.connections {values['max.connections']}")
    overrides = changes.get("max.connections.per.ip.overrides", current["max.connections.per.ip.overrides"])
    if values.get("max.connections.per.ip") == 0 and not overrides:
        return f"requirement failed: {PER_IP_ZERO_NEEDS_OVERRIDES}"
    return None


def _refused(why: str) -> str:
    """Kafka's wording when one of its reconfigurable components refuses a change."""
    return f"Invalid value org.apache.kafka.common.config.ConfigException: {why} for configuration Invalid dynamic configuration"
