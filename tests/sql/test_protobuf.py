"""ksqlDB's PROTOBUF and PROTOBUF_NOSR formats: the schema ksqlDB derives and registers, byte layouts pinned,
round trips of every type with proto3's defaults for nulls as ksqlDB reads them, Confluent's own Protobuf
serializer and deserializer reading what we write and we reading what they write, and one-line errors."""

import base64
import uuid
from datetime import date, datetime, time
from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    json_format,
    message_factory,
    timestamp_pb2,
    wrappers_pb2,
)
from google.type import date_pb2, timeofday_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.sql.ast import ArrayType, DecimalType, MapType, PrimitiveType, StructField, StructType
from odradek.sql.serde import Column, HttpRegistryClient, KeyRow, SerdeError, key_format, value_format
from tests.registry.conftest import start_registry_node
from tests.sql.test_serde import (
    ADDRESS,
    ALL,
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    ROW,
    SCALAR_ROWS,
    SCALARS,
    STRING,
    TIME,
    TIMESTAMP,
    FakeRegistry,
    cols,
    one_line_error,
)

FRAME = b"\x00\x00\x00\x00\x01\x00"  # magic byte, schema id 1, message indexes [0]
REPRESENTATIONS = [None, "OPTIONAL", "WRAPPER"]

# ROW with no null in the ARRAY: Protobuf's repeated fields cannot hold one
PB_ROW = tuple(["a", "", "c"] if c.name == "TAGS" else v for c, v in zip(ALL, ROW, strict=True))
# What ksqlDB reads back for PB_ROW: a null MAP value is an absent field of its entry, the type's default
PB_ROW_READ = tuple({"x": 1, "y": 0} if c.name == "PROPS" else v for c, v in zip(ALL, PB_ROW, strict=True))
# What ksqlDB reads back for a row of nulls: proto3's defaults for scalars, empty repeated fields, null messages
DEFAULTS = (False, 0, 0, 0.0, None, "", b"", None, None, None, [], {}, None)


def protobuf_value(columns, representation=None, registry=None, fmt="PROTOBUF", topic="t", **properties):
    if representation:
        properties["VALUE_PROTOBUF_NULLABLE_REPRESENTATION"] = representation
    return value_format(fmt, columns, properties, registry or FakeRegistry(), topic)


# ------------------------------------------------------------------------------------- the derived schema

# ksqlDB's own registered schema for simple-struct's ORDERS (its historical plan
# simple-struct_-_simple_struct_select_filter_-_PROTOBUF): nested messages numbered depth first, each declared in
# the message that uses it, a MAP as a repeated entry message, the empty line in a nested message indented.
KSQLDB_SIMPLE_STRUCT = """\
syntax = "proto3";

message ConnectDefault1 {
  int64 ORDERTIME = 1;
  int64 ORDERID = 2;
  ConnectDefault2 ITEMID = 3;
  double ORDERUNITS = 4;
  repeated double ARRAYCOL = 5;
  repeated ConnectDefault4Entry MAPCOL = 6;
  ConnectDefault5 ADDRESS = 7;

  message ConnectDefault2 {
    int64 ITEMID = 1;
    string NAME = 2;
    ConnectDefault3 CATEGORY = 3;

    message ConnectDefault3 {
      int64 ID = 1;
      string NAME = 2;
    }
  }
  message ConnectDefault4Entry {
    string key = 1;
    double value = 2;
  }
  message ConnectDefault5 {
    int64 NUMBER = 1;
    string STREET = 2;
    string CITY = 3;
    string STATE = 4;
    int64 ZIPCODE = 5;
  }
}
""".replace(
    "CATEGORY = 3;\n\n",
    "CATEGORY = 3;\n  \n",  # the line ruff would strip: two spaces, as Confluent writes it
)
SIMPLE_STRUCT = [
    Column("ORDERTIME", BIGINT),
    Column("ORDERID", BIGINT),
    Column(
        "ITEMID",
        StructType(
            (
                StructField("ITEMID", BIGINT),
                StructField("NAME", STRING),
                StructField("CATEGORY", StructType((StructField("ID", BIGINT), StructField("NAME", STRING)))),
            )
        ),
    ),
    Column("ORDERUNITS", DOUBLE),
    Column("ARRAYCOL", ArrayType(DOUBLE)),
    Column("MAPCOL", MapType(STRING, DOUBLE)),
    Column(
        "ADDRESS",
        StructType(
            tuple(
                StructField(name, t)
                for name, t in [
                    ("NUMBER", BIGINT),
                    ("STREET", STRING),
                    ("CITY", STRING),
                    ("STATE", STRING),
                    ("ZIPCODE", BIGINT),
                ]
            )
        ),
    ),
]


def registered(columns, representation=None, **properties) -> tuple[str, str]:
    registry = FakeRegistry()
    protobuf_value(columns, representation, registry, **properties).encode([None] * len(columns))
    [(subject, text)] = registry.subjects
    assert registry.types == {1: "PROTOBUF"}
    return subject, text


def test_schema_is_the_one_ksqldb_registers_for_structs_maps_and_arrays():
    assert registered(SIMPLE_STRUCT) == ("t-value", KSQLDB_SIMPLE_STRUCT)


def test_schema_registered_for_a_struct_a_decimal_and_a_timestamp():
    columns = [
        Column("ID", BIGINT),
        Column("CUSTOMER", StructType((StructField("NAME", STRING), StructField("SINCE", DATE)))),
        Column("AMOUNT", DecimalType(6, 2)),
        Column("AT", TIMESTAMP),
    ]
    # As ksqlDB's decimal_-_PROTOBUF_in_out, but for confluent/meta.proto: ProtobufData uses its field_meta
    # option without importing it, which Confluent's registry lets pass and a registry compiling with protoc
    # does not.
    assert (
        registered(columns)[1]
        == """\
syntax = "proto3";

import "google/type/date.proto";
import "confluent/type/decimal.proto";
import "confluent/meta.proto";
import "google/protobuf/timestamp.proto";

message ConnectDefault1 {
  int64 ID = 1;
  ConnectDefault2 CUSTOMER = 2;
  confluent.type.Decimal AMOUNT = 3 [(confluent.field_meta) = {
    params: [
      {
        value: "6",
        key: "precision"
      },
      {
        value: "2",
        key: "scale"
      }
    ]
  }];
  google.protobuf.Timestamp AT = 4;

  message ConnectDefault2 {
    string NAME = 1;
    google.type.Date SINCE = 2;
  }
}
"""
    )


PRIMITIVES = [
    Column(name, t) for name, t in [("I", INT), ("L", BIGINT), ("D", DOUBLE), ("B", BOOLEAN), ("S", STRING)]
]


def test_schemas_of_the_nullable_representations_are_ksqldbs():
    # ksqlDB's protobuf.json: "protobuf primitives with null and nullable as optional" and "... as wrapper"
    assert registered(PRIMITIVES, "OPTIONAL")[1] == (
        'syntax = "proto3";\n\nmessage ConnectDefault1 {\n  optional int32 I = 1 [deprecated = false];\n'
        "  optional int64 L = 2 [deprecated = false];\n  optional double D = 3 [deprecated = false];\n"
        "  optional bool B = 4 [deprecated = false];\n  optional string S = 5 [deprecated = false];\n}\n"
    )
    assert registered(PRIMITIVES, "wrapper")[1] == (
        'syntax = "proto3";\n\nimport "google/protobuf/wrappers.proto";\n\nmessage ConnectDefault1 {\n'
        "  google.protobuf.Int32Value I = 1;\n  google.protobuf.Int64Value L = 2;\n"
        "  google.protobuf.DoubleValue D = 3;\n  google.protobuf.BoolValue B = 4;\n"
        "  google.protobuf.StringValue S = 5;\n}\n"
    )
    # a map entry's fields stay plain with OPTIONAL; with WRAPPER even its key is a wrapper, as in ProtobufData
    [column] = cols(MapType(STRING, DecimalType(4, 1)))
    assert (
        "  repeated ConnectDefault2Entry C0 = 1;\n\n  message ConnectDefault2Entry {\n    string key = 1;\n"
        in (registered([column], "OPTIONAL")[1])
    )
    assert "    google.protobuf.StringValue key = 1;\n" in registered([column], "WRAPPER")[1]
    # two options on a field are a bracketed list, one per line
    assert registered(cols(DecimalType(4, 1)), "OPTIONAL")[1].endswith(
        "  optional confluent.type.Decimal C0 = 1 [\n    deprecated = false,\n    (confluent.field_meta) = {\n"
        '      params: [\n        {\n          value: "4",\n          key: "precision"\n        },\n'
        '        {\n          value: "1",\n          key: "scale"\n        }\n      ]\n    }\n  ];\n}\n'
    )


def test_schema_full_name_names_the_message_and_its_package():
    columns = [Column("ID", BIGINT), Column("ADDRESS", ADDRESS)]
    subject, text = registered(columns, VALUE_SCHEMA_FULL_NAME="io.shop.Order")
    assert text == (
        'syntax = "proto3";\npackage io.shop;\n\nmessage Order {\n  int64 ID = 1;\n  ConnectDefault1 ADDRESS = 2;\n'
        "\n  message ConnectDefault1 {\n    string CITY = 1;\n    int32 ZIP = 2;\n  }\n}\n"
    )
    # a ConnectDefault name is ignored, as ksqlDB's ProtobufSchemaTranslator ignores it
    assert registered(columns, VALUE_SCHEMA_FULL_NAME=" ConnectDefault7 ") == registered(columns)
    # a nested message that would be named as its field gets ProtobufData's suffix
    assert (
        "  ConnectDefault1Message ConnectDefault1 = 1;\n"
        in registered([Column("ConnectDefault1", ADDRESS)], VALUE_SCHEMA_FULL_NAME="Row")[1]
    )


def test_keys_register_under_the_key_subject_and_are_always_wrapped():
    registry = FakeRegistry()
    key = key_format("PROTOBUF", [Column("ID", STRING)], registry=registry, topic="orders")
    assert key.encode(["k"]) == FRAME + b"\x0a\x01k"  # ConnectDefault1 { string ID = 1; }
    assert registry.subjects == {
        ("orders-key", 'syntax = "proto3";\n\nmessage ConnectDefault1 {\n  string ID = 1;\n}\n'): 1
    }
    assert key.decode(FRAME + b"\x0a\x01k") == KeyRow(("k",))
    assert key.encode([None]) == FRAME  # a message with no field: a key, not a null key
    assert key.decode(FRAME) == KeyRow(("",))
    windowed = key_format("PROTOBUF", [Column("ID", STRING)], "TUMBLING", registry=registry, topic="orders")
    data = windowed.encode(["k"], 1000)
    assert data == FRAME + b"\x0a\x01k" + (1000).to_bytes(8, "big")
    assert windowed.decode(data) == KeyRow(("k",), 1000)


# ------------------------------------------------------------------------------------- byte layouts


def test_value_bytes_are_the_framed_message():
    value = protobuf_value([Column("COUNT", INT), Column("NAME", STRING)])
    assert value.encode([150, "hi"]) == FRAME + bytes.fromhex("08 9601 12 02 6869")
    assert value.encode([0, ""]) == FRAME  # proto3 writes no default scalar
    assert value.decode(FRAME + bytes.fromhex("08 9601 12 02 6869")) == (150, "hi")


def test_bytes_of_every_kind_of_field():
    columns = [
        Column("N", INT),
        Column("D", DOUBLE),
        Column("P", DecimalType(4, 2)),
        Column("T", TIMESTAMP),
        Column("A", ArrayType(INT)),
        Column("S", StructType((StructField("X", STRING),))),
        Column("M", MapType(STRING, INT)),
        Column("DAY", DATE),
        Column("AT", TIME),
    ]
    data = bytes.fromhex(
        "08 ffffffffffffffffff01"  # N: -1, ten bytes of two's complement
        "11 000000000000f03f"  # D: 1.0, 64-bit little-endian
        "1a 08 0a0204ce 1004 1802"  # P: 12.30 as confluent.type.Decimal {value 1230, precision 4, scale 2}
        "22 08 0801 1080cab5ee01"  # T: 1500 ms as google.protobuf.Timestamp {seconds 1, nanos 500000000}
        "2a 04 0102ac02"  # A: [1, 2, 300], packed
        "32 00"  # S: a struct of defaults is still written
        "3a 03 0a0161"  # M: {"a": 0}, one entry {key "a"} with the default value left out
        "42 07 08e707100c181b"  # DAY: 1000-01-01 as the Julian 999-12-27, as Java's Calendar gives it
        "4a 00"  # AT: midnight, google.type.TimeOfDay with every field 0
    )
    row = [
        -1,
        1.0,
        Decimal("12.30"),
        datetime(1970, 1, 1, 0, 0, 1, 500000),
        [1, 2, 300],
        {"X": ""},
        {"a": 0},
        date(1000, 1, 1),
        time(0, 0),
    ]
    value = protobuf_value(columns, fmt="PROTOBUF_NOSR")
    assert value.encode(row) == data
    assert value.decode(data) == tuple(row)
    assert value.encode([None] * len(columns)) == b""  # every field absent
    assert protobuf_value(columns, fmt="PROTOBUF_NOSR", representation="OPTIONAL").encode(
        [0, -0.0, None, None, [], None, {}, None, None]
    ) == bytes.fromhex("08 00 11 0000000000000080")  # optional fields are written when set, even to 0


@pytest.mark.parametrize(
    ("value", "data"),
    [
        (Decimal("0.00"), "0a0100 1001 1802"),  # BigInteger.ZERO.toByteArray() is one zero byte
        (Decimal("-1.28"), "0a0180 1003 1802"),
        (Decimal("1.28"), "0a020080 1003 1802"),
        (Decimal("-1.29"), "0a02ff7f 1003 1802"),
        (Decimal("9999.99"), "0a030f423f 1006 1802"),
    ],
)
def test_decimals_are_javas_big_integer_bytes(value, data):
    decimal = protobuf_value(cols(DecimalType(6, 2)), fmt="PROTOBUF_NOSR")
    message = bytes.fromhex(data)
    assert decimal.encode([value]) == b"\x0a" + bytes([len(message)]) + message
    assert decimal.decode(b"\x0a" + bytes([len(message)]) + message) == (value,)


def test_wrapper_representation_bytes():
    value = protobuf_value(PRIMITIVES, "WRAPPER", fmt="PROTOBUF_NOSR")
    # a set wrapper is written even when it holds the default; a null one is absent
    assert value.encode([0, None, 1.5, False, "x"]) == bytes.fromhex(
        "0a00 1a09 09000000000000f83f 2200 2a03 0a0178"
    )
    assert value.decode(bytes.fromhex("0a00 1a09 09000000000000f83f 2200 2a03 0a0178")) == (
        0,
        None,
        1.5,
        False,
        "x",
    )


def test_protobuf_nosr_single_keys_and_unwrapped_values_are_bare():
    # ksqlDB's PROTOBUF_NOSR unwraps single keys, and single values with WRAP_SINGLE_VALUE=false: a primitive is
    # its google.protobuf wrapper (the same bytes as a message of one field), a STRUCT its own message.
    key = key_format("PROTOBUF_NOSR", [Column("ID", STRING)])
    assert key.encode(["k"]) == b"\x0a\x01k"
    assert key.encode([None]) is None  # a null bare key is a null key
    assert key.decode(b"") == KeyRow(("",))  # an empty StringValue, not null
    value = value_format("PROTOBUF_NOSR", [Column("ADDRESS", ADDRESS)], {"WRAP_SINGLE_VALUE": False})
    assert value.encode([{"CITY": "Oslo", "ZIP": 150}]) == b"\x0a\x04Oslo\x10\x96\x01"
    assert value.decode(b"\x0a\x04Oslo\x10\x96\x01") == ({"CITY": "Oslo", "ZIP": 150},)
    assert value.decode(b"") == ({"CITY": "", "ZIP": 0},)
    assert value.encode([None]) is None
    two = key_format("PROTOBUF_NOSR", [Column("A", INT), Column("B", STRING)])
    assert two.encode([1, "b"]) == b"\x08\x01\x12\x01b"


# ------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("fmt", ["PROTOBUF", "PROTOBUF_NOSR"])
@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_every_type_round_trips_one_column_at_a_time_and_in_one_row(fmt, representation):
    for column, value, read in zip(ALL, PB_ROW, PB_ROW_READ, strict=True):
        one = protobuf_value([column], representation, fmt=fmt)
        assert one.decode(one.encode([value])) == (read,), column
    row = protobuf_value(ALL, representation, fmt=fmt)
    assert row.decode(row.encode(PB_ROW)) == PB_ROW_READ


@pytest.mark.parametrize(
    ("representation", "expected"),
    [
        (None, DEFAULTS),
        ("OPTIONAL", (None,) * 10 + ([], {}, None)),
        ("WRAPPER", (None,) * 10 + ([], {}, None)),
    ],
)
def test_nulls_read_back_as_ksqldb_reads_them(representation, expected):
    value = protobuf_value(ALL, representation)
    assert value.decode(value.encode([None] * len(ALL))) == expected
    # in a struct, the same; in a map entry, a null value is read as the empty message or the default of its
    # type, as Java's getField gives it, whatever the representation
    nested = protobuf_value(
        [
            Column("S", ADDRESS),
            Column("M", MapType(STRING, ADDRESS)),
            Column("W", MapType(STRING, TIMESTAMP)),
        ],
        representation,
    )
    struct_of_nulls = {"CITY": "", "ZIP": 0} if representation is None else {"CITY": None, "ZIP": None}
    assert nested.decode(nested.encode([{"CITY": None, "ZIP": None}, {"k": None}, {"k": None}])) == (
        struct_of_nulls,
        {"k": struct_of_nulls},
        {"k": datetime(1970, 1, 1)},
    )


def test_a_null_date_or_decimal_map_value_cannot_be_read_back_as_in_ksqldb():
    # Java's getField gives the entry's absent value as the empty message: midnight for a TimeOfDay, but no
    # valid date for a Date and no BigInteger for a Decimal's empty bytes
    columns = [
        Column("D", MapType(STRING, DATE)),
        Column("P", MapType(STRING, DecimalType(4, 2))),
        Column("T", MapType(STRING, TIME)),
    ]
    value = protobuf_value(columns, fmt="PROTOBUF_NOSR")
    assert value.decode(value.encode([{}, {}, {"k": None}])) == ({}, {}, {"k": time(0)})
    for row, reason in [
        ([{"k": None}, {}, {}], "D[0].value: a Date of year 0, month 0, day 0 is not valid"),
        ([{}, {"k": None}, {}], "P[0].value: a Decimal without value bytes"),
    ]:
        with pytest.raises(SerdeError) as excinfo:
            value.decode(value.encode(row))
        assert one_line_error(excinfo) == f"PROTOBUF_NOSR value: {reason}"


def test_ksqldbs_own_protobuf_null_cases():
    # ksqlDB's protobuf.json: "protobuf primitives with null" and its OPTIONAL and WRAPPER variants
    first, second = (None, 0, None, False, None), (0, None, 0.0, None, "")
    for representation in REPRESENTATIONS:
        for fmt in ("PROTOBUF", "PROTOBUF_NOSR"):
            value = protobuf_value(PRIMITIVES, representation, fmt=fmt)
            expected = [(0, 0, 0.0, False, "")] * 2 if representation is None else [first, second]
            assert [value.decode(value.encode(row)) for row in (first, second)] == expected
    # "serialize nested array - value", "... map ...", "protobuf defaults - empty struct fills defaults"
    containers = protobuf_value(
        [
            Column("A", ArrayType(BIGINT)),
            Column("M", MapType(STRING, DOUBLE)),
            Column("S", StructType((StructField("FOO", INT),))),
        ]
    )
    assert containers.decode(containers.encode([None, None, {"FOO": None}])) == ([], {}, {"FOO": 0})
    assert containers.decode(containers.encode([[12, 34, 999], {"a": 1.1}, None])) == (
        [12, 34, 999],
        {"a": 1.1},
        None,
    )


def test_nested_containers_round_trip():
    columns = [
        Column("ITEMS", ArrayType(ADDRESS)),
        Column("BY_NAME", MapType(STRING, ArrayType(INT))),
        Column("DEEP", MapType(STRING, MapType(STRING, DecimalType(4, 2)))),
        Column("DAYS", ArrayType(DATE)),
    ]
    row = (
        [{"CITY": "Oslo", "ZIP": 150}, {"CITY": "", "ZIP": 0}],
        {"a": [1, -2], "b": []},
        {"x": {"y": Decimal("-0.01")}, "": {}},
        [date(1582, 10, 4), date(1582, 10, 15), date(1, 1, 1), date(9999, 12, 31)],
    )
    for representation in REPRESENTATIONS:
        value = protobuf_value(columns, representation)
        assert value.decode(value.encode(row)) == row


def test_reading_follows_protobufs_rules():
    value = protobuf_value(
        [Column("N", INT), Column("A", ArrayType(INT)), Column("S", ADDRESS), Column("NAME", STRING)],
        fmt="PROTOBUF_NOSR",
    )
    data = bytes.fromhex(
        "0801 0802"  # a scalar given twice: the last wins
        "10 05 10 06 12 02 0708"  # a repeated number unpacked and packed alike
        "1a 03 0a0141 1a 03 1096 01"  # a message given twice: merged
        "f80101 2a 02 6869 5d 01000000 39 0100000000000000 63 0801 64"  # unknown fields of every wire type
    )
    assert value.decode(data) == (2, [5, 6, 7, 8], {"CITY": "A", "ZIP": 150}, "")


def test_large_and_negative_numbers():
    value = protobuf_value([Column("I", INT), Column("L", BIGINT), Column("D", DOUBLE)], fmt="PROTOBUF_NOSR")
    for row in [(-(2**31), -(2**63), float("inf")), (2**31 - 1, 2**63 - 1, -0.0), (-1, 1, 5e-324)]:
        assert value.decode(value.encode(row)) == row
    # an int32 read from a wider varint keeps its low 32 bits, as Java's readInt32 does
    assert value.decode(b"\x08" + bytes.fromhex("ffffffff1f")) == (-1, 0, 0.0)


# ------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "does not start with the schema registry's magic byte 0 and a schema id"),
        (
            b"\x01\x00\x00\x00\x01\x00\x08\x01",
            "does not start with the schema registry's magic byte 0 and a schema id",
        ),
        (b"\x00\x00\x00\x00\x01", "the message indexes: truncated varint"),
        (b"\x00\x00\x00\x00\x01\x06\x00", "the message indexes have a count of 3"),
        (b"\x00\x00\x00\x00\x01\x02\x01", "the message indexes have a negative index -1"),
        (FRAME + b"\x08", "truncated varint"),
        (FRAME + b"\x08" + b"\xff" * 10, "malformed varint (more than 10 bytes)"),
        (
            FRAME + b"\x0a\x01\x05",
            "COUNT: field 1 has wire type 2 (length-delimited), expected 0 (varint) for int32",
        ),
        (
            FRAME + b"\x15\x00\x00\x00\x00",
            "NAME: field 2 has wire type 5 (32-bit), expected 2 (length-delimited) for string",
        ),
        (FRAME + b"\x12\x05hi", "truncated field 2: 5 bytes, 2 left"),
        (FRAME + b"\x12\x02\xff\xfe", "NAME: a string is not valid UTF-8"),
        (FRAME + b"\x00\x01", "invalid field number 0"),
        (FRAME + b"\x0f", "field 1 has wire type 7, which is not one of Protobuf's"),
        (FRAME + b"\x0c", "an end of group 1 outside a group"),
        (FRAME + b"\x0b\x08\x01", "truncated group 1"),
        (FRAME + b"\x1a\x00", "PRICE: a Decimal without value bytes"),
        (FRAME + b"\x1a\x04\x0a\x02\x27\x10", "PRICE: 10000 does not fit DECIMAL(4, 2)"),
        (
            FRAME + b"\x22\x0d\x08\x01\x10" + b"\xff" * 9 + b"\x01",
            "TS: a Timestamp of 1 s and -1 ns is not valid",
        ),
        (
            FRAME + b"\x2a\x07\x08\xcc\x0f\x10\x02\x18\x1e",
            "DAY: a Date of year 1996, month 2, day 30 is not valid",
        ),
        (FRAME + b"\x32\x02\x08\x18", "AT: a TimeOfDay of 24:0:0 and 0 ns is not valid"),
        (FRAME + b"\x3b" * 101 + b"\x3c" * 101, "groups nested more than 100 deep"),
        (
            FRAME + b"\x1a\xd6\x0f\x0a\xd1\x0f\x01" + b"\x00" * 2000 + b"\x18\x02",
            "PRICE: a Decimal of 2001 value bytes and scale 2 fits no DECIMAL column",
        ),
        (
            FRAME + b"\x1a\x0e\x0a\x01\x01\x18" + b"\xc0\xfb\xc2\xff\xff\xff\xff\xff\xff\x01",
            "PRICE: a Decimal of 1 value bytes and scale -1000000 fits no DECIMAL column",
        ),
    ],
)
def test_records_that_cannot_be_read_are_errors(data, reason):
    columns = [
        Column("COUNT", INT),
        Column("NAME", STRING),
        Column("PRICE", DecimalType(4, 2)),
        Column("TS", TIMESTAMP),
        Column("DAY", DATE),
        Column("AT", TIME),
    ]
    registry = FakeRegistry()
    value = protobuf_value(columns, registry=registry)
    value.encode([None] * len(columns))  # registers schema 1
    with pytest.raises(SerdeError) as excinfo:
        value.decode(data)
    assert one_line_error(excinfo) == f"PROTOBUF value: {reason}"


def test_unknown_schema_ids_and_schemas_that_are_not_protobuf():
    registry = FakeRegistry()
    avro_id = registry.add({"type": "record", "name": "R", "fields": []})
    value = protobuf_value([Column("N", INT)], registry=registry)
    with pytest.raises(SerdeError) as excinfo:
        value.decode(b"\x00\x00\x00\x00\x63\x00")
    assert one_line_error(excinfo) == "no schema 99"  # the registry's own error
    with pytest.raises(SerdeError) as excinfo:
        value.decode(b"\x00" + avro_id.to_bytes(4, "big") + b"\x00")
    assert one_line_error(excinfo) == (
        f"PROTOBUF value: schema {avro_id} is not a Protobuf schema (is the record Avro or JSON_SR?)"
    )
    # a schema of another Protobuf writer is fine: the message is read by field number
    other = registry.register("other", 'syntax = "proto3"; message M { int32 n = 1; }', "PROTOBUF")
    assert value.decode(b"\x00" + other.to_bytes(4, "big") + b"\x02\x02\x08\x07") == (7,)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ([[1, None]], "PROTOBUF_NOSR value: C0[1]: Protobuf cannot hold a null in an ARRAY"),
        (["\ud800"], "PROTOBUF_NOSR value: C0: a string is not valid Unicode (a lone surrogate)"),
        ([Decimal("1.234")], "PROTOBUF_NOSR value: C0: 1.234 does not fit DECIMAL(4, 2) without rounding"),
    ],
)
def test_rows_that_cannot_be_written_are_errors(row, reason):
    column = {list: ArrayType(INT), str: STRING, Decimal: DecimalType(4, 2)}[type(row[0])]
    with pytest.raises(SerdeError) as excinfo:
        protobuf_value(cols(column), fmt="PROTOBUF_NOSR").encode(row)
    assert one_line_error(excinfo) == reason


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: value_format("PROTOBUF", cols(INT)),
            "VALUE_FORMAT PROTOBUF needs a schema registry (set the SQL server's schema registry URL)",
        ),
        (
            lambda: value_format("PROTOBUF", cols(INT), {"WRAP_SINGLE_VALUE": False}, FakeRegistry()),
            "VALUE_FORMAT PROTOBUF does not support WRAP_SINGLE_VALUE=false",
        ),
        (
            lambda: value_format("PROTOBUF", cols(MapType(INT, INT)), registry=FakeRegistry()),
            "VALUE_FORMAT PROTOBUF supports only MAPs with STRING keys: column C0 is MAP<INTEGER, INTEGER>",
        ),
        (
            lambda: value_format("PROTOBUF_NOSR", cols(ArrayType(ArrayType(INT)))),
            "VALUE_FORMAT PROTOBUF_NOSR does not support ARRAY<ARRAY<INTEGER>> (field C0): ksqlDB's Protobuf "
            "cannot nest an ARRAY or MAP directly in an ARRAY",
        ),
        (
            lambda: value_format("PROTOBUF_NOSR", [Column("a-b", INT)]),
            "VALUE_FORMAT PROTOBUF_NOSR cannot name the column or field 'a-b': Protobuf names are letters, "
            "digits and _, not starting with a digit",
        ),
        (
            lambda: key_format("PROTOBUF_NOSR", cols(ArrayType(INT))),
            "KEY_FORMAT PROTOBUF_NOSR writes a single key column bare, and Protobuf has no bare ARRAY<INTEGER> "
            "(column C0): only a STRUCT or a BOOLEAN, INT, BIGINT, DOUBLE, STRING or BYTES",
        ),
        (
            lambda: value_format("PROTOBUF_NOSR", cols(TIMESTAMP), {"WRAP_SINGLE_VALUE": "false"}),
            "VALUE_FORMAT PROTOBUF_NOSR writes a single value column with WRAP_SINGLE_VALUE=false bare, and "
            "Protobuf has no bare TIMESTAMP (column C0): only a STRUCT or a BOOLEAN, INT, BIGINT, DOUBLE, STRING "
            "or BYTES",
        ),
        (
            lambda: value_format(
                "PROTOBUF_NOSR", cols(INT), {"VALUE_PROTOBUF_NULLABLE_REPRESENTATION": "NULL"}
            ),
            "VALUE_PROTOBUF_NULLABLE_REPRESENTATION must be OPTIONAL or WRAPPER, got 'NULL'",
        ),
        (
            lambda: value_format("JSON", cols(INT), {"VALUE_PROTOBUF_NULLABLE_REPRESENTATION": "OPTIONAL"}),
            "VALUE_PROTOBUF_NULLABLE_REPRESENTATION is only for VALUE_FORMAT PROTOBUF or PROTOBUF_NOSR, not JSON",
        ),
        (
            lambda: key_format(
                "PROTOBUF", cols(INT), properties={"KEY_SCHEMA_ID": 3}, registry=FakeRegistry()
            ),
            "KEY_SCHEMA_ID is only for KEY_FORMAT AVRO or JSON_SR, not PROTOBUF",
        ),
        (
            lambda: value_format("PROTOBUF_NOSR", cols(INT), {"VALUE_SCHEMA_FULL_NAME": "a.B"}),
            "VALUE_SCHEMA_FULL_NAME is only for VALUE_FORMAT AVRO or PROTOBUF, not PROTOBUF_NOSR",
        ),
        (
            lambda: value_format("PROTOBUF", cols(INT), {"VALUE_SCHEMA_FULL_NAME": "a..B"}, FakeRegistry()),
            "VALUE_SCHEMA_FULL_NAME must be a dotted Protobuf name, got 'a..B'",
        ),
        (
            lambda: value_format("JSON", cols(INT), {"VALUE_SCHEMA_FULL_NAME": "a.B"}),
            "VALUE_SCHEMA_FULL_NAME is only for VALUE_FORMAT AVRO or PROTOBUF, not JSON",
        ),
        (
            lambda: value_format("PROTOBUF", cols(INT), {"VALUE_AVRO_SCHEMA_FULL_NAME": "a.B"}, FakeRegistry()),
            "VALUE_AVRO_SCHEMA_FULL_NAME is only for VALUE_FORMAT AVRO, not PROTOBUF",
        ),
    ],
)
def test_formats_that_cannot_be_used_as_asked(make, message):
    with pytest.raises(SerdeError) as excinfo:
        make()
    assert one_line_error(excinfo) == message


# ------------------------------------------------------------------- Confluent's serializer and deserializer


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory):
    """Odradek's own schema registry (it compiles what we register with protoc and serves it back in the
    serialized form confluent-kafka's Protobuf serde asks for)."""
    node = start_registry_node(tmp_path_factory.mktemp("registry") / "data")
    yield node.registry_url
    node.stop()


def message_class(client: SchemaRegistryClient, schema_id: int):
    """The message class of a registered schema, built at run time from its serialized FileDescriptorProto."""
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2

    pool = descriptor_pool.DescriptorPool()
    for module in (
        descriptor_pb2,
        timestamp_pb2,
        wrappers_pb2,
        date_pb2,
        timeofday_pb2,
        meta_pb2,
        decimal_pb2,
    ):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    serialized = client.get_schema(schema_id, fmt="serialized").schema_str
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    pool.Add(file)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{file.package}.ConnectDefault1".lstrip("."))
    )


# every type of ALL, and arrays of a number and of a STRUCT
DIFFERENTIAL_COLUMNS = [*ALL[:11], Column("SCORES", ArrayType(DOUBLE)), *ALL[11:], Column("HOMES", ArrayType(ADDRESS))]
DIFFERENTIAL_ROW = (
    True,
    -7,
    1 << 40,
    2.5,
    Decimal("-1234.50"),
    "Zoë",
    b"\x00\xff",
    date(2024, 2, 29),
    time(13, 14, 15, 16000),
    datetime(2024, 2, 29, 13, 14, 15, 16000),
    ["a", ""],
    [0.5, -0.0],
    {"x": 1, "y": 0},
    {"CITY": "Oslo", "ZIP": 0},
    [{"CITY": "", "ZIP": 1}],
)
# The same row in proto3's JSON mapping, as Python's protobuf prints it (defaults left out)
DIFFERENTIAL_JSON = {
    "FLAG": True,
    "COUNT": -7,
    "ID": "1099511627776",
    "SCORE": 2.5,
    "PRICE": {
        "value": base64.b64encode((-123450).to_bytes(3, "big", signed=True)).decode(),
        "precision": 6,
        "scale": 2,
    },
    "NAME": "Zoë",
    "RAW": "AP8=",
    "DAY": {"year": 2024, "month": 2, "day": 29},
    "AT": {"hours": 13, "minutes": 14, "seconds": 15, "nanos": 16000000},
    "TS": "2024-02-29T13:14:15.016Z",
    "TAGS": ["a", ""],
    "SCORES": [0.5, -0.0],
    "PROPS": [{"key": "x", "value": "1"}, {"key": "y"}],
    "ADDRESS": {"CITY": "Oslo"},
    "HOMES": [{"ZIP": 1}],
}


@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_confluents_protobuf_serde_reads_what_we_write_and_we_read_what_it_writes(
    registry_url, representation
):
    topic = f"pb-{uuid.uuid4().hex[:8]}"
    ours = protobuf_value(DIFFERENTIAL_COLUMNS, representation, HttpRegistryClient(registry_url), topic=topic)
    data = ours.encode(DIFFERENTIAL_ROW)
    latest = SchemaRegistryClient({"url": registry_url}).get_latest_version(f"{topic}-value")
    # a client of its own: confluent-kafka caches a schema in whichever form it first asked for
    client = SchemaRegistryClient({"url": registry_url})
    assert (
        latest.schema.schema_type == "PROTOBUF"
        and data[:6] == b"\x00" + latest.schema_id.to_bytes(4, "big") + b"\x00"
    )
    cls = message_class(client, latest.schema_id)
    context = SerializationContext(topic, MessageField.VALUE)

    theirs = ProtobufDeserializer(cls, {"use.deprecated.format": False}, client)(data, context)
    expected = dict(DIFFERENTIAL_JSON)
    if representation is not None:  # with presence, a field set to its default is printed
        expected.update({"ADDRESS": {"CITY": "Oslo", "ZIP": 0}, "HOMES": [{"CITY": "", "ZIP": 1}]})
    if representation == "WRAPPER":
        expected.update({"PROPS": [{"key": "x", "value": "1"}, {"key": "y", "value": "0"}]})
    assert json_format.MessageToDict(theirs, preserving_proto_field_name=True) == expected
    assert theirs.SerializeToString() == data[6:]  # Python's protobuf writes the very same bytes

    serializer = ProtobufSerializer(
        cls,
        client,
        {"auto.register.schemas": False, "use.latest.version": True, "use.deprecated.format": False},
    )
    written = serializer(json_format.ParseDict(expected, cls()), context)
    assert written == data
    assert ours.decode(written) == DIFFERENTIAL_ROW

    # a key: its own subject, one wrapped column
    key = key_format(
        "PROTOBUF", [Column("ID", STRING)], registry=HttpRegistryClient(registry_url), topic=topic
    )
    key_data = key.encode(["k-1"])
    key_id = SchemaRegistryClient({"url": registry_url}).get_latest_version(f"{topic}-key").schema_id
    key_class = message_class(client, key_id)
    key_context = SerializationContext(topic, MessageField.KEY)
    assert (
        ProtobufDeserializer(key_class, {"use.deprecated.format": False}, client)(key_data, key_context).ID
        == "k-1"
    )
    assert key.decode(
        ProtobufSerializer(key_class, client, {"use.deprecated.format": False})(
            key_class(ID="k-2"), key_context
        )
    ) == KeyRow(("k-2",))


# ------------------------------------------------------------------------------------- property


def defaulted(value, column):
    """What proto3 gives back for a value ksqlDB writes without a nullable representation."""
    if value is not None or not isinstance(column.type, PrimitiveType):
        return value
    return {"BOOLEAN": False, "INT": 0, "BIGINT": 0, "DOUBLE": 0.0, "STRING": "", "BYTES": b""}.get(
        column.type.name
    )


NESTED = [
    Column("TAGS", ArrayType(STRING)),
    Column("PROPS", MapType(STRING, BIGINT)),
    Column("ADDRESS", ADDRESS),
]
NESTED_ROWS = st.tuples(
    st.lists(st.text(), max_size=3),
    st.dictionaries(st.text(), st.integers(-(2**63), 2**63 - 1), max_size=3),
    st.none() | st.fixed_dictionaries({"CITY": st.text(), "ZIP": st.integers(-(2**31), 2**31 - 1)}),
)


@settings(deadline=None, max_examples=200)
@given(SCALAR_ROWS, NESTED_ROWS)
def test_protobuf_reads_back_what_it_writes(scalars, nested):
    columns, row = SCALARS + NESTED, scalars + nested
    for representation in REPRESENTATIONS:
        for fmt in ("PROTOBUF", "PROTOBUF_NOSR"):
            value = protobuf_value(columns, representation, fmt=fmt)
            expected = (
                row if representation else tuple(defaulted(v, c) for v, c in zip(row, columns, strict=True))
            )
            assert value.decode(value.encode(row)) == expected, (representation, fmt)
