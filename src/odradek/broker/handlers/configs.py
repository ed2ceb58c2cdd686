"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers."""

from __future__ import annotations

from odradek.broker.controller_channel import from_controller_side
from odradek.config import BROKER_CONFIG_BY_NAME, BROKER_CONFIGS, ConfigDef
from odradek.controller.metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log_config import TOPIC_CONFIG_NAMES, LogConfig

BROKER_LOGGER_RESOURCE = 8

# DescribeConfigs ConfigSource values
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                "password": 9}

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

BROKER_SYNONYM_OF_TOPIC_CONFIG: dict[str, ConfigDef] = {c.topic_name: c for c in BROKER_CONFIGS if c.topic_name}
# Broker settings that also feed a topic default: retention.ms falls back to minutes, then hours.
FALLBACK_SYNONYMS = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
}


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe_topic_configs(broker, topic, keys, include_synonyms: bool, include_documentation: bool) -> list[dict]:
    controller = broker.controller
    defaults = controller.topic_defaults()
    fallback = LogConfig()
    static = broker.config.explicit
    dynamic = controller.image.broker_configs
    configs = []
    for name in sorted(TOPIC_CONFIG_NAMES):
        if keys is not None and name not in keys:
            continue
        synonym = BROKER_SYNONYM_OF_TOPIC_CONFIG.get(name)
        chain = []
        if name in topic.configs:
            chain.append((name, topic.configs[name], TOPIC_CONFIG))
        if synonym and synonym.name in dynamic:
            chain.append((synonym.name, dynamic[synonym.name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        for broker_name in FALLBACK_SYNONYMS.get(name, (synonym.name,) if synonym else ()):
            if broker_name in static:
                chain.append((broker_name, static[broker_name], STATIC_BROKER_CONFIG))
        if synonym:
            chain.append((synonym.name, _text(synonym.default) if synonym.default is not None else defaults.get(name),
                          DEFAULT_CONFIG))
        value = topic.configs.get(name, defaults.get(name))
        if value is None:
            value = _text(getattr(fallback, name.replace(".", "_"), None))
        source = chain[0][2] if chain else DEFAULT_CONFIG
        configs.append({
            "name": name, "value": value, "read_only": False, "config_source": source, "is_sensitive": False,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in chain] if include_synonyms else [],
            "config_type": CONFIG_TYPES[synonym.type] if synonym else CONFIG_TYPES["string"],
            "documentation": (synonym.doc if synonym else None) if include_documentation else None,
        })
    return configs


def _describe_broker_configs(broker, keys, include_synonyms: bool, include_documentation: bool) -> list[dict]:
    static = broker.config.explicit
    dynamic = broker.controller.image.broker_configs
    configs = []
    for definition in BROKER_CONFIGS:
        name = definition.name
        if keys is not None and name not in keys:
            continue
        chain = []
        if name in dynamic:
            chain.append((name, dynamic[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name in static:
            chain.append((name, static[name], STATIC_BROKER_CONFIG))
        chain.append((name, _text(definition.default), DEFAULT_CONFIG))
        configs.append({
            "name": name, "value": chain[0][1], "read_only": definition.read_only, "config_source": chain[0][2],
            "is_sensitive": False,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in chain] if include_synonyms else [],
            "config_type": CONFIG_TYPES[definition.type],
            "documentation": definition.doc if include_documentation else None,
        })
    return configs


def handle_describe_configs(broker, ctx, request: dict) -> dict:
    results = []
    for resource in request["resources"]:
        kind, name, keys = resource["resource_type"], resource["resource_name"], resource["configuration_keys"]
        result = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": kind, "resource_name": name,
                  "configs": []}
        keys = None if keys is None else set(keys)
        synonyms = request.get("include_synonyms", False)
        documentation = request.get("include_documentation", False)
        if kind == TOPIC_RESOURCE:
            topic = broker.controller.image.topics.get(name)
            if topic is None:
                result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result["error_message"] = f"Topic '{name}' does not exist."
            else:
                result["configs"] = describe_topic_configs(broker, topic, keys, synonyms, documentation)
        elif kind == BROKER_RESOURCE:
            if name not in ("", str(broker.node_id)):
                result["error_code"] = ErrorCode.INVALID_REQUEST
                result["error_message"] = f"Unexpected broker id, expected {broker.node_id} but received {name}"
            else:
                result["configs"] = _describe_broker_configs(broker, keys, synonyms, documentation)
        elif kind == BROKER_LOGGER_RESOURCE:
            result["configs"] = []
        else:
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = f"Unsupported resource type {kind}"
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def _response(resource: dict, error: KafkaError | None) -> dict:
    return {"error_code": error.code if error else ErrorCode.NONE, "error_message": error.message if error else None,
            "resource_type": resource["resource_type"], "resource_name": resource["resource_name"]}


def _check_unique(resources: list[dict]) -> set[tuple[int, str]]:
    seen, duplicates = set(), set()
    for resource in resources:
        key = (resource["resource_type"], resource["resource_name"])
        (duplicates if key in seen else seen).add(key)
    return duplicates


def handle_alter_configs(broker, ctx, request: dict) -> dict:
    """The legacy, whole-resource AlterConfigs: overrides not named in the request are removed."""

    def changes(resource: dict, current: dict[str, str]) -> dict[str, str | None]:
        return {**dict.fromkeys(current), **{c["name"]: c["value"] for c in resource["configs"]}}

    return _alter(broker, ctx, request, changes)


def handle_incremental_alter_configs(broker, ctx, request: dict) -> dict:
    def changes(resource: dict, current: dict[str, str]) -> dict[str, str | None]:
        names = [c["name"] for c in resource["configs"]]
        if len(set(names)) != len(names):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        return {c["name"]: _apply_operation(broker, resource["resource_type"], c, current) for c in resource["configs"]}

    return _alter(broker, ctx, request, changes)


async def _alter(broker, ctx, request: dict, changes_of) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    duplicates = _check_unique(request["resources"])
    responses = []
    for resource in request["resources"]:
        error = None
        try:
            if (resource["resource_type"], resource["resource_name"]) in duplicates:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate resource in the request.")
            current = _current_overrides(broker, resource["resource_type"], resource["resource_name"])
            await broker.controller.alter_configs(resource["resource_type"], resource["resource_name"],
                                            changes_of(resource, current), request.get("validate_only", False))
        except KafkaError as exc:
            error = exc
        responses.append(_response(resource, error))
    return {"throttle_time_ms": 0, "responses": responses}


def _current_overrides(broker, resource_type: int, resource_name: str) -> dict[str, str]:
    image = broker.controller.image
    if resource_type == TOPIC_RESOURCE:
        topic = image.topics.get(resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource_name} does not exist.")
        return dict(topic.configs)
    if resource_type == BROKER_RESOURCE:
        return dict(image.broker_configs)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def _apply_operation(broker, resource_type: int, config: dict, current: dict[str, str]) -> str | None:
    name, operation, value = config["name"], config["config_operation"], config["value"]
    if operation == SET:
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for {name}")
        return value
    if operation == DELETE:
        return None
    if operation in (APPEND, SUBTRACT):
        definition = BROKER_SYNONYM_OF_TOPIC_CONFIG.get(name) if resource_type == TOPIC_RESOURCE else \
            BROKER_CONFIG_BY_NAME.get(name)
        if definition is None or definition.type != "list":
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value append/subtract is not allowed for config key {name}")
        if resource_type == TOPIC_RESOURCE:
            base = current.get(name) or broker.controller.topic_defaults().get(name, "")
        else:
            base = current.get(name) or _text(definition.default) or ""
        items = [item for item in base.split(",") if item]
        values = [item.strip() for item in (value or "").split(",") if item.strip()]
        if operation == APPEND:
            items += [v for v in values if v not in items]
        else:
            items = [item for item in items if item not in values]
        return ",".join(items)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation}")
