"""Renders docs/configuration.md from the configuration definitions, so the reference cannot drift."""

from odradek.config import BROKER_CONFIGS, LONG_MAX
from odradek.storage.log_config import TOPIC_CONFIG_NAMES, LogConfig, topic_config_doc, topic_config_type


def _show(value) -> str:
    if value is None:
        return "(none)"
    if value is True or value is False:
        return str(value).lower()
    if value == LONG_MAX:
        return "9223372036854775807 (Long.MAX)"
    return f"`{value}`"


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from `src/odradek/config.py` by `python -m odradek.config_reference > docs/configuration.md`;",
        "a test fails when this page and the code disagree.",
        "",
        "Settings use Kafka's names and defaults. Give them in a properties file (`odradek server --config FILE`)",
        "or one by one (`--set key=value`, which wins over the file). Dynamic settings can also be changed at",
        "run time with IncrementalAlterConfigs on the broker resource.",
        "",
        "## Node settings",
        "",
        "| name | type | default | dynamic | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in BROKER_CONFIGS:
        lines.append(f"| `{c.name}` | {c.type} | {_show(c.default)} | {'no' if c.read_only else 'yes'} | {c.doc} |")
    lines += [
        "",
        "## Topic settings",
        "",
        "Set per topic at creation (`odradek topics create --config k=v`) or later (`odradek topics alter`);",
        "a topic without an override follows the node setting named here, and changes apply without restart.",
        "",
        "| topic setting | node default from | description |",
        "| --- | --- | --- |",
    ]
    for c in sorted((c for c in BROKER_CONFIGS if c.topic_name), key=lambda c: c.topic_name):
        lines.append(f"| `{c.topic_name}` | `{c.name}` | {c.doc} |")
    defaults = LogConfig().to_properties()
    lines += [
        "",
        "These topic settings have no node setting; a topic without an override has the default named here:",
        "",
        "| topic setting | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    with_node_default = {c.topic_name for c in BROKER_CONFIGS if c.topic_name}
    for name in sorted(TOPIC_CONFIG_NAMES - with_node_default):
        default = f"`{defaults[name]}`" if defaults[name] else "(none)"
        lines.append(f"| `{name}` | {topic_config_type(name)} | {default} | {topic_config_doc(name)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
