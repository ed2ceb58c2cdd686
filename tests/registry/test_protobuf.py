"""Protobuf schemas: compiling with protoc, canonical and normalized texts, Confluent's compatibility rules.

Each distinct schema costs a protoc run (about 50 ms); parse() caches them, so the cases below share texts.
"""

import base64

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, struct_pb2

from odradek.registry import protobuf
from odradek.registry.schema_types import InvalidSchema


def p3(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def p2(body: str, package: str = "shop") -> str:
    return f'syntax = "proto2";\npackage {package};\n{body}\n'


def parsed(spec: str | tuple[str, dict[str, str]]) -> protobuf.ProtobufSchema:
    text, references = spec if isinstance(spec, tuple) else (spec, {})
    return protobuf.parse(text, references)


def descriptor_of(schema: protobuf.ProtobufSchema) -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.serialized()))


# Compatibility -------------------------------------------------------------------------------------------

ORDER = p3("message Order { string id = 1; int32 qty = 2; }")
PAY = p3("message Order { string id = 1; oneof pay { string card = 2; string iban = 3; } }")
ITEMS = p3("message Order { message Item { string sku = 1; } repeated Item items = 1; }")
STOCK = p3("message Order { map<string, int32> stock = 1; }")
STATUS = p3("message Order { Status status = 1; } enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }")
PROTO2 = p2("message Order { optional string id = 1; optional int32 qty = 2; optional bytes note = 3; }")
ADDRESS = 'syntax = "proto3";\npackage common;\nmessage Address { string street = 1; string zip = 2; }\n'
SHIPPED = p3('import "com/acme/address.proto";\nmessage Order { common.Address ship_to = 1; }')
AT = p3('import "google/protobuf/timestamp.proto";\nmessage Order { google.protobuf.Timestamp at = 1; }')


def order(fields: str) -> str:
    return p3(f"message Order {{ {fields} }}")


# (id, writer, reader, what reader.read_errors(writer) answers): BACKWARD with the reader as the new schema.
COMPATIBILITY = [
    ("identical", ORDER, ORDER, []),
    ("field added", ORDER, order("string id = 1; int32 qty = 2; string note = 3;"), []),
    ("field removed", ORDER, order("string id = 1;"), []),
    ("field renamed", ORDER, order("string id = 1; int32 quantity = 2;"), []),
    ("field renumbered: one removed, one added", ORDER, order("string id = 1; int32 qty = 3;"), []),
    ("int32 to int64", ORDER, order("string id = 1; int64 qty = 2;"), []),
    ("int32 to uint64", ORDER, order("string id = 1; uint64 qty = 2;"), []),
    ("int32 to bool", ORDER, order("string id = 1; bool qty = 2;"), []),
    (
        "int32 to sint32",
        ORDER,
        order("string id = 1; sint32 qty = 2;"),
        ["#/Order/2: FIELD_SCALAR_KIND_CHANGED"],
    ),
    ("sint32 to sint64", order("sint32 qty = 2;"), order("sint64 qty = 2;"), []),
    ("fixed32 to sfixed32", order("fixed32 qty = 2;"), order("sfixed32 qty = 2;"), []),
    ("fixed64 to sfixed64", order("fixed64 qty = 2;"), order("sfixed64 qty = 2;"), []),
    (
        "fixed32 to fixed64",
        order("fixed32 qty = 2;"),
        order("fixed64 qty = 2;"),
        ["#/Order/2: FIELD_SCALAR_KIND_CHANGED"],
    ),
    (
        "float to double",
        order("float qty = 2;"),
        order("double qty = 2;"),
        ["#/Order/2: FIELD_SCALAR_KIND_CHANGED"],
    ),
    ("string to bytes", ORDER, order("bytes id = 1; int32 qty = 2;"), []),
    (
        "string to int32",
        ORDER,
        order("int32 id = 1; int32 qty = 2;"),
        ["#/Order/1: FIELD_SCALAR_KIND_CHANGED"],
    ),
    (
        "scalar to message",
        ORDER,
        p3("message Order { string id = 1; Qty qty = 2; } message Qty { int32 n = 1; }"),
        ["#/Order/2: FIELD_KIND_CHANGED"],
    ),
    (
        "message to map",
        ITEMS,
        p3("message Order { message Item { string sku = 1; } map<string, Item> items = 1; }"),
        ["#/Order/1: FIELD_KIND_CHANGED"],
    ),
    (
        "scalar to enum",
        ORDER,
        p3("message Order { string id = 1; Size qty = 2; } enum Size { S = 0; M = 1; }"),
        [],
    ),
    ("enum to scalar", STATUS, order("int32 status = 1;"), []),
    (
        "enum value added",
        STATUS,
        p3("message Order { Status status = 1; } enum Status { NEW = 0; PAID = 1; SHIPPED = 2; LOST = 3; }"),
        [],
    ),
    (
        "enum value removed",
        STATUS,
        p3("message Order { Status status = 1; } enum Status { NEW = 0; PAID = 1; }"),
        [],
    ),
    (
        "enum value renamed",
        STATUS,
        p3("message Order { Status status = 1; } enum Status { NEW = 0; SETTLED = 1; SHIPPED = 2; }"),
        [],
    ),
    (
        "field's message type renamed",
        ITEMS,
        p3("message Order { message Line { string sku = 1; } repeated Line items = 1; }"),
        ["#/Order/1: FIELD_NAMED_TYPE_CHANGED", "#/Order/Item: MESSAGE_REMOVED"],
    ),
    (
        "nested message's field changed",
        ITEMS,
        p3("message Order { message Item { int64 sku = 1; } repeated Item items = 1; }"),
        ["#/Order/Item/1: FIELD_SCALAR_KIND_CHANGED"],
    ),
    ("map value widened", STOCK, p3("message Order { map<string, int64> stock = 1; }"), []),
    (
        "map value kind changed",
        STOCK,
        p3("message Order { map<string, string> stock = 1; }"),
        ["#/Order/1: FIELD_SCALAR_KIND_CHANGED"],
    ),
    (
        "map key changed",
        STOCK,
        p3("message Order { map<sint64, int32> stock = 1; }"),
        ["#/Order/1: FIELD_SCALAR_KIND_CHANGED"],
    ),
    # Labels: Confluent compares them only where both fields have one, and only for scalars.
    (
        "proto3 optional number made repeated",
        order("optional int32 qty = 2;"),
        order("repeated int32 qty = 2;"),
        ["#/Order/2: FIELD_NUMERIC_LABEL_CHANGED"],
    ),
    (
        "proto3 optional string made repeated",
        order("optional string id = 1;"),
        order("repeated string id = 1;"),
        [],
    ),
    (
        "proto3 number without a label made repeated",
        ORDER,
        order("string id = 1; repeated int32 qty = 2;"),
        [],
    ),
    (
        "message made repeated",
        ITEMS,
        p3("message Order { message Item { string sku = 1; } Item items = 1; }"),
        [],
    ),
    (
        "proto2 optional made required",
        PROTO2,
        p2("message Order { optional string id = 1; required int32 qty = 2; optional bytes note = 3; }"),
        ["#/Order/2: FIELD_NUMERIC_LABEL_CHANGED"],
    ),
    (
        "proto2 optional number made repeated",
        PROTO2,
        p2("message Order { optional string id = 1; repeated int32 qty = 2; optional bytes note = 3; }"),
        ["#/Order/2: FIELD_NUMERIC_LABEL_CHANGED"],
    ),
    (
        "proto2 optional bytes made repeated",
        PROTO2,
        p2("message Order { optional string id = 1; optional int32 qty = 2; repeated bytes note = 3; }"),
        [],
    ),
    (
        "proto2 required field added",
        PROTO2,
        p2(
            "message Order { optional string id = 1; optional int32 qty = 2; optional bytes note = 3;"
            " required int64 at = 4; }"
        ),
        ["#/Order/4: REQUIRED_FIELD_ADDED"],
    ),
    (
        "proto2 required field removed",
        p2("message Order { required string id = 1; optional int32 qty = 2; }"),
        p2("message Order { optional int32 qty = 2; }"),
        ["#/Order/1: REQUIRED_FIELD_REMOVED"],
    ),
    ("proto2 to proto3", PROTO2, order("string id = 1; int32 qty = 2; bytes note = 3;"), []),
    # Messages and packages.
    (
        "message added",
        ORDER,
        p3("message Order { string id = 1; int32 qty = 2; } message Refund { string id = 1; }"),
        [],
    ),
    (
        "message removed",
        p3("message Order { string id = 1; int32 qty = 2; } message Refund { string id = 1; }"),
        ORDER,
        ["#/Refund: MESSAGE_REMOVED"],
    ),
    (
        "messages reordered",
        p3("message A { int32 a = 1; } message B { int32 b = 1; }"),
        p3("message B { int32 b = 1; } message A { int32 a = 1; }"),
        [],
    ),
    (
        "record type renamed",
        ORDER,
        p3("message Purchase { string id = 1; int32 qty = 2; }"),
        ["#/Order: MESSAGE_REMOVED"],
    ),
    (
        "package changed",
        ORDER,
        p3("message Order { string id = 1; int32 qty = 2; }", package="store"),
        ["#/: PACKAGE_CHANGED"],
    ),
    # Oneofs: data written with fields independent must not become several members of one oneof.
    ("one field into a new oneof", ORDER, order("string id = 1; oneof amount { int32 qty = 2; }"), []),
    (
        "two fields into a new oneof",
        ORDER,
        order("oneof key { string id = 1; int32 qty = 2; }"),
        ["#/Order/key: MULTIPLE_FIELDS_MOVED_TO_ONEOF"],
    ),
    (
        "field into an existing oneof",
        PAY,
        order("oneof pay { string id = 1; string card = 2; string iban = 3; }"),
        ["#/Order/pay: FIELD_MOVED_TO_EXISTING_ONEOF"],
    ),
    (
        "field out of a oneof",
        order("oneof pay { string id = 1; string card = 2; string iban = 3; }"),
        PAY,
        [],
    ),
    (
        "oneof field added",
        PAY,
        order("string id = 1; oneof pay { string card = 2; string iban = 3; string voucher = 4; }"),
        [],
    ),
    (
        "oneof field removed",
        PAY,
        order("string id = 1; oneof pay { string card = 2; }"),
        ["#/Order/pay/3: ONEOF_FIELD_REMOVED"],
    ),
    ("oneof removed with its fields", PAY, order("string id = 1;"), []),
    ("oneof renamed", PAY, order("string id = 1; oneof payment { string card = 2; string iban = 3; }"), []),
    (
        "oneof field's type changed",
        PAY,
        order("string id = 1; oneof pay { int32 card = 2; string iban = 3; }"),
        ["#/Order/pay/2: FIELD_SCALAR_KIND_CHANGED"],
    ),
    # Imports: an imported message is compared where a field uses it, at its own path.
    (
        "imported message unchanged",
        (SHIPPED, {"com/acme/address.proto": ADDRESS}),
        (SHIPPED, {"com/acme/address.proto": ADDRESS}),
        [],
    ),
    (
        "imported message gained a field",
        (SHIPPED, {"com/acme/address.proto": ADDRESS}),
        (SHIPPED, {"com/acme/address.proto": ADDRESS.replace("zip = 2;", "zip = 2; string city = 3;")}),
        [],
    ),
    (
        "imported message changed",
        (SHIPPED, {"com/acme/address.proto": ADDRESS}),
        (SHIPPED, {"com/acme/address.proto": ADDRESS.replace("string zip", "int32 zip")}),
        ["#/Address/2: FIELD_SCALAR_KIND_CHANGED", "#/Order/1: FIELD_NAMED_TYPE_CHANGED"],
    ),
    (
        "message moved into an import",
        p3("message Order { Address ship_to = 1; } message Address { string street = 1; string zip = 2; }"),
        (SHIPPED, {"com/acme/address.proto": ADDRESS}),
        ["#/Address: MESSAGE_REMOVED"],
    ),
    (
        "message moved out of an import",
        (SHIPPED, {"com/acme/address.proto": ADDRESS}),
        p3("message Order { Address ship_to = 1; } message Address { string street = 1; string zip = 2; }"),
        [],
    ),
    (
        "well-known type swapped",
        AT,
        p3('import "google/protobuf/duration.proto";\nmessage Order { google.protobuf.Duration at = 1; }'),
        ["#/Order/1: FIELD_NAMED_TYPE_CHANGED"],
    ),
    (
        "recursive message changed",
        p3("message Node { string name = 1; repeated Node children = 2; }"),
        p3("message Node { int32 name = 1; repeated Node children = 2; }"),
        ["#/Node/1: FIELD_SCALAR_KIND_CHANGED"],
    ),
]


@pytest.mark.parametrize(
    ("writer", "reader", "errors"), [pytest.param(*case[1:], id=case[0]) for case in COMPATIBILITY]
)
def test_compatibility(writer, reader, errors):
    assert sorted(parsed(reader).read_errors(parsed(writer))) == sorted(errors)


def test_compatibility_has_a_direction():
    # Moving a field into an existing oneof breaks old data; moving it out is fine.
    inside = parsed(order("oneof pay { string id = 1; string card = 2; string iban = 3; }"))
    assert parsed(PAY).read_errors(inside) == []
    assert inside.read_errors(parsed(PAY)) == ["#/Order/pay: FIELD_MOVED_TO_EXISTING_ONEOF"]


def test_differences_list_compatible_ones_too():
    writer = parsed(p3("message A { int32 a = 1; } message B { int32 b = 1; }"))
    reader = parsed(p3("message B { int32 b = 1; string c = 2; } message A { int32 a = 1; } message C {}"))
    assert protobuf.differences(writer, reader) == [
        ("MESSAGE_MOVED", "#/A"),
        ("FIELD_ADDED", "#/B/2"),
        ("MESSAGE_MOVED", "#/B"),
        ("MESSAGE_ADDED", "#/C"),
    ]


def test_a_writer_of_another_format_is_not_readable():
    class AvroSchema:
        schema_type = "AVRO"

    assert parsed(ORDER).read_errors(AvroSchema()) == ["the writer's schema is AVRO, not PROTOBUF"]


# Parsing -------------------------------------------------------------------------------------------------


def test_text_is_compiled_and_rendered_canonically():
    schema = parsed(
        """
        // A comment, and an order of imports and options that the canonical text keeps.
        syntax = "proto3";
        package shop.v1;
        import "google/protobuf/timestamp.proto";
        option java_package = "com.shop.v1";
        option go_package = "shop/v1";

        message Order {
          message Item { string sku = 1; uint32 qty = 2; }
          string order_id = 1 [json_name = "id"];
          repeated Item items = 2;
          map<string, Item> by_sku = 3;
          optional google.protobuf.Timestamp placed_at = 4 [deprecated = true];
          oneof payment { string card = 5; string iban = 6; }
          repeated int32 codes = 7 [packed = false];
          reserved 8, 10 to 12;
          reserved "legacy";
          enum Status { option allow_alias = true; NEW = 0; OPEN = 0; PAID = 1; }
        }

        service Orders { rpc Watch(Order) returns (stream Order); }
        """
    )
    assert schema.schema_type == "PROTOBUF"
    assert schema.dependencies() == ["google/protobuf/timestamp.proto"]
    assert schema.canonical() == (
        'syntax = "proto3";\n'
        "package shop.v1;\n"
        "\n"
        'import "google/protobuf/timestamp.proto";\n'
        "\n"
        'option java_package = "com.shop.v1";\n'
        'option go_package = "shop/v1";\n'
        "\n"
        "message Order {\n"
        "  reserved 8, 10 to 12;\n"
        '  reserved "legacy";\n'
        "  message Item {\n"
        "    string sku = 1;\n"
        "    uint32 qty = 2;\n"
        "  }\n"
        '  string order_id = 1 [json_name = "id"];\n'
        "  repeated .shop.v1.Order.Item items = 2;\n"
        "  map<string, .shop.v1.Order.Item> by_sku = 3;\n"
        "  optional .google.protobuf.Timestamp placed_at = 4 [deprecated = true];\n"
        "  oneof payment {\n"
        "    string card = 5;\n"
        "    string iban = 6;\n"
        "  }\n"
        "  repeated int32 codes = 7 [packed = false];\n"
        "  enum Status {\n"
        "    option allow_alias = true;\n"
        "    NEW = 0;\n"
        "    OPEN = 0;\n"
        "    PAID = 1;\n"
        "  }\n"
        "}\n"
        "\n"
        "service Orders {\n"
        "  rpc Watch(.shop.v1.Order) returns (stream .shop.v1.Order);\n"
        "}\n"
    )


def test_a_base64_descriptor_is_a_schema():
    # confluent-kafka's ProtobufSerializer registers the file descriptor its generated class was built from.
    schema = protobuf.parse(base64.b64encode(struct_pb2.DESCRIPTOR.serialized_pb).decode(), {})
    assert "message Struct {" in schema.canonical()
    assert "map<string, .google.protobuf.Value> fields = 1;" in schema.canonical()
    assert [m.name for m in descriptor_of(schema).message_type] == ["Struct", "Value", "ListValue"]


def test_text_and_descriptor_of_one_schema_are_the_same_schema():
    text = p3(
        'import "google/protobuf/timestamp.proto";\n'
        "message Order { string id = 1; google.protobuf.Timestamp at = 2; }"
    )
    from_text = protobuf.parse(text, {})
    # As a generated module holds it: its own file name, no json_name.
    descriptor = descriptor_of(from_text)
    descriptor.name = "shop/order.proto"
    for field in descriptor.message_type[0].field:
        field.ClearField("json_name")
    from_descriptor = protobuf.parse(base64.b64encode(descriptor.SerializeToString()).decode() + "\n", {})
    assert from_descriptor.canonical() == from_text.canonical()
    assert from_descriptor.serialized() == from_text.serialized()
    assert from_descriptor.read_errors(from_text) == from_text.read_errors(from_descriptor) == []


def test_serialized_is_the_descriptor_confluent_answers():
    references = {"com/acme/address.proto": ADDRESS}
    schema = protobuf.parse(SHIPPED, references)
    descriptor = descriptor_of(schema)
    assert descriptor.name == "default"
    assert list(descriptor.dependency) == ["com/acme/address.proto"]
    assert descriptor.message_type[0].field[0].type_name == ".common.Address"
    again = protobuf.parse(schema.serialized(), references)
    assert again.canonical() == schema.canonical()


def test_references_are_text_or_descriptors_at_their_import_paths():
    money = p3("message Money { string currency = 1; int64 units = 2; }", package="common")
    text = p3(
        'import "com/acme/address.proto";\nimport "money.proto";\n'
        "message Order { common.Address ship_to = 1; common.Money total = 2; }"
    )
    references = {"com/acme/address.proto": ADDRESS, "money.proto": protobuf.parse(money, {}).serialized()}
    schema = protobuf.parse(text, references)
    assert schema.dependencies() == ["com/acme/address.proto", "money.proto"]
    assert ".common.Address ship_to = 1;" in schema.canonical()
    assert ".common.Money total = 2;" in schema.canonical()
    # A reference that is itself a descriptor importing another reference.
    middle = protobuf.parse(
        p3('import "com/acme/address.proto";\nmessage Site { common.Address at = 1; }', "site"), references
    )
    top = p3('import "site.proto";\nmessage Visit { site.Site site = 1; }')
    assert protobuf.parse(top, {**references, "site.proto": middle.serialized()}).dependencies() == [
        "site.proto"
    ]


@pytest.mark.parametrize(
    ("path", "type_name", "module"),
    [
        ("google/protobuf/timestamp.proto", "google.protobuf.Timestamp", "google.protobuf.timestamp_pb2"),
        ("google/protobuf/wrappers.proto", "google.protobuf.StringValue", "google.protobuf.wrappers_pb2"),
        ("google/type/money.proto", "google.type.Money", "google.type.money_pb2"),
        (
            "confluent/type/decimal.proto",
            "confluent.type.Decimal",
            "confluent_kafka.schema_registry.confluent.type.decimal_pb2",
        ),
    ],
)
def test_well_known_imports_need_no_reference(path, type_name, module):
    pytest.importorskip(module)
    schema = protobuf.parse(p3(f'import "{path}";\nmessage Order {{ {type_name} value = 1; }}'), {})
    assert schema.dependencies() == [path]
    assert f".{type_name} value = 1;" in schema.canonical()


def test_known_files_are_rendered_faithfully():
    # protoc reads the known files as text rendered from Python's descriptors of them: what it compiles that
    # text to must be Python's descriptors again (but for json_name, which protoc always fills in).
    sources = protobuf._known_sources()
    imports = "".join(f'import "{path}";\n' for path in sources)
    schema = protobuf.parse(f'syntax = "proto3";\n{imports}message M {{}}', {})
    compiled = {file.name: file for file in schema._imported}
    assert compiled.keys() == sources.keys()
    for path in sources:
        expected = descriptor_pb2.FileDescriptorProto.FromString(
            descriptor_pool.Default().FindFileByName(path).serialized_pb
        )
        assert _without_json_names(compiled[path]) == _without_json_names(expected), path


def _without_json_names(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(file)
    messages = list(copy.message_type)
    while messages:
        message = messages.pop()
        for field in [*message.field, *message.extension]:
            field.ClearField("json_name")
        messages += message.nested_type
    for field in copy.extension:
        field.ClearField("json_name")
    return copy


OPTIONS = p2(
    """
    import "google/protobuf/descriptor.proto";
    message Meta { optional string doc = 1; repeated string tags = 2; extensions 100 to 199; }
    extend Meta { optional int32 priority = 100; }
    extend google.protobuf.FieldOptions { optional Meta meta = 50001; repeated string labels = 50002; }
    extend google.protobuf.MessageOptions { optional string owner = 50003; }
    extend google.protobuf.FileOptions { optional double weight = 50004; optional bytes blob = 50005; }
    """,
    package="opt",
)

ROUND_TRIPS = {
    "proto3": (
        p3(
            """
            import "google/protobuf/any.proto";
            option java_multiple_files = true;
            message Order {
              message Item { string sku = 1; }
              string id = 1 [json_name = "orderId"];
              map<string, Item> items = 2;
              message Note { string text = 1; }
              optional int64 version = 3;
              oneof target { string email = 4; Item item = 5; }
              repeated google.protobuf.Any extras = 6 [deprecated = true];
              sint32 delta = 7;
              reserved 20 to max;
              enum Kind {
                KIND_UNSPECIFIED = 0;
                KIND_RETAIL = 1 [deprecated = true];
                reserved 5 to max;
                reserved "X";
              }
            }
            enum Top { TOP_UNSPECIFIED = 0; }
            service Orders {
              option deprecated = true;
              rpc Put(stream Order) returns (Order) { option idempotency_level = IDEMPOTENT; }
            }
            """
        ),
        {},
    ),
    "proto2 with groups, defaults, extensions and custom options": (
        p2(
            """
            import "options.proto";
            option (opt.weight) = -inf;
            option (opt.blob) = "\\001\\377x";
            message Shape {
              option (opt.owner) = "team \\"shapes\\" é";
              message Before { optional int32 z = 1; }
              optional group Corner = 1 {
                optional int32 x = 2;
                repeated group Tag = 3 { required string v = 4; }
              }
              required string name = 5 [
                default = "a\\"b\\n",
                (opt.meta) = { doc: "d" tags: "x" [opt.priority]: 3 },
                (opt.labels) = "l1",
                (opt.labels) = "l2"
              ];
              optional float ratio = 6 [default = inf];
              optional bytes blob = 7 [default = "\\001x"];
              optional double scale = 8 [default = -1.5e-10];
              optional Color color = 9 [default = BLUE];
              map<int64, Before> layers = 10;
              message After { optional int32 z = 1; }
              oneof fill { int32 solid = 11; group Pattern = 12 { optional int32 w = 13; } }
              extensions 100 to 199, 300 to max;
              extend Shape {
                optional int32 area = 100;
                optional group Label = 101 { optional string text = 1; }
              }
              optional uint64 big = 14 [default = 18446744073709551615, jstype = JS_STRING];
              enum Color { RED = -1; BLUE = 2; }
            }
            message Wire { option message_set_wire_format = true; extensions 4 to max; }
            """
        ),
        {"options.proto": OPTIONS},
    ),
    "edition 2023": (
        """
        edition = "2023";
        package ed;
        option features.field_presence = IMPLICIT;
        message Node {
          int32 id = 1 [features.field_presence = LEGACY_REQUIRED];
          Node parent = 2 [features.message_encoding = DELIMITED];
          repeated int32 weights = 3 [features.repeated_field_encoding = EXPANDED];
          reserved legacy;
          enum Flag { option features.enum_type = CLOSED; ON = 1; }
        }
        """,
        {},
    ),
    "Confluent's metadata options": (
        p3(
            """
            import "confluent/meta.proto";
            import "confluent/type/decimal.proto";
            message Price {
              option (confluent.message_meta) = { doc: "a price" };
              confluent.type.Decimal amount = 1 [
                (confluent.field_meta) = { params: [{ key: "precision", value: "8" }] }
              ];
            }
            """
        ),
        {},
    ),
}


@pytest.mark.parametrize(("text", "references"), list(ROUND_TRIPS.values()), ids=list(ROUND_TRIPS))
def test_canonical_text_compiles_back_to_the_same_descriptor(text, references):
    schema = protobuf.parse(text, references)
    again = protobuf.parse(schema.canonical(), references)
    assert descriptor_of(again) == descriptor_of(schema)
    assert again.canonical() == schema.canonical()
    normalized = protobuf.parse(schema.normalized(), references)
    assert normalized.normalized() == schema.normalized()
    assert normalized.read_errors(schema) == schema.read_errors(normalized) == []


def test_canonical_text_names_custom_options():
    text, references = ROUND_TRIPS["proto2 with groups, defaults, extensions and custom options"]
    canonical = protobuf.parse(text, references).canonical()
    assert "option (.opt.weight) = -inf;" in canonical
    assert '(.opt.meta) = { doc: "d" tags: "x" [opt.priority]: 3 }' in canonical
    assert "optional group Corner = 1 [" not in canonical and "optional group Corner = 1 {" in canonical


def test_normalized_text_ignores_form_and_order():
    first = protobuf.parse(
        p3(
            """
            import "google/protobuf/timestamp.proto";
            import "google/protobuf/duration.proto";
            option java_package = "com.shop";
            option go_package = "shop";
            message Order {
              google.protobuf.Timestamp at = 2;
              string id = 1;
              oneof pay { string iban = 4; string card = 3; }
              google.protobuf.Duration took = 5;
            }
            enum Status { NEW = 0; SHIPPED = 2; PAID = 1; }
            """
        ),
        {},
    )
    second = protobuf.parse(
        """// Same schema, written differently.
        syntax = "proto3"; package shop;
        option go_package = "shop";
        import "google/protobuf/duration.proto";
        option java_package = "com.shop";
        import "google/protobuf/timestamp.proto";
        message Order {
          oneof pay { string card = 3; string iban = 4; }
          string id = 1;  /* first */
          .google.protobuf.Timestamp at = 2;
          google.protobuf.Duration took = 5;
        }
        enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
        """,
        {},
    )
    assert first.canonical() != second.canonical()
    assert first.normalized() == second.normalized()
    assert (
        'import "google/protobuf/duration.proto";\nimport "google/protobuf/timestamp.proto";'
        in first.normalized()
    )


def test_parse_is_cached():
    assert protobuf.parse(ORDER, {}) is protobuf.parse(ORDER, {})


INVALID = {
    "empty": ("", {}),
    "blank": (" \n\t", {}),
    "garbage": ("this is not a schema", {}),
    "syntax error": (p3("message Order { string id = 1 }"), {}),
    "unknown type": (p3("message Order { Missing item = 1; }"), {}),
    "missing import": (p3('import "missing.proto";\nmessage Order { string id = 1; }'), {}),
    "import not known without a reference": (
        p3('import "google/protobuf/compiler/plugin.proto";\nmessage Order {}'),
        {},
    ),
    "broken reference": (
        p3('import "other.proto";\nmessage Order { other.Thing t = 1; }'),
        {"other.proto": "message {"},
    ),
    "duplicate field number": (p3("message Order { string id = 1; int32 qty = 1; }"), {}),
    "proto2 field without label": (p2("message Order { string id = 1; }"), {}),
    "nothing defined": ('syntax = "proto3";\npackage shop;\n', {}),
    "base64 that is no descriptor": ("AAAA", {}),
    "descriptor of an undefined type": (
        base64.b64encode(
            descriptor_pb2.FileDescriptorProto(
                name="x.proto",
                syntax="proto3",
                message_type=[
                    descriptor_pb2.DescriptorProto(
                        name="X",
                        field=[
                            descriptor_pb2.FieldDescriptorProto(
                                name="y",
                                number=1,
                                type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                                type_name=".Nowhere",
                            )
                        ],
                    )
                ],
            ).SerializeToString()
        ).decode(),
        {},
    ),
    "reference outside the sources": (p3("message Order {}"), {"../escape.proto": ADDRESS}),
    "absolute reference": (p3("message Order {}"), {"/etc/passwd": ADDRESS}),
    "reference both a file and a directory": (
        p3('import "a.proto";\nmessage Order { A a = 1; }'),
        {"a.proto": p3("message A {}"), "a.proto/b.proto": p3("message B {}")},
    ),
    "NUL character": (p3("message Order { string id = 1; }\0"), {}),
    "lone surrogate": (p3("message Ord\ud800er {}"), {}),
}


@pytest.mark.parametrize(("text", "references"), list(INVALID.values()), ids=list(INVALID))
def test_invalid_schemas_raise_invalid_schema_with_one_line(text, references):
    with pytest.raises(InvalidSchema) as raised:
        protobuf.parse(text, references)
    reason = str(raised.value)
    assert reason and "\n" not in reason
    assert "odradek-protoc-" not in reason  # no temporary paths


def test_protoc_errors_name_the_line():
    with pytest.raises(InvalidSchema, match=r'^default:3:17: "Missing" is not defined\.$'):
        protobuf.parse(p3("message Order { Missing item = 1; }"), {})
