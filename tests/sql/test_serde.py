"""The SQL layer's serialization formats: ksqlDB's byte layouts pinned, round trips of every type, coercions,
and one-line errors for bad records and for formats that cannot be used as asked."""

import base64
import io
import json
import struct
import threading
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fastavro
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.sql.ast import ArrayType, DecimalType, MapType, PrimitiveType, StructField, StructType
from odradek.sql.serde import (
    Column,
    HttpRegistryClient,
    KeyRow,
    SerdeError,
    _java_double,
    key_format,
    value_format,
)

BOOLEAN, INT, BIGINT, DOUBLE = (
    PrimitiveType("BOOLEAN"),
    PrimitiveType("INT"),
    PrimitiveType("BIGINT"),
    PrimitiveType("DOUBLE"),
)
STRING, BYTES = PrimitiveType("STRING"), PrimitiveType("BYTES")
DATE, TIME, TIMESTAMP = PrimitiveType("DATE"), PrimitiveType("TIME"), PrimitiveType("TIMESTAMP")
ADDRESS = StructType((StructField("CITY", STRING), StructField("ZIP", INT)))

# One column of every type, and a row of values for them
ALL = [
    Column("FLAG", BOOLEAN),
    Column("COUNT", INT),
    Column("ID", BIGINT),
    Column("SCORE", DOUBLE),
    Column("PRICE", DecimalType(6, 2)),
    Column("NAME", STRING),
    Column("RAW", BYTES),
    Column("DAY", DATE),
    Column("AT", TIME),
    Column("TS", TIMESTAMP),
    Column("TAGS", ArrayType(STRING)),
    Column("PROPS", MapType(STRING, BIGINT)),
    Column("ADDRESS", ADDRESS),
]
ROW = (
    True,
    -7,
    1 << 40,
    2.5,
    Decimal("1234.50"),
    'Zoë "q"',
    b"\x00\xffabc",
    date(2024, 2, 29),
    time(13, 14, 15, 16000),
    datetime(2024, 2, 29, 13, 14, 15, 16000),
    ["a", None, "c"],
    {"x": 1, "y": None},
    {"CITY": "Oslo", "ZIP": 150},
)
ROW_JSON = (
    b'{"FLAG":true,"COUNT":-7,"ID":1099511627776,"SCORE":2.5,"PRICE":1234.50,"NAME":"Zo\xc3\xab \\"q\\"",'
    b'"RAW":"AP9hYmM=","DAY":19782,"AT":47655016,"TS":1709212455016,"TAGS":["a",null,"c"],'
    b'"PROPS":{"x":1,"y":null},"ADDRESS":{"CITY":"Oslo","ZIP":150}}'
)
SCALARS = [c for c in ALL if isinstance(c.type, PrimitiveType | DecimalType)]
SCALAR_ROW = tuple(v for c, v in zip(ALL, ROW, strict=True) if c in SCALARS)


class FakeRegistry:
    """The RegistryClient protocol over dicts: ids from 1, the same schema under a subject keeps its id."""

    def __init__(self):
        self.schemas: dict[int, str] = {}
        self.types: dict[int, str] = {}
        self.subjects: dict[tuple[str, str], int] = {}
        self.registrations = 0

    def register(self, subject: str, schema: str, schema_type: str) -> int:
        self.registrations += 1
        if (subject, schema) not in self.subjects:
            schema_id = len(self.schemas) + 1
            self.schemas[schema_id], self.types[schema_id] = schema, schema_type
            self.subjects[(subject, schema)] = schema_id
        return self.subjects[(subject, schema)]

    def schema_by_id(self, schema_id: int) -> str:
        if schema_id not in self.schemas:
            raise SerdeError(f"no schema {schema_id}")
        return self.schemas[schema_id]

    def add(self, schema: dict | str) -> int:
        return self.register("other", schema if isinstance(schema, str) else json.dumps(schema), "AVRO")


def one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message
    return message


def cols(*types) -> list[Column]:
    return [Column(f"C{i}", t) for i, t in enumerate(types)]


# ------------------------------------------------------------------------------------- KAFKA


@pytest.mark.parametrize(
    ("sql_type", "value", "data"),
    [
        (INT, 42, b"\x00\x00\x00\x2a"),
        (INT, -1, b"\xff\xff\xff\xff"),
        (BIGINT, 42, b"\x00\x00\x00\x00\x00\x00\x00\x2a"),
        (BIGINT, -(1 << 63), b"\x80" + b"\x00" * 7),
        (DOUBLE, 1.5, b"\x3f\xf8" + b"\x00" * 6),
        (STRING, "Zoë", "Zoë".encode()),
        (STRING, "", b""),
        (BYTES, b"\x00\x01", b"\x00\x01"),
    ],
)
def test_kafka_writes_kafkas_own_serializers_bytes(sql_type, value, data):
    for fmt in (key_format("KAFKA", cols(sql_type)), value_format("KAFKA", cols(sql_type))):
        assert fmt.encode([value]) == data
    assert key_format("KAFKA", cols(sql_type)).decode(data) == KeyRow((value,))
    assert value_format("KAFKA", cols(sql_type)).decode(data) == (value,)


def test_kafka_nulls_and_no_columns():
    key = key_format("kafka", cols(INT))
    assert key.decode(None) == KeyRow((None,))
    assert key.encode([None]) is None
    value = value_format("KAFKA", cols(STRING))
    assert value.decode(None) is None and value.encode(None) is None
    keyless = key_format("KAFKA", [])
    assert keyless.decode(b"whatever") == KeyRow(())
    assert keyless.encode([]) is None


def test_kafka_strings_replace_what_utf8_cannot_say_as_java_does():
    assert value_format("KAFKA", cols(STRING)).decode(b"a\xffb") == ("a\ufffdb",)
    assert value_format("KAFKA", cols(STRING)).encode(["a\ud800b"]) == b"a?b"


@pytest.mark.parametrize(("sql_type", "data"), [(INT, b"\x00\x00\x2a"), (BIGINT, b"\x00" * 4), (DOUBLE, b"")])
def test_kafka_wrong_length_is_an_error(sql_type, data):
    with pytest.raises(SerdeError) as excinfo:
        key_format("KAFKA", cols(sql_type)).decode(data)
    assert (
        one_line_error(excinfo)
        == f"KAFKA key: {sql_type.name} needs {8 if sql_type != INT else 4} bytes, got {len(data)}"
    )


@pytest.mark.parametrize(
    ("sql_type", "value"), [(INT, 1 << 31), (INT, "1"), (BIGINT, True), (DOUBLE, "x"), (STRING, 1)]
)
def test_kafka_refuses_values_of_the_wrong_type(sql_type, value):
    with pytest.raises(SerdeError) as excinfo:
        value_format("KAFKA", cols(sql_type)).encode([value])
    assert one_line_error(excinfo).startswith("KAFKA value: C0: ")


def test_kafka_supports_one_column():
    with pytest.raises(SerdeError) as excinfo:
        key_format("KAFKA", cols(INT, INT))
    assert one_line_error(excinfo) == "KEY_FORMAT KAFKA supports one key column, got 2"
    with pytest.raises(SerdeError, match="VALUE_FORMAT KAFKA supports one value column, got 2"):
        value_format("KAFKA", cols(INT, INT))


@pytest.mark.parametrize(
    ("sql_type", "text"),
    [
        (BOOLEAN, "BOOLEAN"),
        (DecimalType(4, 2), "DECIMAL(4, 2)"),
        (ArrayType(INT), "ARRAY<INTEGER>"),
        (StructType((StructField("F", INT),)), "STRUCT<`F` INTEGER>"),
        (DATE, "DATE"),
        (TIME, "TIME"),
        (TIMESTAMP, "TIMESTAMP"),
    ],
)
def test_kafka_refuses_types_it_has_no_serializer_for(sql_type, text):
    with pytest.raises(SerdeError) as excinfo:
        value_format("KAFKA", cols(sql_type))
    assert one_line_error(excinfo) == f"VALUE_FORMAT KAFKA does not support column C0 of type {text}"
    with pytest.raises(SerdeError, match="MAP<STRING, INTEGER>"):
        value_format("KAFKA", cols(MapType(STRING, INT)))


# ------------------------------------------------------------------------------------- windowed keys


def test_tumbling_and_hopping_keys_are_the_key_then_the_window_start():
    for window in ("TUMBLING", "HOPPING"):
        key = key_format("KAFKA", cols(INT), window=window)
        data = key.encode([42], window_start=1_700_000_000_000)
        assert data == b"\x00\x00\x00\x2a" + b"\x00\x00\x01\x8b\xcf\xe5\x68\x00"
        assert key.decode(data) == KeyRow((42,), 1_700_000_000_000, None)


def test_session_keys_are_the_key_then_the_window_end_then_start():
    key = key_format("JSON", cols(STRING), window="SESSION")
    data = key.encode(["alice"], window_start=1000, window_end=2500)
    assert data == b'"alice"' + struct.pack(">qq", 2500, 1000)
    assert key.decode(data) == KeyRow(("alice",), 1000, 2500)
    assert key.decode(None) == KeyRow((None,))


def test_windowed_key_errors():
    with pytest.raises(SerdeError) as excinfo:
        key_format("KAFKA", cols(INT), window="SESSION").decode(b"\x00" * 15)
    assert one_line_error(excinfo) == "KAFKA key: a windowed key needs at least 16 bytes, got 15"
    with pytest.raises(SerdeError, match="a TUMBLING key needs its window_start"):
        key_format("KAFKA", cols(INT), window="TUMBLING").encode([1])
    with pytest.raises(SerdeError, match="window_start and window_end"):
        key_format("KAFKA", cols(INT), window="SESSION").encode([1], window_start=5)
    with pytest.raises(SerdeError, match="unknown window kind 'SLIDING'"):
        key_format("KAFKA", cols(INT), window="SLIDING")


# ------------------------------------------------------------------------------------- JSON


def test_json_writes_what_ksqldb_writes_and_reads_it_back():
    value = value_format("JSON", ALL)
    assert value.encode(ROW) == ROW_JSON
    assert value.decode(ROW_JSON) == ROW
    assert (
        value.encode([None] * len(ALL)) == b"{" + b",".join(f'"{c.name}":null'.encode() for c in ALL) + b"}"
    )


def test_json_keys_are_bare_for_one_column_and_an_object_for_several():
    assert key_format("JSON", cols(STRING)).encode(["alice"]) == b'"alice"'
    assert key_format("JSON", cols(INT)).encode([42]) == b"42"
    assert key_format("JSON", cols(STRING)).decode(b'"alice"') == KeyRow(("alice",))
    two = key_format("JSON", [Column("K1", STRING), Column("K2", INT)])
    assert two.encode(["a", 1]) == b'{"K1":"a","K2":1}'
    assert two.decode(b'{"k2": 1, "k1": "a"}') == KeyRow(("a", 1))
    assert key_format("JSON", cols(STRING)).encode([None]) is None
    assert key_format("JSON", cols(INT)).decode(b"null") == KeyRow((None,))


def test_json_matches_properties_to_columns_as_ksqldb_does():
    value = value_format("JSON", [Column("NAME", STRING), Column("AGE", INT), Column("city", STRING)])
    # an unquoted (upper-case) column matches a property in any case; extra properties are ignored
    assert value.decode(b'{"name": "bob", "Age": 49, "extra": 1, "city": "Oslo"}') == ("bob", 49, "Oslo")
    # a quoted lower-case column matches only its own spelling: "CITY" upper-cased is not "city"
    assert value.decode(b'{"NAME": "bob", "CITY": "Oslo"}') == ("bob", None, None)
    # the exact spelling wins over a case-insensitive one, else the first match in the object
    assert value.decode(b'{"name": "b", "NAME": "exact"}') == ("exact", None, None)
    assert value.decode(b'{"name": "first", "Name": "second"}') == ("first", None, None)
    nested = value_format("JSON", [Column("A", ADDRESS)])
    assert nested.decode(b'{"a": {"city": "Oslo", "zip": "150"}}') == ({"CITY": "Oslo", "ZIP": 150},)


@pytest.mark.parametrize(
    ("sql_type", "node", "value"),
    [
        (INT, "49", 49),
        (INT, "-7", -7),
        (INT, 1.9, 1),  # Jackson's intValue truncates
        (INT, -1.9, -1),
        (BIGINT, "9007199254740993", 9007199254740993),
        (BIGINT, 1e3, 1000),
        (DOUBLE, 1, 1.0),
        (DOUBLE, "1.5e3", 1500.0),
        (DOUBLE, " 2.5 ", 2.5),
        (DecimalType(4, 2), 1.5, Decimal("1.50")),
        (DecimalType(4, 2), "-12.3", Decimal("-12.30")),
        (DecimalType(4, 2), ".5", Decimal("0.50")),
        (STRING, 10, "10"),
        (STRING, 1.50, "1.5"),
        (STRING, True, "true"),
        (STRING, {"b": [1, {"c": None}]}, '{"b":[1,{"c":null}]}'),
        (STRING, [1, "a", None, [2]], "[1, a, null, [2]]"),
        (BOOLEAN, False, False),
        (TIMESTAMP, 1, datetime(1970, 1, 1, 0, 0, 0, 1000)),
        (TIMESTAMP, "-1000", datetime(1969, 12, 31, 23, 59, 59)),
        (DATE, 2, date(1970, 1, 3)),
        (DATE, "-1", date(1969, 12, 31)),
        (TIME, 1000, time(0, 0, 1)),
        (TIME, "86399999", time(23, 59, 59, 999000)),
        (BYTES, "YWJj", b"abc"),
        (BYTES, "YQ", b"a"),  # Java's decoder does not need the padding
        (ArrayType(INT), ["1", 2], [1, 2]),
        (MapType(STRING, DOUBLE), {"a": "1"}, {"a": 1.0}),
        (MapType(STRING, INT), [{"key": "a", "value": 1}], {"a": 1}),  # how ksqlDB writes JSON_SR maps
    ],
)
def test_json_coerces_as_ksqldb(sql_type, node, value):
    assert value_format("JSON", [Column("V", sql_type)]).decode(json.dumps({"v": node}).encode()) == (value,)


@pytest.mark.parametrize(
    ("sql_type", "node", "reason"),
    [
        (BOOLEAN, "true", "V: expected BOOLEAN, got a string"),  # ksqlDB reads no text as BOOLEAN
        (BOOLEAN, 1, "V: expected BOOLEAN, got a number"),
        (INT, "1.5", "V: cannot read the text as INT"),
        (INT, " 1", "V: cannot read the text as INT"),
        (INT, 1 << 31, "V: 2147483648 is out of range for INT"),
        (INT, True, "V: expected INT, got a boolean"),
        (BIGINT, "9223372036854775808", "V: 9223372036854775808 is out of range for BIGINT"),
        (DOUBLE, "abc", "V: cannot read the text as DOUBLE"),
        (DOUBLE, [], "V: expected DOUBLE, got an array"),
        (DecimalType(4, 2), 100, "V: 100 does not fit DECIMAL(4, 2)"),
        (DecimalType(4, 2), 1.005, "V: 1.005 does not fit DECIMAL(4, 2) without rounding"),
        (DecimalType(4, 2), "NaN", "V: cannot read the text as DECIMAL(4, 2)"),
        (
            TIMESTAMP,
            "2024-01-01T00:00:00Z",
            "V: cannot read the text as BIGINT",
        ),  # ksqlDB reads epoch ms only
        (TIME, 86_400_000, "V: 86400000 ms is not a TIME (0 to 86399999 ms of the day)"),
        (TIME, -1, "V: -1 ms is not a TIME (0 to 86399999 ms of the day)"),
        (DATE, 1 << 40, "V: 1099511627776 days from 1970-01-01 is out of range for DATE"),
        (BYTES, "a b", "V: cannot read the text as Base64"),
        (BYTES, 5, "V: expected BYTES (Base64 text), got a number"),
        (ArrayType(INT), {"a": 1}, "V: expected ARRAY<INTEGER>, got an object"),
        (ArrayType(INT), [1, "x"], "V[1]: cannot read the text as INT"),
        (MapType(STRING, INT), {"a": "x"}, "V['a']: cannot read the text as INT"),
        (ADDRESS, {"zip": "x"}, "V.ZIP: cannot read the text as INT"),
        (ADDRESS, "Oslo", "V: expected STRUCT<`CITY` STRING, `ZIP` INTEGER>, got a string"),
    ],
)
def test_json_values_ksqldb_cannot_read_are_errors(sql_type, node, reason):
    with pytest.raises(SerdeError) as excinfo:
        value_format("JSON", [Column("V", sql_type)]).decode(json.dumps({"V": node}).encode())
    assert one_line_error(excinfo) == f"JSON value: {reason}"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not valid JSON: Expecting value: line 1 column 1 (char 0)"),
        (b"{", "not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        (b'{"V": NaN}', "not valid JSON: NaN is not JSON"),
        (b"\xff", "not UTF-8 text"),
        (b"[1]", "expected STRUCT<`V` INTEGER>, got an array"),
        (b"7", "expected STRUCT<`V` INTEGER>, got a number"),
    ],
)
def test_json_records_that_are_not_json_objects_are_errors(data, reason):
    with pytest.raises(SerdeError) as excinfo:
        value_format("JSON", [Column("V", INT)]).decode(data)
    assert one_line_error(excinfo) == f"JSON value: {reason}"


def test_json_null_is_a_null_row_and_what_follows_the_value_is_ignored():
    value = value_format("JSON", [Column("V", INT)])
    assert value.decode(b" null ") is None  # as ksqlDB: a null wrapped row is the same as a tombstone
    assert value.decode(b'{"V": 1} trailing') == (1,)  # Jackson's readTree stops after the first value


def test_json_unwrapped_single_values():
    value = value_format("JSON", [Column("V", MapType(STRING, DOUBLE))], {"WRAP_SINGLE_VALUE": False})
    assert value.encode([{"b": 76.54}]) == b'{"b":76.54}'
    assert value.decode(b'{"a": 45.67}') == ({"a": 45.67},)
    assert value.decode(b"null") == (None,)
    assert value.encode([None]) is None
    assert value_format("JSON", [Column("V", INT)], {"WRAP_SINGLE_VALUE": "false"}).decode(b"10") == (10,)
    wrapped = value_format("JSON", [Column("V", INT)], {"WRAP_SINGLE_VALUE": True})
    assert wrapped.encode([10]) == b'{"V":10}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (-0.0, "-0.0"),
        (100.0, "100.0"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1.5e-10, "1.5E-10"),
        (1e300, "1.0E300"),
        (5e-324, "4.9E-324"),
        (1e-323, "9.9E-324"),
        (1e23, "1.0E23"),
        (2e-3, "0.002"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (float("nan"), "NaN"),
    ],
)
def test_doubles_are_written_as_java_writes_them(value, text):
    assert _java_double(value) == text
    assert value_format("DELIMITED", cols(STRING, DOUBLE)).encode(["x", value]) == f"x,{text}".encode()
    written = value_format("JSON", [Column("V", DOUBLE)]).encode([value])
    assert written == (f'{{"V":{text}}}' if text[-1].isdigit() else f'{{"V":"{text}"}}').encode()
    read = value_format("JSON", [Column("V", DOUBLE)]).decode(written)[0]
    assert read == value or read != read


@given(st.floats(allow_nan=False))
def test_java_doubles_read_back_as_the_same_double(value):
    assert float(_java_double(value)) == value


def test_json_strings_are_escaped_as_jackson_does():
    value = value_format("JSON", [Column("V", STRING)], {"WRAP_SINGLE_VALUE": False})
    text = 'q" b\\ \n\t\r\b\f \x01\x1f é ☺ \u2028 /'
    assert value.encode([text]) == '"q\\" b\\\\ \\n\\t\\r\\b\\f \\u0001\\u001F é ☺ \u2028 /"'.encode()
    assert value.decode(value.encode([text])) == (text,)
    with pytest.raises(SerdeError, match="lone surrogate"):
        value.encode(["\ud800"])


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        (Column("V", INT), 1.5, "V: expected an int for INT, got float"),
        (Column("V", BOOLEAN), 1, "V: expected a bool for BOOLEAN, got int"),
        (Column("V", DecimalType(4, 2)), 1.5, "V: expected a Decimal for DECIMAL(4, 2), got float"),
        (
            Column("V", DecimalType(4, 2)),
            Decimal("1.234"),
            "V: 1.234 does not fit DECIMAL(4, 2) without rounding",
        ),
        (Column("V", DATE), datetime(2020, 1, 1), "V: expected an int for DATE, got datetime"),
        (Column("V", ArrayType(INT)), [1, "2"], "V[1]: expected an int for INT, got str"),
        (
            Column("V", ADDRESS),
            {"CITY": "x", "STREET": "y"},
            "V: STRUCT<`CITY` STRING, `ZIP` INTEGER> has no field 'STREET'",
        ),
        (Column("V", MapType(STRING, INT)), {1: 1}, "V[1]: expected a str for STRING, got int"),
    ],
)
def test_rows_of_the_wrong_types_are_not_written(column, value, reason):
    with pytest.raises(SerdeError) as excinfo:
        value_format("JSON", [column]).encode([value])
    assert one_line_error(excinfo) == f"JSON value: {reason}"
    with pytest.raises(SerdeError, match="JSON value: got 2 values for 1 columns"):
        value_format("JSON", [column]).encode([value, value])


def test_temporal_values_are_also_written_from_ints_and_aware_datetimes():
    value = value_format("JSON", [Column("TS", TIMESTAMP), Column("D", DATE), Column("T", TIME)])
    oslo = timezone(timedelta(hours=1))
    assert value.encode([datetime(1970, 1, 1, 1, 0, 0, 1000, tzinfo=oslo), 3, 4]) == b'{"TS":1,"D":3,"T":4}'
    assert (
        value.encode([datetime(1970, 1, 1, tzinfo=UTC), date(1970, 1, 1), time(0)]) == b'{"TS":0,"D":0,"T":0}'
    )


# ------------------------------------------------------------------------------------- DELIMITED


def test_delimited_writes_what_ksqldb_writes_and_reads_it_back():
    value = value_format("DELIMITED", SCALARS)
    data = value.encode(SCALAR_ROW)
    assert (
        data == 'true,-7,1099511627776,2.5,1234.50,"Zoë ""q""",AP9hYmM=,19782,47655016,1709212455016'.encode()
    )
    assert value.decode(data) == SCALAR_ROW
    assert value.encode([None] * len(SCALARS)) == b"," * (len(SCALARS) - 1)
    assert value.decode(b"," * (len(SCALARS) - 1)) == (None,) * len(SCALARS)


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (["a", "b"], "a,b"),
        (["a,b", "c"], '"a,b",c'),
        (['say "hi"', "x"], '"say ""hi""",x'),
        (["line\nbreak", "x"], '"line\nbreak",x'),
        (["", ""], '"",'),  # commons-csv quotes an empty first field only
        ([None, None], ","),
        (["-1", "-1"], '"-1",-1'),  # ... and a first field not starting with a letter or digit
        (["é", "é"], '"é",é'),
        (["#x", "#x"], '"#x","#x"'),  # ... and any field starting with a character up to '#'
        (["x ", "x "], '"x ","x "'),  # ... or ending with one up to ' '
        (["a|b", "c"], "a|b,c"),
    ],
)
def test_delimited_quotes_as_commons_csv_1_4(values, line):
    value = value_format("DELIMITED", cols(STRING, STRING))
    assert value.encode(values) == line.encode()
    assert value.decode(line.encode()) == tuple(v or None for v in values)


def test_delimited_decimals_as_ksqldbs_own_test():
    value = value_format("DELIMITED", [Column("V", DecimalType(33, 16))])
    for written, rewritten in [
        ("12345678987654321.2345678987654321", "12345678987654321.2345678987654321"),
        (".12", "0.1200000000000000"),
        ("-12345.12", '"-12345.1200000000000000"'),
        ('"-12345.12"', '"-12345.1200000000000000"'),
        ("0", "0.0000000000000000"),
    ]:
        assert value.encode(value.decode(written.encode())) == rewritten.encode()


@pytest.mark.parametrize(("setting", "delimiter"), [("|", "|"), ("TAB", "\t"), ("space", " "), ("☺", "☺")])
def test_delimited_delimiters(setting, delimiter):
    value = value_format("DELIMITED", cols(BIGINT, STRING, INT), {"VALUE_DELIMITER": setting})
    line = delimiter.join(["0", "zero", "0"]).encode()
    assert value.decode(line) == (0, "zero", 0)
    assert value.encode([0, "zero", 0]) == line
    key = key_format("DELIMITED", cols(STRING, STRING), properties={"KEY_DELIMITER": setting})
    assert key.decode(f"foo,bar{delimiter}baz".encode()) == KeyRow(("foo,bar", "baz"))


def test_delimited_reading_details():
    value = value_format("DELIMITED", cols(BOOLEAN, STRING))
    assert value.decode(b"TRUE,a") == (True, "a")
    assert value.decode(b"yes,a") == (False, "a")  # Boolean.parseBoolean
    assert value.decode(b"\n\nfalse,b\r\ntrue,c") == (False, "b")  # empty lines skipped, the first line read
    assert value.decode(b'true,"multi\nline"') == (True, "multi\nline")
    single = value_format("DELIMITED", cols(STRING))
    assert single.encode([None]) == b""  # as ksqlDB writes it ...
    assert single.decode(b"") == (None,)  # ... and read back as null
    assert key_format("DELIMITED", cols(DecimalType(6, 4))).decode(b'"12.0"') == KeyRow((Decimal("12.0000"),))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"1,2", "expected 3 fields, got 2"),
        (b"1,2,3,4", "expected 3 fields, got 4"),
        (b"", "expected 3 fields, got an empty record"),
        (b"x,2,3", "C0: cannot read the text as INT"),
        (b"1,2,2020-01-01", "C2: cannot read the text as INT"),
        (b'1,"2"x,3', "not a valid delimited line: ',' expected after '\"'"),
        (b'1,2,"3', "not a valid delimited line: unexpected end of data"),
    ],
)
def test_delimited_lines_ksqldb_cannot_read_are_errors(data, reason):
    with pytest.raises(SerdeError) as excinfo:
        value_format("DELIMITED", cols(INT, DOUBLE, DATE)).decode(data)
    assert one_line_error(excinfo) == f"DELIMITED value: {reason}"


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ("", "got ''"),
        (" ", "got ' '"),
        ("\t", "got '\\t'"),
        ("<~>", "got '<~>'"),
        ('"', "got '\"'"),
    ],
)
def test_delimited_delimiter_must_be_one_character(setting, reason):
    with pytest.raises(SerdeError) as excinfo:
        value_format("DELIMITED", cols(INT), {"VALUE_DELIMITER": setting})
    assert one_line_error(excinfo).endswith(reason)


@pytest.mark.parametrize("sql_type", [ArrayType(INT), MapType(STRING, INT), ADDRESS])
def test_delimited_refuses_nested_types(sql_type):
    with pytest.raises(
        SerdeError, match=r"^VALUE_FORMAT DELIMITED does not support column C0 of type (ARRAY|MAP|STRUCT)<"
    ):
        value_format("DELIMITED", cols(sql_type))
    with pytest.raises(
        SerdeError, match=r"^KEY_FORMAT DELIMITED does not support column C0|MAP in key columns"
    ):
        key_format("DELIMITED", cols(sql_type))


# ------------------------------------------------------------------------------------- AVRO


def test_avro_registers_the_schema_ksqldb_registers_once_and_frames_it():
    registry = FakeRegistry()
    value = value_format("AVRO", [Column("FOO", INT)], registry=registry, topic="input_topic")
    data = value.encode([10])
    # magic byte, schema id 1, union branch 1 ("int"), zig-zag 10
    assert data == b"\x00\x00\x00\x00\x01\x02\x14"
    assert value.encode([10]) == data and registry.registrations == 1
    assert registry.subjects == {("input_topic-value", registry.schemas[1]): 1}
    assert json.loads(registry.schemas[1]) == {
        "type": "record",
        "name": "KsqlDataSourceSchema",
        "namespace": "io.confluent.ksql.avro_schemas",
        "fields": [{"name": "FOO", "type": ["null", "int"], "default": None}],
        "connect.name": "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema",
    }
    assert value.decode(data) == (10,)
    assert value.decode(b"\x00\x00\x00\x00\x01\x00") == (None,)


def test_avro_schema_of_maps_is_ksqldbs_mapentry_array():
    # ksqlDB's own test (transform-map): CREATE STREAM TEST (ID BIGINT KEY, VALUE MAP<STRING, DECIMAL(4, 2)>)
    registry = FakeRegistry()
    value = value_format(
        "AVRO", [Column("VALUE", MapType(STRING, DecimalType(4, 2)))], registry=registry, topic="t"
    )
    data = value.encode([{"a": Decimal("1.5")}])
    decimal = {
        "type": "bytes",
        "scale": 2,
        "precision": 4,
        "connect.version": 1,
        "connect.parameters": {"scale": "2", "connect.decimal.precision": "4"},
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "logicalType": "decimal",
    }
    assert registry.schemas[1] == json.dumps(
        {
            "type": "record",
            "name": "KsqlDataSourceSchema",
            "namespace": "io.confluent.ksql.avro_schemas",
            "fields": [
                {
                    "name": "VALUE",
                    "type": [
                        "null",
                        {
                            "type": "array",
                            "items": {
                                "type": "record",
                                "name": "KsqlDataSourceSchema_VALUE",
                                "fields": [
                                    {"name": "key", "type": ["null", "string"], "default": None},
                                    {"name": "value", "type": ["null", decimal], "default": None},
                                ],
                                "connect.internal.type": "MapEntry",
                            },
                            "connect.name": "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema_VALUE",
                        },
                    ],
                    "default": None,
                }
            ],
            "connect.name": "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema",
        },
        separators=(",", ":"),
    )
    assert value.decode(data) == ({"a": Decimal("1.50")},)


def test_avro_round_trips_every_type_with_ksqldbs_nested_names():
    registry = FakeRegistry()
    value = value_format("AVRO", ALL, registry=registry, topic="t")
    data = value.encode(ROW)
    assert value.decode(data) == ROW
    schema = json.loads(registry.schemas[1])
    address = next(f for f in schema["fields"] if f["name"] == "ADDRESS")["type"][1]
    assert address["name"] == "KsqlDataSourceSchema_ADDRESS"
    assert address["connect.name"] == "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema_ADDRESS"
    timestamp = next(f for f in schema["fields"] if f["name"] == "TS")["type"][1]
    assert timestamp == {
        "type": "long",
        "connect.version": 1,
        "connect.name": "org.apache.kafka.connect.data.Timestamp",
        "logicalType": "timestamp-millis",
    }
    assert value.decode(value.encode([None] * len(ALL))) == (None,) * len(ALL)


def test_avro_unwrapped_keys_and_values_are_the_bare_type():
    registry = FakeRegistry()
    key = key_format("AVRO", [Column("K", ArrayType(STRING))], registry=registry, topic="t")
    assert key.encode([["foo", None]]) == b"\x00\x00\x00\x00\x01\x04\x02\x06foo\x00\x00"
    assert json.loads(registry.schemas[1]) == {"type": "array", "items": ["null", "string"]}
    assert list(registry.subjects) == [("t-key", registry.schemas[1])]
    assert key.decode(key.encode([["foo", None]])) == KeyRow((["foo", None],))
    assert key.encode([None]) is None
    value = value_format("AVRO", [Column("V", BIGINT)], {"WRAP_SINGLE_VALUE": False}, registry, "t")
    assert value.encode([1]) == b"\x00\x00\x00\x00\x02\x02"
    assert registry.schemas[2] == '"long"'
    struct_key = key_format(
        "AVRO",
        [Column("K", ADDRESS)],
        registry=registry,
        topic="t",
        properties={"KEY_SCHEMA_FULL_NAME": "io.confluent.ksql.avro_schemas.OutputKey"},
    )
    struct_key.encode([{"CITY": "x", "ZIP": 1}])
    assert json.loads(registry.schemas[3])["name"] == "OutputKey"


def framed(schema_id: int, schema: dict, datum) -> bytes:
    """`datum` in the schema registry's wire format, written by fastavro alone."""
    out = io.BytesIO(struct.pack(">bi", 0, schema_id))
    out.seek(0, io.SEEK_END)
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return out.getvalue()


def test_avro_reads_other_writers_records_by_name_and_type():
    registry = FakeRegistry()
    writer = {
        "type": "record",
        "name": "UserDetails",
        "namespace": "com.acme",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int"},
            {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "props", "type": {"type": "map", "values": "long"}},
            {"name": "extra", "type": "string"},
        ],
    }
    schema_id = registry.add(writer)
    record = {
        "id": 1,
        "name": "bob",
        "age": 49,
        "time": datetime(2024, 1, 1, tzinfo=UTC),
        "day": date(2024, 1, 2),
        "props": {"a": 1},
        "extra": "ignored",
    }
    data = framed(schema_id, writer, record)
    columns = [
        Column("ID", BIGINT),
        Column("NAME", STRING),
        Column("AGE", STRING),
        Column("TIME", TIMESTAMP),
        Column("DAY", BIGINT),
        Column("PROPS", MapType(STRING, BIGINT)),
        Column("MISSING", INT),
    ]
    value = value_format("AVRO", columns, registry=registry)
    assert value.decode(data) == (1, "bob", "49", datetime(2024, 1, 1), 19724, {"a": 1}, None)
    with pytest.raises(SerdeError) as excinfo:
        value_format("AVRO", [Column("NAME", INT)], registry=registry).decode(data)
    assert one_line_error(excinfo) == "AVRO value: NAME: expected INT, got Avro string"


def test_avro_writes_with_the_schema_the_statement_names():
    registry = FakeRegistry()
    schema = {
        "type": "record",
        "name": "Given",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "tags", "type": {"type": "map", "values": ["null", "int"]}},
            {"name": "note", "type": "string", "default": "none"},
        ],
    }
    schema_id = registry.add(schema)
    value = value_format(
        "AVRO",
        [Column("NAME", STRING), Column("TAGS", MapType(STRING, INT))],
        {"VALUE_SCHEMA_ID": schema_id},
        registry,
        "t",
    )
    data = value.encode(["bob", {"a": 1}])
    assert data[:5] == b"\x00\x00\x00\x00\x01" and registry.registrations == 1  # FakeRegistry.add only
    assert fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(schema), None) == {
        "name": "bob",
        "tags": {"a": 1},
        "note": "none",
    }
    assert value.decode(data) == ("bob", {"a": 1})


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            b"\x01\x00\x00\x00\x01\x02",
            "does not start with the schema registry's magic byte 0 and a schema id",
        ),
        (b"\x00\x00\x00", "does not start with the schema registry's magic byte 0 and a schema id"),
        (b"\x00\x00\x00\x00\x01", "cannot read Avro with schema 1: EOFError"),
        (b"\x00\x00\x00\x00\x01\x04", "cannot read Avro with schema 1: IndexError"),
    ],
)
def test_avro_records_that_cannot_be_read_are_errors(data, reason):
    registry = FakeRegistry()
    value = value_format("AVRO", [Column("FOO", INT)], registry=registry, topic="t")
    value.encode([1])
    with pytest.raises(SerdeError) as excinfo:
        value.decode(data)
    assert one_line_error(excinfo).startswith(f"AVRO value: {reason}")


def test_avro_unknown_schema_ids_and_schemas_that_are_not_avro():
    registry = FakeRegistry()
    value = value_format("AVRO", [Column("FOO", INT)], registry=registry)
    with pytest.raises(SerdeError, match="^no schema 9$"):
        value.decode(b"\x00\x00\x00\x00\x09\x00")
    registry.add("{not json")
    with pytest.raises(SerdeError) as excinfo:
        value.decode(b"\x00\x00\x00\x00\x01\x00")
    assert one_line_error(excinfo).startswith("AVRO value: schema 1 is not an Avro schema: ")


def test_avro_refusals_at_construction():
    with pytest.raises(SerdeError) as excinfo:
        value_format("AVRO", cols(INT))
    assert one_line_error(excinfo) == (
        "VALUE_FORMAT AVRO needs a schema registry (set the SQL server's schema registry URL)"
    )
    with pytest.raises(SerdeError, match="^VALUE_FORMAT AVRO cannot name the column or field 'my col'"):
        value_format("AVRO", [Column("my col", INT)], registry=FakeRegistry())
    with pytest.raises(
        SerdeError, match="VALUE_FORMAT AVRO supports only MAPs with STRING keys: column C0 is"
    ):
        value_format("AVRO", cols(MapType(INT, INT)), registry=FakeRegistry())
    with pytest.raises(SerdeError) as excinfo:
        nested = StructType((StructField("B", ADDRESS),))
        value_format("AVRO", [Column("A", nested), Column("A_B", ADDRESS)], registry=FakeRegistry())
    assert one_line_error(excinfo) == (
        "VALUE_FORMAT AVRO cannot derive a schema: redefined named type: "
        "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema_A_B"
    )
    assert key_format("AVRO", [], registry=None).decode(b"x") == KeyRow(())


class ConfluentMockRegistry:
    """The RegistryClient protocol over confluent-kafka's in-memory registry (its mock:// client)."""

    def __init__(self):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.client = SchemaRegistryClient.new_client({"url": "mock://"})

    def schema_by_id(self, schema_id: int) -> str:
        return self.client.get_schema(schema_id).schema_str

    def register(self, subject: str, schema: str, schema_type: str) -> int:
        from confluent_kafka.schema_registry import Schema

        return self.client.register_schema(subject, Schema(schema, schema_type))


def test_avro_reads_what_confluents_avro_serializer_writes_and_the_reverse():
    confluent_avro = pytest.importorskip("confluent_kafka.schema_registry.avro")
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = ConfluentMockRegistry()
    schema = json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [
                {"name": "orderId", "type": "long"},
                {
                    "name": "amount",
                    "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
                },
                {
                    "name": "customer",
                    "type": {
                        "type": "record",
                        "name": "Customer",
                        "fields": [{"name": "city", "type": ["null", "string"]}],
                    },
                },
                {"name": "items", "type": {"type": "array", "items": "string"}},
            ],
        }
    )
    context = SerializationContext("orders", MessageField.VALUE)
    data = confluent_avro.AvroSerializer(registry.client, schema)(
        {"orderId": 7, "amount": Decimal("12.50"), "customer": {"city": "Oslo"}, "items": ["a", "b"]}, context
    )
    columns = [
        Column("ORDERID", BIGINT),
        Column("AMOUNT", DecimalType(6, 2)),
        Column("CUSTOMER", StructType((StructField("CITY", STRING),))),
        Column("ITEMS", ArrayType(STRING)),
    ]
    value = value_format("AVRO", columns, registry=registry, topic="orders")
    assert value.decode(data) == (7, Decimal("12.50"), {"CITY": "Oslo"}, ["a", "b"])

    ours = value.encode([8, Decimal("1.5"), {"CITY": None}, []])
    assert ours[:5] != data[:5]  # registered our own schema under orders-value
    assert confluent_avro.AvroDeserializer(registry.client)(ours, context) == {
        "ORDERID": 8,
        "AMOUNT": Decimal("1.50"),
        "CUSTOMER": {"CITY": None},
        "ITEMS": [],
    }


# ------------------------------------------------------------------------------------- JSON_SR


def test_json_sr_frames_the_json_and_registers_a_valid_schema_once():
    registry = FakeRegistry()
    value = value_format("JSON_SR", ALL, registry=registry, topic="t")
    data = value.encode(ROW)
    assert data == b"\x00\x00\x00\x00\x01" + ROW_JSON
    assert value.encode(ROW) == data and registry.registrations == 1 and registry.types[1] == "JSON"
    assert value.decode(data) == ROW
    assert value.decode(b"\x00\x00\x00\x00\x63" + ROW_JSON) == ROW  # the id is not needed to read
    schema = json.loads(registry.schemas[1])
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(json.loads(ROW_JSON), schema)
    jsonschema.validate({c.name: None for c in ALL}, schema)
    assert schema["properties"]["COUNT"] == {
        "connect.index": 1,
        "oneOf": [{"type": "null"}, {"type": "integer", "connect.type": "int32"}],
    }


def test_json_sr_reads_what_confluents_json_serializer_writes():
    JSONSerializer = pytest.importorskip("confluent_kafka.schema_registry.json_schema").JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = ConfluentMockRegistry()
    schema = json.dumps(
        {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
    )
    data = JSONSerializer(schema, registry.client)(
        {"name": "bob", "age": 49}, SerializationContext("j", MessageField.VALUE)
    )
    value = value_format(
        "JSON_SR", [Column("NAME", STRING), Column("AGE", INT)], registry=registry, topic="j"
    )
    assert value.decode(data) == ("bob", 49)


def test_json_sr_errors():
    registry = FakeRegistry()
    value = value_format("JSON_SR", [Column("V", INT)], registry=registry)
    with pytest.raises(SerdeError) as excinfo:
        value.decode(b'{"V": 1}')
    assert one_line_error(excinfo) == (
        "JSON_SR value: does not start with the schema registry's magic byte 0 (is it plain JSON?)"
    )
    with pytest.raises(SerdeError, match="VALUE_FORMAT JSON_SR needs a schema registry"):
        value_format("JSON_SR", [Column("V", INT)])
    fixed = value_format("JSON_SR", [Column("V", INT)], {"VALUE_SCHEMA_ID": 7}, registry)
    assert fixed.encode([1]) == b'\x00\x00\x00\x00\x07{"V":1}' and registry.registrations == 0


# ------------------------------------------------------------------------------------- NONE and the factories


def test_none_is_a_key_format_for_keyless_streams():
    keyless = key_format("NONE", [])
    assert keyless.decode(b"anything") == KeyRow(())
    assert keyless.decode(None) == KeyRow(())
    assert keyless.encode([]) is None
    with pytest.raises(SerdeError) as excinfo:
        key_format("NONE", cols(INT))
    assert one_line_error(excinfo) == "KEY_FORMAT NONE is only for streams without key columns, got 1"
    with pytest.raises(SerdeError, match="VALUE_FORMAT NONE is not supported: NONE is only a key format"):
        value_format("NONE", cols(INT))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: value_format("XML", cols(INT)),
            "unknown VALUE_FORMAT 'XML' (one of AVRO, DELIMITED, JSON, JSON_SR, KAFKA, NONE, PROTOBUF, "
            "PROTOBUF_NOSR)",
        ),
        (
            lambda: key_format("JSON", cols(MapType(STRING, INT))),
            "KEY_FORMAT JSON does not support MAP in key columns: column C0 is MAP<STRING, INTEGER>",
        ),
        (
            lambda: key_format(
                "JSON", cols(ArrayType(StructType((StructField("F", MapType(STRING, INT)),))))
            ),
            "KEY_FORMAT JSON does not support MAP in key columns: "
            "column C0 is ARRAY<STRUCT<`F` MAP<STRING, INTEGER>>>",
        ),
        (
            lambda: value_format("JSON", cols(MapType(INT, DOUBLE))),
            "VALUE_FORMAT JSON supports only MAPs with STRING keys: column C0 is MAP<INTEGER, DOUBLE>",
        ),
        (
            lambda: value_format("JSON", cols(INT, INT), {"WRAP_SINGLE_VALUE": False}),
            "WRAP_SINGLE_VALUE is only valid for a single value column, got 2",
        ),
        (
            lambda: value_format("DELIMITED", cols(INT), {"WRAP_SINGLE_VALUE": True}),
            "VALUE_FORMAT DELIMITED does not support WRAP_SINGLE_VALUE=true",
        ),
        (
            lambda: value_format("KAFKA", cols(INT), {"WRAP_SINGLE_VALUE": "true"}),
            "VALUE_FORMAT KAFKA does not support WRAP_SINGLE_VALUE=true",
        ),
        (
            lambda: value_format("JSON", cols(INT), {"WRAP_SINGLE_VALUE": "maybe"}),
            "WRAP_SINGLE_VALUE must be true or false, got 'maybe'",
        ),
        (
            lambda: value_format("JSON", cols(INT), {"VALUE_DELIMITER": "|"}),
            "VALUE_DELIMITER is only for VALUE_FORMAT DELIMITED, not JSON",
        ),
        (
            lambda: value_format("JSON", cols(INT), {"VALUE_SCHEMA_ID": 1}),
            "VALUE_SCHEMA_ID is only for VALUE_FORMAT AVRO or JSON_SR, not JSON",
        ),
        (
            lambda: value_format("AVRO", cols(INT), {"VALUE_SCHEMA_ID": "x"}, FakeRegistry()),
            "VALUE_SCHEMA_ID must be a schema id (a positive integer), got 'x'",
        ),
        (
            lambda: value_format("JSON", cols(PrimitiveType("VARCHAR2"))),
            "column C0 has a type the formats do not know: PrimitiveType(name='VARCHAR2')",
        ),
    ],
)
def test_formats_that_cannot_be_used_as_asked(make, message):
    with pytest.raises(SerdeError) as excinfo:
        make()
    assert one_line_error(excinfo) == message


def test_other_properties_are_left_to_the_caller():
    value = value_format("Json", cols(INT), {"KAFKA_TOPIC": "t", "PARTITIONS": 3, "KEY_FORMAT": "KAFKA"})
    assert value.format == "JSON" and value.encode([1]) == b'{"C0":1}'


# ------------------------------------------------------------------------------- the HTTP registry client


class RegistryHandler(BaseHTTPRequestHandler):
    schemas: dict[int, str] = {}
    requests: list = []

    def do_GET(self):
        schema_id = int(self.path.rsplit("/", 1)[1])
        if schema_id in self.schemas:
            self.answer(200, {"schema": self.schemas[schema_id]})
        else:
            self.answer(404, {"error_code": 40403, "message": f"Schema {schema_id} not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, self.headers["Content-Type"], body))
        schema_id = len(self.schemas) + 1
        self.schemas[schema_id] = body["schema"]
        self.answer(200, {"id": schema_id})

    def answer(self, status: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def registry_url():
    RegistryHandler.schemas, RegistryHandler.requests = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), RegistryHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_http_registry_client_registers_and_fetches(registry_url):
    client = HttpRegistryClient(registry_url)
    assert client.timeout_s == 30.0
    value = value_format("AVRO", [Column("FOO", INT)], registry=client, topic="my topic")
    data = value.encode([10])
    assert RegistryHandler.requests == [
        (
            "/subjects/my%20topic-value/versions",
            "application/vnd.schemaregistry.v1+json",
            {"schema": RegistryHandler.schemas[1], "schemaType": "AVRO"},
        )
    ]
    assert value_format("AVRO", [Column("FOO", INT)], registry=client).decode(data) == (10,)
    with pytest.raises(SerdeError) as excinfo:
        client.schema_by_id(5)
    assert one_line_error(excinfo) == (
        f"the schema registry at {registry_url.rstrip('/')} refused GET /schemas/ids/5: "
        "Schema 5 not found (error 40403)"
    )


def test_http_registry_client_that_cannot_connect():
    client = HttpRegistryClient("http://127.0.0.1:9", timeout_s=5)
    with pytest.raises(SerdeError) as excinfo:
        value_format("AVRO", [Column("FOO", INT)], registry=client).decode(b"\x00\x00\x00\x00\x01\x00")
    assert one_line_error(excinfo).startswith("cannot reach the schema registry at http://127.0.0.1:9: ")


SCALAR_VALUES = {
    "BOOLEAN": st.booleans(),
    "INT": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "DOUBLE": st.floats(allow_nan=False),
    "STRING": st.text(),
    "BYTES": st.binary(),
    "DATE": st.dates(),
    "TIME": st.integers(0, 86_399_999).map(lambda ms: (datetime.min + timedelta(milliseconds=ms)).time()),
    "TIMESTAMP": st.integers(-(10**12), 10**13).map(
        lambda ms: datetime(1970, 1, 1) + timedelta(milliseconds=ms)
    ),
}
SCALAR_ROWS = st.tuples(
    *[
        st.none()
        | (
            SCALAR_VALUES[c.type.name]
            if isinstance(c.type, PrimitiveType)
            else st.decimals("-9999.99", "9999.99", places=2, allow_nan=False, allow_infinity=False)
        )
        for c in SCALARS
    ]
)


@settings(deadline=None)
@given(SCALAR_ROWS)
def test_every_format_reads_back_what_it_writes(row):
    registry = FakeRegistry()
    for fmt in ("JSON", "JSON_SR", "AVRO", "DELIMITED"):
        value = value_format(fmt, SCALARS, registry=registry, topic="t")
        # an empty DELIMITED field is null, so an empty string or bytes read back as null
        expected = tuple(None if fmt == "DELIMITED" and v in ("", b"") else v for v in row)
        assert value.decode(value.encode(row)) == expected, fmt
    key = key_format("KAFKA", [Column("K", STRING)])
    assert key.decode(key.encode([row[5]])) == KeyRow((row[5],))


def test_base64_round_trip_in_every_text_format():
    raw = bytes(range(256))
    for fmt in ("JSON", "DELIMITED"):
        value = value_format(fmt, [Column("B", BYTES)], {"WRAP_SINGLE_VALUE": False})
        assert (
            value.encode([raw])
            == (
                f'"{base64.b64encode(raw).decode()}"' if fmt == "JSON" else base64.b64encode(raw).decode()
            ).encode()
        )
        assert value.decode(value.encode([raw])) == (raw,)
