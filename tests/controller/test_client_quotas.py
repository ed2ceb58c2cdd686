"""Client quotas in the metadata log: AlterClientQuotas' records and answers, DescribeClientQuotas' filters, and
ClientQuotaRecords applied to the image and kept by its snapshots. The expected answers are Kafka 4.0's, as its
broker gave them to the same requests (messages, codes and the order of its hash maps included)."""

import json
import math

import pytest

from odradek.controller import client_quotas
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.errors import ErrorCode


def entity(**names) -> list[dict]:
    return [{"entity_type": t.replace("_", "-"), "entity_name": n} for t, n in names.items()]


def op(key: str, value: float = 0.0, remove: bool = False) -> dict:
    return {"key": key, "value": value, "remove": remove}


def alter(image: MetadataImage, *entries: tuple[list[dict], list[dict]], resolves=None) -> list[tuple]:
    records, results = client_quotas.alter(image, [{"entity": e, "ops": ops} for e, ops in entries], resolves)
    for record in records:
        image.apply(json.loads(json.dumps(record, allow_nan=False)))  # as the metadata log stores it
    return [(r["error_code"], r["error_message"], [(d["entity_type"], d["entity_name"]) for d in r["entity"]])
            for r in results]


INVALID = ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("entries, expected", [
    ([([], [op("producer_byte_rate", 100)])], [(INVALID, "Invalid empty client quota entity", [])]),
    ([(entity(user="u1"), [op("producer_byte_rate", 100), op("producer_byte_rate", 200)])],
     [(INVALID, "Ignoring duplicate entity ClientQuotaEntity(entries={user=u1})", [("user", "u1")])]),
    ([(entity(user="u9"), [op("producer_byte_rate", 5), op("producer_byte_rate", remove=True)])],
     [(INVALID, "Ignoring duplicate entity ClientQuotaEntity(entries={user=u9})", [("user", "u9")])]),
    ([(entity(user="u3"), [op("bad", 1)])], [(INVALID, "Invalid configuration key bad", [("user", "u3")])]),
    ([(entity(user="u3"), [op("producer_byte_rate", 1.5)])],
     [(INVALID, "producer_byte_rate cannot be a fractional value.", [("user", "u3")])]),
    ([(entity(user="u3"), [op("producer_byte_rate", 0)])],
     [(INVALID, "Quota producer_byte_rate must be greater than 0", [("user", "u3")])]),
    ([(entity(user="u3"), [op("producer_byte_rate", 2.0**64)])],
     [(INVALID, "Proposed value for producer_byte_rate is too large for a LONG.", [("user", "u3")])]),
    ([(entity(user="u3"), [op("producer_byte_rate", math.inf)])],
     [(INVALID, "Proposed value for producer_byte_rate is too large for a LONG.", [("user", "u3")])]),
    ([(entity(user=""), [op("producer_byte_rate", 1)])], [(INVALID, "Empty user not supported", [("user", "")])]),
    ([(entity(group="g"), [op("producer_byte_rate", 1)])],
     [(INVALID, "Unhandled client quota entity type: group", [("group", "g")])]),
    ([(entity(user="u", ip="1.2.3.4"), [op("producer_byte_rate", 1)])],
     [(INVALID, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
       [("user", "u"), ("ip", "1.2.3.4")])]),
    ([(entity(ip="not a host"), [op("connection_creation_rate", 1)])],
     [(INVALID, "not a host is not a valid IP or resolvable host.", [("ip", "not a host")])]),
    ([(entity(ip="1.2.3.4"), [op("connection_creation_rate", 1.5)])],
     [(INVALID, "connection_creation_rate cannot be a fractional value.", [("ip", "1.2.3.4")])]),
    ([(entity(ip="1.2.3.4"), [op("connection_creation_rate", 2.0**31)])],
     [(INVALID, "Proposed value for connection_creation_rate is too large for an INT.", [("ip", "1.2.3.4")])]),
    ([(entity(ip="1.2.3.4"), [op("producer_byte_rate", 10)])],
     [(INVALID, "Invalid configuration key producer_byte_rate", [("ip", "1.2.3.4")])]),
    ([(entity(user="u4"), [op("bad", remove=True)])], [(0, None, [("user", "u4")])]),
    ([(entity(user="u8"), [])], [(0, None, [("user", "u8")])]),
    ([([{"entity_type": "user", "entity_name": "a"}, {"entity_type": "user", "entity_name": "b"}],
       [op("producer_byte_rate", 1)])], [(0, None, [("user", "b")])]),
    ([(entity(user=None, client_id=None), [op("controller_mutation_rate", 0.5)])],
     [(0, None, [("client-id", None), ("user", None)])]),
    ([(entity(user="u3"), [op("request_percentage", math.nan)])], [(0, None, [("user", "u3")])]),
    ([(entity(user="u3"), [op("request_percentage", math.inf)])], [(0, None, [("user", "u3")])]),
    # Kafka answers in the order of its hash map of entities, not the request's.
    ([(entity(user="u6"), [op("producer_byte_rate", 100)]), (entity(user="u7"), [op("bad", 1)])],
     [(INVALID, "Invalid configuration key bad", [("user", "u7")]), (0, None, [("user", "u6")])]),
])
def test_alterations_are_answered_as_kafka_answers_them(entries, expected):
    assert alter(MetadataImage(), *entries) == expected


def test_an_entity_named_again_is_refused_and_the_first_entry_stands():
    image = MetadataImage()
    assert alter(image, (entity(user="u2"), [op("producer_byte_rate", 100)]),
                 (entity(user="u2"), [op("consumer_byte_rate", 100)])) == [
        (INVALID, "Ignoring duplicate entity ClientQuotaEntity(entries={user=u2})", [("user", "u2")])]
    assert image.client_quotas == {(("user", "u2"),): {"producer_byte_rate": 100.0}}


def test_a_host_name_is_taken_when_the_caller_resolved_it():
    image = MetadataImage()
    assert alter(image, (entity(ip="localhost"), [op("connection_creation_rate", 5)]),
                 resolves={"localhost"}.__contains__) == [(0, None, [("ip", "localhost")])]
    assert image.client_quotas == {(("ip", "localhost"),): {"connection_creation_rate": 5.0}}


def test_only_changes_are_written_and_removing_the_last_key_removes_the_entity():
    image = MetadataImage()
    alice = entity(user="alice")
    records, _ = client_quotas.alter(image, [{"entity": alice, "ops": [op("producer_byte_rate", 1024)]}])
    assert [(r["key"], r["value"], r["remove"]) for r in records] == [("producer_byte_rate", 1024, False)]
    image.apply(records[0])
    unchanged, _ = client_quotas.alter(image, [{"entity": alice, "ops": [op("producer_byte_rate", 1024),
                                                                        op("consumer_byte_rate", remove=True)]}])
    assert unchanged == []
    removal, _ = client_quotas.alter(image, [{"entity": alice, "ops": [op("producer_byte_rate", remove=True)]}])
    assert [(r["key"], r["remove"]) for r in removal] == [("producer_byte_rate", True)]
    image.apply(removal[0])
    assert image.client_quotas == {}


def test_quotas_are_kept_by_snapshots_also_values_json_has_no_number_for():
    image = MetadataImage()
    alter(image, (entity(user=None), [op("request_percentage", math.inf)]),
          (entity(user="bob", client_id="app"), [op("producer_byte_rate", 4096), op("consumer_byte_rate", 8192)]),
          (entity(client_id=None), [op("request_percentage", math.nan)]),
          (entity(ip=None), [op("connection_creation_rate", 10)]))
    records = json.loads(json.dumps(image.snapshot_records(), allow_nan=False))
    restored = MetadataImage()
    restored.load_snapshot(records)
    assert restored.client_quotas.keys() == image.client_quotas.keys()
    assert restored.client_quotas[(("user", None),)] == {"request_percentage": math.inf}
    assert math.isnan(restored.client_quotas[(("client-id", None),)]["request_percentage"])
    assert restored.client_quotas[(("client-id", "app"), ("user", "bob"))] == {
        "consumer_byte_rate": 8192.0, "producer_byte_rate": 4096.0}


def component(entity_type: str, match_type: int, match: str | None = None) -> dict:
    return {"entity_type": entity_type, "match_type": match_type, "match": match}


@pytest.mark.parametrize("components, code, message", [
    ([component("", 2)], INVALID, "Invalid empty entity type."),
    ([component("user", 2), component("user", 0, "a")], INVALID,
     "Entity type user cannot appear more than once in the filter."),
    ([component("topic", 2)], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type topic"),
    ([component("user", 0)], INVALID, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([component("user", 1, "a")], INVALID, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([component("user", 2, "a")], INVALID,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([component("user", 3)], INVALID, "Unknown match type 3"),
    ([component("ip", 2), component("user", 2)], INVALID, "Invalid entity filter component combination. IP filter "
     "component should not be used with user or clientId filter component."),
])
def test_bad_filters_are_refused_as_kafka_refuses_them(components, code, message):
    assert client_quotas.describe(MetadataImage(), components, False) == {
        "error_code": code, "error_message": message, "entries": None}


def test_describe_finds_the_entities_a_filter_matches():
    image = MetadataImage()
    alter(image, (entity(user="alice"), [op("producer_byte_rate", 1024)]),
          (entity(user=None, client_id=None), [op("controller_mutation_rate", 0.5)]),
          (entity(client_id=None), [op("request_percentage", 12.5), op("consumer_byte_rate", 2048)]))

    def found(components, strict=False):
        answer = client_quotas.describe(image, components, strict)
        assert answer["error_code"] == 0 and answer["error_message"] == ""  # Kafka's default message is ""
        return [([(d["entity_type"], d["entity_name"]) for d in e["entity"]],
                 [(v["key"], v["value"]) for v in e["values"]]) for e in answer["entries"]]

    assert found([component("user", 0, "alice")], strict=True) == [([("user", "alice")], [("producer_byte_rate", 1024)])]
    assert found([component("client-id", 1)]) == [
        ([("client-id", None)], [("consumer_byte_rate", 2048), ("request_percentage", 12.5)]),
        ([("client-id", None), ("user", None)], [("controller_mutation_rate", 0.5)])]
    assert len(found([])) == 3 and found([], strict=True) == []
