"""Client quotas in the metadata log: what AlterClientQuotas writes (ClientQuotaRecords) and what
DescribeClientQuotas answers, with Kafka's checks, messages and ordering. Sans-I/O over the metadata image.

The checks of one entry are network/quotas.py's, which the brokers enforce. What is particular to the request
is Kafka's controller's: an entry that names a key twice, or an entity an earlier entry named, is refused as
"Ignoring duplicate entity ..." (the earlier entry stands); a value that equals the current one and the
removal of a key that is not set write nothing; a request with validate_only writes nothing.

Kafka answers from Java hash maps, so the order of entries (and of an entity's types) is the iteration order
of a java.util.HashMap; it is reproduced here, so that answers compare equal, item for item.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from odradek.controller.metadata_image import MetadataImage, client_quota_record
from odradek.network.quotas import FilterComponent, describe_entities, validate_alteration, validate_filter
from odradek.protocol.errors import ErrorCode

Entity = dict[str, "str | None"]


def entity_of(entity_data: Iterable[dict]) -> Entity:
    """An entity from its request form [{entity_type, entity_name}]; a type named twice keeps its last name, as
    Kafka's request reads it into a map."""
    return {item["entity_type"]: item["entity_name"] for item in entity_data}


def image_key(entity: Entity) -> tuple[tuple[str, str | None], ...]:
    """How the metadata image keys an entity (metadata_image.client_quotas)."""
    return tuple(sorted(entity.items()))


def alter(image: MetadataImage, entries: Sequence[dict], resolves: Callable[[str], bool] | None = None
          ) -> tuple[list[dict], list[dict]]:
    """(ClientQuotaRecords to commit, AlterClientQuotas response entries) for the request's entries. `resolves`
    says whether a host name (an ip entity that is no address) resolves; the caller looked it up."""
    records: list[dict] = []
    results: dict[frozenset, tuple[Entity, ErrorCode, str | None]] = {}
    for entry in entries:
        entity = entity_of(entry["entity"])
        key = frozenset(entity.items())
        ops: dict[str, float | None] = {}
        repeated = False
        for op in entry["ops"]:
            if op["key"] in ops:
                repeated = True
            else:
                ops[op["key"]] = None if op["remove"] else op["value"]
        if repeated or key in results:
            results[key] = (entity, ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {_entity_text(entity)}")
            continue
        names = list(ops)
        ordered = [(names[i], ops[names[i]]) for i in _java_order(names, _string_hash, len(names))]
        refused = validate_alteration(entity, ordered, resolves)
        if refused is not None:
            results[key] = (entity, *refused)
            continue
        current = image.client_quotas.get(image_key(entity), {})
        for name, value in ordered:
            if value is None:
                if name in current:
                    records.append(client_quota_record(image_key(entity), name, None))
            elif not _same(current.get(name), value):
                records.append(client_quota_record(image_key(entity), name, value))
        results[key] = (entity, ErrorCode.NONE, None)
    listed = list(results.values())
    order = _java_order([frozenset(entity.items()) for entity, _, _ in listed], _entity_hash, None)
    return records, [{"error_code": listed[i][1], "error_message": listed[i][2], "entity": entity_data(listed[i][0])}
                     for i in order]


def describe(image: MetadataImage, components: Sequence[dict], strict: bool) -> dict:
    """DescribeClientQuotas' error_code, error_message and entries for a filter, from this node's image."""
    filter_components = [FilterComponent(c["entity_type"], c["match_type"], c["match"]) for c in components]
    refused = validate_filter(filter_components)
    if refused is not None:
        return {"error_code": refused[0], "error_message": refused[1], "entries": None}
    found = describe_entities(((dict(entity), values) for entity, values in image.client_quotas.items()),
                              filter_components, strict)
    return {"error_code": ErrorCode.NONE, "error_message": "", "entries": [  # "": Kafka's default, not null
        {"entity": entity_data(entity), "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
        for entity, values in sorted(found, key=lambda item: _sortable(item[0]))]}


def entity_data(entity: Entity) -> list[dict]:
    """An entity in its response form, its types in the order Kafka lists them (client-id, user, ip)."""
    types = list(entity)
    return [{"entity_type": types[i], "entity_name": entity[types[i]]}
            for i in _java_order(types, _string_hash, len(types))]


def _same(current: float | None, value: float) -> bool:
    return current is not None and (current == value or math.isnan(current) and math.isnan(value))


def _sortable(entity: Entity) -> list[tuple[str, bool, str]]:
    return sorted((entity_type, name is not None, name or "") for entity_type, name in entity.items())


def _entity_text(entity: Entity) -> str:
    """Java's text of a ClientQuotaEntity: ClientQuotaEntity(entries={user=alice, client-id=null})."""
    types = list(entity)
    entries = ", ".join(f"{types[i]}={'null' if entity[types[i]] is None else entity[types[i]]}"
                        for i in _java_order(types, _string_hash, len(types)))
    return f"ClientQuotaEntity(entries={{{entries}}})"


# java.util.HashMap iteration order: by bucket (the spread hash modulo the table size the map has grown to), and
# in insertion order within a bucket.

def _string_hash(text: str | None) -> int:
    if text is None:
        return 0
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _entity_hash(entries: frozenset) -> int:
    """ClientQuotaEntity.hashCode: Objects.hash(map), the map's hash the sum of key hash ^ value hash."""
    return (31 + sum(_string_hash(t) ^ _string_hash(n) for t, n in entries)) & 0xFFFFFFFF


def _java_order(keys: list, hash_of: Callable, initial_capacity: int | None) -> list[int]:
    """Indexes of distinct `keys`, inserted in this order into a HashMap(initial_capacity) (None: the default
    constructor), in the order the map iterates them."""
    capacity = 16 if initial_capacity is None else 1 << max(initial_capacity - 1, 0).bit_length()
    while len(keys) > int(capacity * 0.75):
        capacity *= 2

    def bucket(i: int) -> tuple[int, int]:
        h = hash_of(keys[i])
        return (h ^ (h >> 16)) & (capacity - 1), i

    return sorted(range(len(keys)), key=bucket)
