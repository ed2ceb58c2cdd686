"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers."""

from __future__ import annotations

from odradek.broker.controller_channel import from_controller_side
from odradek.config import BROKER_CONFIG_BY_NAME, BROKER_CONFIGS, ConfigDef
from odradek.controller.metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE
from odradek.dynamic_config import (
    DEFAULT_CONFIG,
    TOPIC_CONFIG,
    config_text,
    reconfiguration_problem,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log_config import TOPIC_CONFIG_NAMES, LogConfig, topic_config_type

BROKER_LOGGER_RESOURCE = 8

CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                "password": 9}
UNKNOWN_CONFIG_TYPE = 0

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

BROKER_SYNONYM_OF_TOPIC_CONFIG: dict[str, ConfigDef] = {c.topic_name: c for c in BROKER_CONFIGS if c.topic_name}


def _entry(name: str, value: str | None, chain: list[tuple[str, str | None, int]], definition: ConfigDef | None,
           config_type: str | None, read_only: bool, include_synonyms: bool, include_documentation: bool) -> dict:
    """One DescribeConfigs entry, as Kafka builds it: the source is the first synonym's; a setting of unknown
    type (a name Kafka does not know) may be a secret, so it is sensitive and its value hidden."""
    sensitive = config_type is None or config_type == "password"
    if sensitive:
        value = None
        chain = [(n, None, source) for n, _, source in chain]
    return {
        "name": name, "value": value, "read_only": read_only, "config_source": chain[0][2] if chain else DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": [{"name": n, "value": v, "source": source} for n, v, source in chain] if include_synonyms else [],
        "config_type": CONFIG_TYPES[config_type] if config_type else UNKNOWN_CONFIG_TYPE,
        "documentation": (definition.doc if definition else None) if include_documentation else None,
    }


def describe_topic_configs(broker, topic, keys, include_synonyms: bool, include_documentation: bool) -> list[dict]:
    """Every topic setting with its effective value; its synonyms are the topic's override, then the broker
    setting it defaults to, from this broker's point of view."""
    dynamic = broker.controller.dynamic
    values = broker.controller.log_config(topic).to_properties()
    configs = []
    for name in sorted(TOPIC_CONFIG_NAMES):
        if keys is not None and name not in keys:
            continue
        synonym = BROKER_SYNONYM_OF_TOPIC_CONFIG.get(name)
        chain = dynamic.synonyms(synonym.name, str(broker.node_id)) if synonym else []
        if name in topic.configs:
            chain.insert(0, (name, values[name], TOPIC_CONFIG))
        configs.append(_entry(name, values[name], chain, synonym, topic_config_type(name), False, include_synonyms,
                              include_documentation))
    return configs


def _describe_broker_configs(broker, resource_name: str, keys, include_synonyms: bool,
                             include_documentation: bool) -> list[dict]:
    """This broker's settings (its id), or the cluster-wide dynamic defaults (""), as Kafka lists them: every
    setting for a broker, with unknown names given in its configuration; only the set ones for the defaults."""
    dynamic = broker.controller.dynamic
    own, defaults = broker.image.dynamic_broker_configs(resource_name)
    if resource_name == "":
        names = sorted(defaults)
    else:
        current = dynamic.current
        given = {**broker.config.explicit, **defaults, **own}
        names = [c.name for c in BROKER_CONFIGS if not c.dynamic_only or c.name in given] + sorted(
            n for n in given if n not in BROKER_CONFIG_BY_NAME)
    configs = []
    for name in names:
        if keys is not None and name not in keys:
            continue
        definition = BROKER_CONFIG_BY_NAME.get(name)
        chain = dynamic.synonyms(name, resource_name)
        if resource_name == "":
            value = defaults[name]
        elif definition is not None:
            value = config_text(current.values[name])
        else:
            value = chain[0][1] if chain else None
        configs.append(_entry(name, value, chain, definition, definition.type if definition else None,
                              definition is not None and definition.read_only, include_synonyms,
                              include_documentation))
    return configs


def handle_describe_configs(broker, ctx, request: dict) -> dict:
    results = []
    for resource in request["resources"]:
        kind, name, keys = resource["resource_type"], resource["resource_name"], resource["configuration_keys"]
        # Kafka's answers carry an empty message, never a null one, whatever the outcome.
        result = {"error_code": ErrorCode.NONE, "error_message": "", "resource_type": kind, "resource_name": name,
                  "configs": []}
        keys = None if not keys else set(keys)
        synonyms = request.get("include_synonyms", False)
        documentation = request.get("include_documentation", False)
        if kind == TOPIC_RESOURCE:
            topic = broker.controller.image.topics.get(name)
            if topic is None:
                result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                result["configs"] = describe_topic_configs(broker, topic, keys, synonyms, documentation)
        elif kind == BROKER_RESOURCE:
            if name not in ("", str(broker.node_id)):
                result["error_code"] = ErrorCode.INVALID_REQUEST
                result["error_message"] = (f"Unexpected broker id, expected {broker.node_id} or empty string, but "
                                           f"received {name}")
            else:
                result["configs"] = _describe_broker_configs(broker, name, keys, synonyms, documentation)
        elif kind == BROKER_LOGGER_RESOURCE:
            result["configs"] = []
        else:
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = f"Unsupported resource type {kind}"
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def handle_list_client_metrics_resources(broker, ctx, request: dict) -> dict:
    """The client-metrics config resources (KIP-714 subscriptions): Odradek has none."""
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "client_metrics_resources": []}


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
        return await _check_and_forward(broker, ctx, request, changes_of)
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


async def _check_and_forward(broker, ctx, request: dict, changes_of) -> dict:
    """A change of this broker's settings (or of the cluster's defaults) is first checked against what it runs
    with, as a Kafka broker does; the rest goes to the controller, which stores it."""
    refused: dict[int, KafkaError] = {}
    for index, resource in enumerate(request["resources"]):
        if resource["resource_type"] != BROKER_RESOURCE:
            continue
        if resource["resource_name"] not in ("", str(broker.node_id)):  # Kafka's admin client sends it to that node
            refused[index] = KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected "
                                        f"{broker.node_id}, but received {resource['resource_name']}")
            continue
        try:
            changes = changes_of(resource, _current_overrides(broker, BROKER_RESOURCE, resource["resource_name"]))
        except KafkaError:
            continue  # the controller gives the same answer
        problem = reconfiguration_problem(broker.controller.dynamic.current, changes)
        if problem is not None:
            refused[index] = KafkaError(ErrorCode.INVALID_REQUEST, problem)
    if not refused:
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    forwarded = [r for index, r in enumerate(request["resources"]) if index not in refused]
    answers = iter(())
    if forwarded:
        answered = await broker.controller_channel.request(ctx.api_key, ctx.api_version,
                                                          {**request, "resources": forwarded})
        answers = iter(answered["responses"])
    return {"throttle_time_ms": 0, "responses": [
        _response(resource, refused[index]) if index in refused else next(answers)
        for index, resource in enumerate(request["resources"])]}


def _current_overrides(broker, resource_type: int, resource_name: str) -> dict[str, str]:
    image = broker.controller.image
    if resource_type == TOPIC_RESOURCE:
        topic = image.topics.get(resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{resource_name}' does not exist.")
        return dict(topic.configs)
    if resource_type == BROKER_RESOURCE:
        return dict(image.broker_configs.get(resource_name, {}))
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
        if resource_type == TOPIC_RESOURCE:
            kind = topic_config_type(name)
            default = LogConfig.from_properties(broker.controller.topic_defaults()).to_properties().get(name)
        else:
            definition = BROKER_CONFIG_BY_NAME.get(name)
            kind, default = (definition.type, config_text(definition.default)) if definition else (None, None)
        if kind != "list":
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Can't {'APPEND' if operation == APPEND else 'SUBTRACT'} to "
                                                       f"key {name} because its type is not LIST.")
        base = current.get(name) or default or ""
        items = [item for item in base.split(",") if item]
        values = [item.strip() for item in (value or "").split(",") if item.strip()]
        if operation == APPEND:
            items += [v for v in values if v not in items]
        else:
            items = [item for item in items if item not in values]
        return ",".join(items)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation}")
