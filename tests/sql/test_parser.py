"""The ksqlDB-compatible SQL parser: every statement kind, every expression form, and one-line errors."""

from decimal import Decimal

import pytest

from odradek.sql import ast
from odradek.sql.ast import (
    AllColumns,
    And,
    ArrayType,
    Between,
    BinaryArithmetic,
    BooleanLiteral,
    Case,
    Cast,
    ColumnDef,
    ColumnRef,
    Comparison,
    CreateAsSelect,
    CreateSource,
    DecimalLiteral,
    DecimalType,
    Describe,
    Drop,
    Explain,
    FieldAccess,
    FunctionCall,
    HoppingWindow,
    InList,
    InsertIntoSelect,
    InsertValues,
    IntegerLiteral,
    IsNull,
    Join,
    Like,
    MapType,
    Negate,
    Not,
    NullLiteral,
    Or,
    PrimitiveType,
    Print,
    PseudoColumn,
    Select,
    SelectItem,
    SessionWindow,
    Show,
    SourceRef,
    StringLiteral,
    StructField,
    StructType,
    Subscript,
    Terminate,
    TumblingWindow,
    WhenClause,
    Within,
)
from odradek.sql.parser import SqlSyntaxError, parse


def one(text: str) -> ast.Statement:
    statements = parse(text)
    assert len(statements) == 1, statements
    return statements[0]


def expr(text: str) -> ast.Expression:
    """The expression of `SELECT <text> FROM t`."""
    select = one(f"SELECT {text} FROM t;")
    assert isinstance(select, Select)
    (item,) = select.items
    return item.expression


A, B, C = ColumnRef("A"), ColumnRef("B"), ColumnRef("C")
STAR = (AllColumns(),)


# ---------------------------------------------------------------- the examples


def test_fraud_filter():
    assert one(
        "CREATE STREAM fraudulent_payments AS SELECT * FROM payments WHERE fraudProbability > 0.8;"
    ) == CreateAsSelect(
        "STREAM",
        "FRAUDULENT_PAYMENTS",
        Select(
            STAR,
            SourceRef("PAYMENTS"),
            where=Comparison(">", ColumnRef("FRAUDPROBABILITY"), DecimalLiteral(Decimal("0.8"))),
        ),
    )


def test_per_user_counts_in_tumbling_windows():
    assert one(
        "CREATE TABLE clicks_per_user AS SELECT user_id, COUNT(*) AS clicks FROM clicks "
        "WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 2 SECONDS) GROUP BY user_id EMIT CHANGES;"
    ) == CreateAsSelect(
        "TABLE",
        "CLICKS_PER_USER",
        Select(
            (SelectItem(ColumnRef("USER_ID")), SelectItem(FunctionCall("COUNT", star=True), "CLICKS")),
            SourceRef("CLICKS"),
            window=TumblingWindow(10_000, 2_000),
            group_by=(ColumnRef("USER_ID"),),
            emit="CHANGES",
        ),
    )


def test_stream_table_join():
    assert one(
        "CREATE STREAM enriched WITH (KAFKA_TOPIC='enriched') AS SELECT c.user_id, u.name "
        "FROM clicks c LEFT JOIN users AS u ON c.user_id = u.id EMIT CHANGES;"
    ) == CreateAsSelect(
        "STREAM",
        "ENRICHED",
        Select(
            (SelectItem(ColumnRef("USER_ID", "C")), SelectItem(ColumnRef("NAME", "U"))),
            SourceRef("CLICKS", "C"),
            joins=(
                Join(
                    "LEFT",
                    SourceRef("USERS", "U"),
                    Comparison("=", ColumnRef("USER_ID", "C"), ColumnRef("ID", "U")),
                ),
            ),
            emit="CHANGES",
        ),
        properties={"KAFKA_TOPIC": "enriched"},
    )


def test_stream_stream_join_within():
    select = one(
        "SELECT o.id, s.at FROM orders o FULL OUTER JOIN shipments s WITHIN 2 HOURS ON o.id = s.order_id EMIT CHANGES;"
    )
    assert select.joins == (
        Join(
            "FULL",
            SourceRef("SHIPMENTS", "S"),
            Comparison("=", ColumnRef("ID", "O"), ColumnRef("ORDER_ID", "S")),
            Within(7_200_000, 7_200_000),
        ),
    )


def test_pull_query():
    assert one("SELECT * FROM scores_table WHERE player = 'alice';") == Select(
        STAR, SourceRef("SCORES_TABLE"), where=Comparison("=", ColumnRef("PLAYER"), StringLiteral("alice"))
    )


def test_insert_values():
    assert one("INSERT INTO s (a, b) VALUES (1, 'x');") == InsertValues(
        "S", ("A", "B"), (IntegerLiteral(1), StringLiteral("x"))
    )


def test_drop_table_delete_topic():
    assert one("DROP TABLE t DELETE TOPIC") == Drop("TABLE", "T", delete_topic=True)


# ---------------------------------------------------------------- statements

STATEMENTS = [
    (
        "CREATE STREAM pageviews (viewtime BIGINT, user_id VARCHAR KEY, page STRING) "
        "WITH (kafka_topic='pageviews', value_format='JSON', partitions=3, timestamp='viewtime')",
        CreateSource(
            "STREAM",
            "PAGEVIEWS",
            (
                ColumnDef("VIEWTIME", PrimitiveType("BIGINT")),
                ColumnDef("USER_ID", PrimitiveType("STRING"), key=True),
                ColumnDef("PAGE", PrimitiveType("STRING")),
            ),
            {"KAFKA_TOPIC": "pageviews", "VALUE_FORMAT": "JSON", "PARTITIONS": 3, "TIMESTAMP": "viewtime"},
        ),
    ),
    (
        "create or replace table if not exists users (id INT PRIMARY KEY, `Name` string) with (KAFKA_TOPIC='u', KEY_FORMAT='KAFKA')",
        CreateSource(
            "TABLE",
            "USERS",
            (
                ColumnDef("ID", PrimitiveType("INT"), primary_key=True),
                ColumnDef("Name", PrimitiveType("STRING")),
            ),
            {"KAFKA_TOPIC": "u", "KEY_FORMAT": "KAFKA"},
            or_replace=True,
            if_not_exists=True,
        ),
    ),
    (
        "CREATE STREAM s WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', WRAP=true, RATE=-1.5)",
        CreateSource(
            "STREAM",
            "S",
            (),
            {"KAFKA_TOPIC": "s", "VALUE_FORMAT": "AVRO", "WRAP": True, "RATE": Decimal("-1.5")},
        ),
    ),
    (
        "CREATE TABLE t2 WITH (PARTITIONS=1) AS SELECT * FROM t",
        CreateAsSelect("TABLE", "T2", Select(STAR, SourceRef("T")), {"PARTITIONS": 1}),
    ),
    ("INSERT INTO s SELECT * FROM t;", InsertIntoSelect("S", Select(STAR, SourceRef("T")))),
    (
        "INSERT INTO s VALUES (-1, NULL, TRUE)",
        InsertValues("S", (), (IntegerLiteral(-1), NullLiteral(), BooleanLiteral(True))),
    ),
    ("DROP STREAM IF EXISTS s", Drop("STREAM", "S", if_exists=True)),
    ("drop stream s", Drop("STREAM", "S")),
    ("SHOW STREAMS", Show("STREAMS")),
    ("show tables", Show("TABLES")),
    ("LIST TOPICS", Show("TOPICS")),
    ("SHOW QUERIES;", Show("QUERIES")),
    ("DESCRIBE s", Describe("S")),
    ("DESCRIBE EXTENDED `MixedCase`", Describe("MixedCase", extended=True)),
    ("EXPLAIN CSAS_FRAUD_0", Explain(query_id="CSAS_FRAUD_0")),
    ("EXPLAIN SELECT * FROM s", Explain(query=Select(STAR, SourceRef("S")))),
    ("TERMINATE CTAS_CLICKS_1", Terminate("CTAS_CLICKS_1")),
    ("TERMINATE ALL", Terminate(None, all=True)),
    ("PRINT payments", Print("payments")),
    ("PRINT 'my-topic.v1' FROM BEGINNING LIMIT 10", Print("my-topic.v1", from_beginning=True, limit=10)),
    ("SELECT * FROM s EMIT CHANGES LIMIT 3", Select(STAR, SourceRef("S"), emit="CHANGES", limit=3)),
]


@pytest.mark.parametrize(("text", "expected"), STATEMENTS, ids=[s[0][:40] for s in STATEMENTS])
def test_statement(text, expected):
    assert one(text) == expected


def test_select_with_every_clause():
    select = one(
        "SELECT s.*, region AS r, SUM(amount) total FROM sales s "
        "WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 10 SECONDS, GRACE PERIOD 500 MILLISECONDS) "
        "WHERE amount > 0 GROUP BY region, s.shop PARTITION BY region HAVING COUNT(*) >= 2 EMIT FINAL LIMIT 100"
    )
    assert select == Select(
        (
            AllColumns("S"),
            SelectItem(ColumnRef("REGION"), "R"),
            SelectItem(FunctionCall("SUM", (ColumnRef("AMOUNT"),)), "TOTAL"),
        ),
        SourceRef("SALES", "S"),
        window=HoppingWindow(60_000, 10_000, 500),
        where=Comparison(">", ColumnRef("AMOUNT"), IntegerLiteral(0)),
        group_by=(ColumnRef("REGION"), ColumnRef("SHOP", "S")),
        partition_by=(ColumnRef("REGION"),),
        having=Comparison(">=", FunctionCall("COUNT", star=True), IntegerLiteral(2)),
        emit="FINAL",
        limit=100,
    )


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ("TUMBLING (SIZE 1 HOUR)", TumblingWindow(3_600_000)),
        ("tumbling (size 2 days, grace period 1 day)", TumblingWindow(172_800_000, 86_400_000)),
        ("HOPPING (SIZE 5 MINUTES, ADVANCE BY 1 MINUTE)", HoppingWindow(300_000, 60_000)),
        ("SESSION (30 SECONDS)", SessionWindow(30_000)),
        ("SESSION (1 SECOND, GRACE PERIOD 10 MILLISECOND)", SessionWindow(1_000, 10)),
    ],
)
def test_windows(window, expected):
    assert one(f"SELECT a, COUNT(*) FROM s WINDOW {window} GROUP BY a EMIT CHANGES").window == expected


@pytest.mark.parametrize(
    ("join", "expected_type", "expected_within"),
    [
        ("JOIN b ON a.k = b.k", "INNER", None),
        ("INNER JOIN b ON a.k = b.k", "INNER", None),
        ("LEFT OUTER JOIN b ON a.k = b.k", "LEFT", None),
        ("FULL JOIN b WITHIN 10 SECONDS ON a.k = b.k", "FULL", Within(10_000, 10_000)),
        ("JOIN b WITHIN (1 HOUR, 5 MINUTES) ON a.k = b.k", "INNER", Within(3_600_000, 300_000)),
        (
            "LEFT JOIN b WITHIN 1 MINUTE GRACE PERIOD 5 SECONDS ON a.k = b.k",
            "LEFT",
            Within(60_000, 60_000, 5_000),
        ),
    ],
)
def test_joins(join, expected_type, expected_within):
    (joined,) = one(f"SELECT * FROM a {join} EMIT CHANGES").joins
    assert joined == Join(
        expected_type,
        SourceRef("B"),
        Comparison("=", ColumnRef("K", "A"), ColumnRef("K", "B")),
        expected_within,
    )


def test_several_joins_and_statements():
    statements = parse("SELECT * FROM a JOIN b ON a.x = b.x JOIN c ON b.y = c.y;\n;SHOW STREAMS;")
    assert [type(s) for s in statements] == [Select, Show]
    assert [j.source.name for j in statements[0].joins] == ["B", "C"]


# ---------------------------------------------------------------- expressions

EXPRESSIONS = [
    ("42", IntegerLiteral(42)),
    ("-7", IntegerLiteral(-7)),
    ("3.25", DecimalLiteral(Decimal("3.25"))),
    (".5", DecimalLiteral(Decimal("0.5"))),
    ("1e3", DecimalLiteral(Decimal("1e3"))),
    ("'it''s'", StringLiteral("it's")),
    ("''", StringLiteral("")),
    ("true", BooleanLiteral(True)),
    ("FALSE", BooleanLiteral(False)),
    ("null", NullLiteral()),
    ("col", ColumnRef("COL")),
    ("`camelCase`", ColumnRef("camelCase")),
    ("s.col", ColumnRef("COL", "S")),
    ("ROWTIME", PseudoColumn("ROWTIME")),
    ("rowpartition", PseudoColumn("ROWPARTITION")),
    ("ROWOFFSET", PseudoColumn("ROWOFFSET")),
    ("WindowStart", PseudoColumn("WINDOWSTART")),
    ("s.WINDOWEND", PseudoColumn("WINDOWEND", "S")),
    ("a + b * c", BinaryArithmetic("+", A, BinaryArithmetic("*", B, C))),
    ("(a + b) * c", BinaryArithmetic("*", BinaryArithmetic("+", A, B), C)),
    ("a - b - c", BinaryArithmetic("-", BinaryArithmetic("-", A, B), C)),
    ("a / b % c", BinaryArithmetic("%", BinaryArithmetic("/", A, B), C)),
    ("-a * b", BinaryArithmetic("*", Negate(A), B)),
    ("a = b", Comparison("=", A, B)),
    ("a != b", Comparison("!=", A, B)),
    ("a <> b", Comparison("!=", A, B)),
    ("a < b", Comparison("<", A, B)),
    ("a <= b", Comparison("<=", A, B)),
    ("a > b", Comparison(">", A, B)),
    ("a >= b + 1", Comparison(">=", A, BinaryArithmetic("+", B, IntegerLiteral(1)))),
    ("NOT a AND b OR c", Or(And(Not(A), B), C)),
    ("a OR b AND c", Or(A, And(B, C))),
    ("NOT (a OR b)", Not(Or(A, B))),
    (
        "a = 1 AND NOT b = 2",
        And(Comparison("=", A, IntegerLiteral(1)), Not(Comparison("=", B, IntegerLiteral(2)))),
    ),
    ("a IS NULL", IsNull(A)),
    ("a IS NOT NULL", IsNull(A, negated=True)),
    ("a BETWEEN 1 AND 10", Between(A, IntegerLiteral(1), IntegerLiteral(10))),
    ("a NOT BETWEEN b AND c AND c", And(Between(A, B, C, negated=True), C)),
    ("a IN (1, 2, 3)", InList(A, (IntegerLiteral(1), IntegerLiteral(2), IntegerLiteral(3)))),
    ("a NOT IN ('x')", InList(A, (StringLiteral("x"),), negated=True)),
    ("a LIKE 'ab%'", Like(A, StringLiteral("ab%"))),
    ("a NOT LIKE b", Like(A, B, negated=True)),
    (
        "CASE WHEN a > 1 THEN 'big' WHEN a < 0 THEN 'neg' ELSE 'small' END",
        Case(
            None,
            (
                WhenClause(Comparison(">", A, IntegerLiteral(1)), StringLiteral("big")),
                WhenClause(Comparison("<", A, IntegerLiteral(0)), StringLiteral("neg")),
            ),
            StringLiteral("small"),
        ),
    ),
    ("CASE a WHEN 1 THEN b END", Case(A, (WhenClause(IntegerLiteral(1), B),))),
    ("CAST(a AS BIGINT)", Cast(A, PrimitiveType("BIGINT"))),
    ("cast(a as decimal(10, 2))", Cast(A, DecimalType(10, 2))),
    ("CAST(a AS ARRAY<INTEGER>)", Cast(A, ArrayType(PrimitiveType("INT")))),
    ("COUNT(*)", FunctionCall("COUNT", star=True)),
    ("now()", FunctionCall("NOW")),
    (
        "EXTRACTJSONFIELD(payload, '$.user.id')",
        FunctionCall("EXTRACTJSONFIELD", (ColumnRef("PAYLOAD"), StringLiteral("$.user.id"))),
    ),
    (
        "CONCAT(SUBSTRING(a, 1, 3), '-')",
        FunctionCall(
            "CONCAT",
            (FunctionCall("SUBSTRING", (A, IntegerLiteral(1), IntegerLiteral(3))), StringLiteral("-")),
        ),
    ),
    ("a->b", FieldAccess(A, "B")),
    ("a->b->`c`", FieldAccess(FieldAccess(A, "B"), "c")),
    ("a[1]", Subscript(A, IntegerLiteral(1))),
    (
        "m['k']->f[0]",
        Subscript(FieldAccess(Subscript(ColumnRef("M"), StringLiteral("k")), "F"), IntegerLiteral(0)),
    ),
    ("s.a->b", FieldAccess(ColumnRef("A", "S"), "B")),
    ("((a))", A),
    # keywords are only reserved where they can appear: these are ordinary column names
    ("size", ColumnRef("SIZE")),
    ("key + window", BinaryArithmetic("+", ColumnRef("KEY"), ColumnRef("WINDOW"))),
]


@pytest.mark.parametrize(("text", "expected"), EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS])
def test_expression(text, expected):
    assert expr(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("BOOLEAN", PrimitiveType("BOOLEAN")),
        ("int", PrimitiveType("INT")),
        ("INTEGER", PrimitiveType("INT")),
        ("BIGINT", PrimitiveType("BIGINT")),
        ("DOUBLE", PrimitiveType("DOUBLE")),
        ("VARCHAR", PrimitiveType("STRING")),
        ("STRING", PrimitiveType("STRING")),
        ("BYTES", PrimitiveType("BYTES")),
        ("DATE", PrimitiveType("DATE")),
        ("TIME", PrimitiveType("TIME")),
        ("TIMESTAMP", PrimitiveType("TIMESTAMP")),
        ("DECIMAL(4, 1)", DecimalType(4, 1)),
        ("ARRAY<ARRAY<DOUBLE>>", ArrayType(ArrayType(PrimitiveType("DOUBLE")))),
        ("MAP<STRING, ARRAY<INT>>", MapType(PrimitiveType("STRING"), ArrayType(PrimitiveType("INT")))),
        (
            "STRUCT<street STRING, `Zip` INT, geo STRUCT<lat DOUBLE, lon DOUBLE>>",
            StructType(
                (
                    StructField("STREET", PrimitiveType("STRING")),
                    StructField("Zip", PrimitiveType("INT")),
                    StructField(
                        "GEO",
                        StructType(
                            (
                                StructField("LAT", PrimitiveType("DOUBLE")),
                                StructField("LON", PrimitiveType("DOUBLE")),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)
def test_column_types(text, expected):
    (column,) = one(f"CREATE STREAM s (c {text}) WITH (KAFKA_TOPIC='s');").columns
    assert column.type == expected


def test_comments_case_and_quoting():
    statements = parse(
        "-- a line comment\n"
        "/* a block\n   comment */ select `Mixed`, Lower FrOm `Src` /* inline */ where X = 'Keep Case';  -- trailing\n"
    )
    assert statements == [
        Select(
            (SelectItem(ColumnRef("Mixed")), SelectItem(ColumnRef("LOWER"))),
            SourceRef("Src"),
            where=Comparison("=", ColumnRef("X"), StringLiteral("Keep Case")),
        )
    ]


@pytest.mark.parametrize("text", ["", "   \n\t", ";", ";;\n;", "-- only a comment", "/* only\n a comment */"])
def test_empty_input_gives_no_statements(text):
    assert parse(text) == []


# ---------------------------------------------------------------- errors

ERRORS = [
    # (statement, line, column, message)
    ("SELECT * FROM t WHERE name = 'alice", 1, 30, "unterminated string literal"),
    ("SELECT a, b WHERE a > 1;", 1, 13, "expected FROM, ',' or an operator after 'b', found 'WHERE'"),
    ("SELECT * FROM payments WHERE ;", 1, 30, "expected an expression after WHERE, found ';'"),
    (
        "SELECT * FROM s WINDOW SLIDING (SIZE 1 SECOND) GROUP BY a;",
        1,
        24,
        "expected HOPPING, SESSION or TUMBLING after WINDOW, found 'SLIDING'",
    ),
    (
        "SELECT * FROM s\nWINDOW TUMBLING (SIZE 10 WEEKS)",
        2,
        26,
        "expected a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS) after '10', found 'WEEKS'",
    ),
    ("SELECT * FROM s LIMIT 10 garbage", 1, 26, "expected ';' after '10', found 'garbage'"),
    ("SELECT * FROM t;\nhello world;", 2, 1, "expected a statement after ';', found 'hello'"),
    ("SELECT * FROM", 1, 14, "expected a name after FROM, found end of input"),
    ("SELECT a\nFROM t\nWHERE x = 1 +", 3, 14, "expected an expression after '+', found end of input"),
    ("SHOW FUNCTIONS", 1, 6, "expected QUERIES, STREAMS, TABLES or TOPICS after SHOW, found 'FUNCTIONS'"),
    ("CREATE STREAM s (id UUID) WITH (KAFKA_TOPIC='s');", 1, 21, "unknown type 'UUID'"),
    ("SELECT a # b FROM t", 1, 10, "unexpected character '#'"),
    ("SELECT * FROM t /* never closed", 1, 17, "unterminated comment"),
    ("SELECT `open FROM t", 1, 8, "unterminated quoted identifier"),
    ("SELECT * FROM t LIMIT ten", 1, 23, "expected an integer after LIMIT, found 'ten'"),
    ("DROP VIEW v", 1, 6, "expected STREAM or TABLE after DROP, found 'VIEW'"),
    ("INSERT INTO s (a, b) VALUES (1);", 1, 13, "INSERT INTO S names 2 columns but gives 1 values"),
    (
        "CREATE STREAM s (a INT PRIMARY KEY) WITH (KAFKA_TOPIC='s');",
        1,
        15,
        "column A of stream S: streams take KEY, not PRIMARY KEY",
    ),
    ("CREATE TABLE t (a INT) AS SELECT * FROM s;", 1, 14, "TABLE T AS SELECT cannot also declare columns"),
    (
        "CREATE STREAM s WITH (TOPIC=x)",
        1,
        29,
        "expected a literal (a string, a number, TRUE, FALSE or NULL) after '=', found 'x'",
    ),
    ("CREATE STREAM s WITH (P=1, p=2)", 1, 28, "property P is given twice"),
    ("SELECT CASE WHEN a THEN 1 FROM t", 1, 27, "expected ELSE, END or WHEN after '1', found 'FROM'"),
    ("SELECT CAST(a) FROM t", 1, 14, "expected AS after 'a', found ')'"),
    ("SELECT * FROM a JOIN b c WHERE x", 1, 26, "expected ON or WITHIN after 'c', found 'WHERE'"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), ERRORS, ids=[e[0][:40] for e in ERRORS])
def test_syntax_error(text, line, column, message):
    with pytest.raises(SqlSyntaxError) as caught:
        parse(text)
    error = caught.value
    assert (error.line, error.column) == (line, column), str(error)
    assert error.message == message, str(error)
    rendered = str(error)
    assert rendered.startswith(f"line {line}:{column}: ")
    assert "\n" not in rendered and "Traceback" not in rendered and "^" not in rendered
    assert error.__cause__ is None and error.__suppress_context__


def test_error_is_a_value_error_with_position_attributes():
    with pytest.raises(
        ValueError, match=r"^line 1:22: expected an expression after WHERE, found end of input$"
    ):
        parse("SELECT * FROM t WHERE")


def test_errors_name_the_right_token_when_parsing_concurrently():
    from concurrent.futures import ThreadPoolExecutor

    def check(i: int) -> str:
        text = f"SELECT c{i} FROM t{i} WHERE" if i % 2 else f"SELECT * FROM t{i} LIMIT 10 junk{i}"
        try:
            parse(text)
        except SqlSyntaxError as e:
            return str(e)
        return "parsed"

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(check, range(200)))
    for i, result in enumerate(results):
        if i % 2:
            assert result.endswith("expected an expression after WHERE, found end of input"), result
        else:
            assert result.endswith(f"expected ';' after '10', found 'junk{i}'"), result


def test_parse_with_text_pairs_each_statement_with_its_own_text():
    from odradek.sql.parser import parse_with_text

    text = "CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='a;b');; -- a comment; with a semicolon\n SELECT a FROM s"
    pairs = parse_with_text(text)
    assert [type(statement).__name__ for statement, _ in pairs] == ["CreateSource", "Select"]
    assert pairs[0][1] == "CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='a;b');"
    assert pairs[1][1].endswith("SELECT a FROM s;")
