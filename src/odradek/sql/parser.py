"""The parser of the ksqlDB-compatible SQL dialect: `parse(text)` turns statements into the typed AST.

The grammar is written here for lark (LALR(1) with its contextual lexer, so keywords are only reserved
where they can appear). Keywords and unquoted identifiers are case-insensitive (identifiers are
upper-cased); back-quoted identifiers keep their case. Every error is a `SqlSyntaxError` with a one-line
message and the 1-based line and column of the problem.
"""

from __future__ import annotations

import threading
from decimal import Decimal

import lark
from lark import Lark, Token, Transformer, v_args
from lark.lexer import PatternStr

from odradek.sql import ast
from odradek.sql.statement_text import split_statements

__all__ = ["SqlSyntaxError", "parse", "parse_with_text", "position"]

GRAMMAR = r"""
start: statement? (";" statement?)*

?statement: create | insert_values | insert_select | drop | show | describe | explain | terminate
          | print | query

// ------------------------------------------------------------ statements
create: "CREATE"i or_replace source_kind if_not_exists name table_elements? with_props? as_query?
!or_replace: ("OR"i "REPLACE"i)?
!if_not_exists: ("IF"i NOT "EXISTS"i)?
as_query: "AS"i query
!source_kind: "STREAM"i | "TABLE"i
table_elements: "(" column_def ("," column_def)* ")"
column_def: name type key_flag?
!key_flag: "KEY"i | "PRIMARY"i "KEY"i
with_props: "WITH"i "(" property ("," property)* ")"
property: name "=" property_value
?property_value: literal | "-" number_literal -> neg_number

insert_values: "INSERT"i "INTO"i name column_names? "VALUES"i "(" expr_list ")"
column_names: "(" name ("," name)* ")"
insert_select: "INSERT"i "INTO"i name query

drop: "DROP"i source_kind if_exists name delete_topic
!if_exists: ("IF"i "EXISTS"i)?
!delete_topic: ("DELETE"i "TOPIC"i)?

show: ("SHOW"i | "LIST"i) show_what
!show_what: "STREAMS"i | "TABLES"i | "TOPICS"i | "QUERIES"i
describe: "DESCRIBE"i extended name
!extended: "EXTENDED"i?
explain: "EXPLAIN"i (name | query)
terminate: "TERMINATE"i (name | ALL)
ALL: "ALL"i
print: "PRINT"i (IDENT | QUOTED_IDENT | STRING) from_beginning print_limit?
!from_beginning: ("FROM"i "BEGINNING"i)?
print_limit: "LIMIT"i INT

// ------------------------------------------------------------ queries
query: "SELECT"i select_items from_clause join* window? where? group_by? partition_by? having? emit? limit?
select_items: select_item ("," select_item)*
select_item: "*" -> all_columns
           | name "." "*" -> qualified_all_columns
           | expr ("AS"i? name)? -> select_expr
from_clause: "FROM"i source_ref
source_ref: name ("AS"i? name)?
join: join_type "JOIN"i source_ref within? "ON"i expr
!join_type: ("INNER"i | "LEFT"i "OUTER"i? | "FULL"i "OUTER"i?)?
within: "WITHIN"i duration grace? -> within_symmetric
      | "WITHIN"i "(" duration "," duration ")" grace? -> within_before_after
window: "WINDOW"i window_spec
?window_spec: "TUMBLING"i "(" "SIZE"i duration ("," grace)? ")" -> tumbling
            | "HOPPING"i "(" "SIZE"i duration "," "ADVANCE"i "BY"i duration ("," grace)? ")" -> hopping
            | "SESSION"i "(" duration ("," grace)? ")" -> session
grace: "GRACE"i "PERIOD"i duration
duration: INT time_unit
!time_unit: "MILLISECOND"i | "MILLISECONDS"i | "SECOND"i | "SECONDS"i | "MINUTE"i | "MINUTES"i
          | "HOUR"i | "HOURS"i | "DAY"i | "DAYS"i
where: "WHERE"i expr
group_by: "GROUP"i "BY"i expr_list
partition_by: "PARTITION"i "BY"i expr_list
having: "HAVING"i expr
!emit: "EMIT"i ("CHANGES"i | "FINAL"i)
limit: "LIMIT"i INT

// ------------------------------------------------------------ expressions (loosest binding first)
expr_list: expr ("," expr)*
?expr: or_expr
?or_expr: and_expr | or_expr "OR"i and_expr -> or_
?and_expr: not_expr | and_expr "AND"i not_expr -> and_
?not_expr: predicate | NOT not_expr -> not_
?predicate: sum
          | sum comp_op sum -> comparison
          | sum "IS"i negation "NULL"i -> is_null
          | sum negation "BETWEEN"i sum "AND"i sum -> between
          | sum negation "IN"i "(" expr_list ")" -> in_list
          | sum negation "LIKE"i sum -> like
negation: NOT?
!comp_op: "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
?sum: product | sum add_op product -> arithmetic
!add_op: "+" | "-"
?product: unary | product mul_op unary -> arithmetic
!mul_op: "*" | "/" | "%"
?unary: postfix | "-" unary -> negate | "+" unary
?postfix: primary
        | postfix "[" expr "]" -> subscript
        | postfix "->" name -> field_access
?primary: literal
        | name -> column_ref
        | name "." name -> qualified_column_ref
        | name "(" ")" -> function_call
        | name "(" expr_list ")" -> function_call
        | name "(" "*" ")" -> function_call_star
        | "(" expr ")"
        | "CASE"i expr? when_clause+ ("ELSE"i expr)? "END"i -> case
        | "CAST"i "(" expr "AS"i type ")" -> cast
when_clause: "WHEN"i expr "THEN"i expr
?literal: number_literal
        | STRING -> string
        | "TRUE"i -> true
        | "FALSE"i -> false
        | "NULL"i -> null
?number_literal: INT -> integer | DECIMAL -> decimal

// ------------------------------------------------------------ types
?type: name -> primitive_type
     | "DECIMAL"i "(" INT "," INT ")" -> decimal_type
     | "ARRAY"i "<" type ">" -> array_type
     | "MAP"i "<" type "," type ">" -> map_type
     | "STRUCT"i "<" struct_field ("," struct_field)* ">" -> struct_type
struct_field: name type

name: IDENT | QUOTED_IDENT

// ------------------------------------------------------------ tokens
NOT: "NOT"i
IDENT: /[a-z_][a-z0-9_]*/i
QUOTED_IDENT: /`([^`]|``)+`/
STRING: /'([^']|'')*'/
INT: /[0-9]+/
DECIMAL.2: /[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
%ignore /\s+/
%ignore /--[^\n]*/
%ignore /\/\*(.|\n)*?\*\//
"""


class SqlSyntaxError(ValueError):
    """A statement that does not parse (or names an unknown type); str() is one line with the position."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(message, line, column)
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return f"line {self.line}:{self.column}: {self.message}"


# ---------------------------------------------------------------- AST building

_PRIMITIVE_TYPES = {
    "BOOLEAN": "BOOLEAN",
    "INT": "INT",
    "INTEGER": "INT",
    "BIGINT": "BIGINT",
    "DOUBLE": "DOUBLE",
    "VARCHAR": "STRING",
    "STRING": "STRING",
    "BYTES": "BYTES",
    "DATE": "DATE",
    "TIME": "TIME",
    "TIMESTAMP": "TIMESTAMP",
}
_UNIT_MS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}


class _Name(str):
    """An identifier after case folding, remembering where it was written (for error positions)."""

    line: int
    column: int


def _error_at(token: Token | _Name, message: str) -> SqlSyntaxError:
    return SqlSyntaxError(message, token.line, token.column)


def _literal_value(expression: ast.Expression, where: Token | _Name):
    if isinstance(expression, ast.NullLiteral):
        return None
    if isinstance(
        expression, ast.IntegerLiteral | ast.DecimalLiteral | ast.StringLiteral | ast.BooleanLiteral
    ):
        return expression.value
    raise _error_at(where, "a property value must be a literal")


@v_args(inline=True)
class _ToAst(Transformer):
    # ---- names and literals
    def name(self, token: Token) -> _Name:
        if token.type == "QUOTED_IDENT":
            text = _Name(token.value[1:-1].replace("``", "`"))
        else:
            text = _Name(token.value.upper())
        text.line, text.column = token.line, token.column
        return text

    def integer(self, token):
        return ast.IntegerLiteral(int(token))

    def decimal(self, token):
        return ast.DecimalLiteral(Decimal(token))

    def string(self, token):
        return ast.StringLiteral(token.value[1:-1].replace("''", "'"))

    def true(self):
        return ast.BooleanLiteral(True)

    def false(self):
        return ast.BooleanLiteral(False)

    def null(self):
        return ast.NullLiteral()

    def neg_number(self, literal):
        return type(literal)(-literal.value)

    # ---- expressions
    def expr_list(self, *items):
        return tuple(items)

    def or_(self, left, right):
        return ast.Or(left, right)

    def and_(self, left, right):
        return ast.And(left, right)

    def not_(self, _not, operand):
        return ast.Not(operand)

    def negation(self, token=None):
        return token is not None

    def comp_op(self, token):
        return "!=" if token.value == "<>" else token.value

    add_op = mul_op = comp_op

    def comparison(self, left, op, right):
        return ast.Comparison(op, left, right)

    def arithmetic(self, left, op, right):
        return ast.BinaryArithmetic(op, left, right)

    def is_null(self, operand, negated):
        return ast.IsNull(operand, negated)

    def between(self, operand, negated, low, high):
        return ast.Between(operand, low, high, negated)

    def in_list(self, operand, negated, items):
        return ast.InList(operand, items, negated)

    def like(self, operand, negated, pattern):
        return ast.Like(operand, pattern, negated)

    def negate(self, operand):
        if isinstance(operand, ast.IntegerLiteral | ast.DecimalLiteral):
            return type(operand)(-operand.value)
        return ast.Negate(operand)

    def subscript(self, operand, index):
        return ast.Subscript(operand, index)

    def field_access(self, operand, field):
        return ast.FieldAccess(operand, str(field))

    def column_ref(self, name):
        if name in ast.PSEUDO_COLUMNS:
            return ast.PseudoColumn(name)
        return ast.ColumnRef(name)

    def qualified_column_ref(self, qualifier, name):
        if name in ast.PSEUDO_COLUMNS:
            return ast.PseudoColumn(name, qualifier)
        return ast.ColumnRef(name, qualifier)

    def function_call(self, name, args=()):
        return ast.FunctionCall(name, args)

    def function_call_star(self, name):
        return ast.FunctionCall(name, (), star=True)

    def when_clause(self, condition, result):
        return ast.WhenClause(condition, result)

    def case(self, *parts):
        operand = parts[0] if not isinstance(parts[0], ast.WhenClause) else None
        rest = parts[1:] if operand is not None else parts
        whens = tuple(p for p in rest if isinstance(p, ast.WhenClause))
        else_ = rest[-1] if not isinstance(rest[-1], ast.WhenClause) else None
        return ast.Case(operand, whens, else_)

    def cast(self, operand, type_):
        return ast.Cast(operand, type_)

    # ---- types
    def primitive_type(self, name):
        canonical = _PRIMITIVE_TYPES.get(name.upper())
        if canonical is None:
            raise _error_at(name, f"unknown type '{name}'")
        return ast.PrimitiveType(canonical)

    def decimal_type(self, precision, scale):
        return ast.DecimalType(int(precision), int(scale))

    def array_type(self, element):
        return ast.ArrayType(element)

    def map_type(self, key, value):
        return ast.MapType(key, value)

    def struct_field(self, name, type_):
        return ast.StructField(str(name), type_)

    def struct_type(self, *fields):
        return ast.StructType(tuple(fields))

    # ---- durations and windows
    def time_unit(self, token):
        return token

    def duration(self, amount, unit):
        return int(amount) * _UNIT_MS[unit.value.upper().removesuffix("S")]

    def grace(self, ms):
        return ms

    def tumbling(self, size, grace=None):
        return ast.TumblingWindow(size, grace)

    def hopping(self, size, advance, grace=None):
        return ast.HoppingWindow(size, advance, grace)

    def session(self, gap, grace=None):
        return ast.SessionWindow(gap, grace)

    def window(self, spec):
        return spec

    def within_symmetric(self, ms, grace=None):
        return ast.Within(ms, ms, grace)

    def within_before_after(self, before, after, grace=None):
        return ast.Within(before, after, grace)

    # ---- queries
    def all_columns(self):
        return ast.AllColumns()

    def qualified_all_columns(self, qualifier):
        return ast.AllColumns(str(qualifier))

    def select_expr(self, expression, alias=None):
        return ast.SelectItem(expression, None if alias is None else str(alias))

    def select_items(self, *items):
        return tuple(items)

    def source_ref(self, name, alias=None):
        return ast.SourceRef(name, None if alias is None else str(alias))

    def from_clause(self, source):
        return source

    def join_type(self, *tokens):
        return tokens[0].value.upper() if tokens else "INNER"

    def join(self, join_type, source, *rest):
        within = rest[0] if len(rest) == 2 else None
        return ast.Join(join_type, source, rest[-1], within)

    def where(self, expression):
        return ("where", expression)

    def having(self, expression):
        return ("having", expression)

    def group_by(self, expressions):
        return ("group_by", expressions)

    def partition_by(self, expressions):
        return ("partition_by", expressions)

    def emit(self, _emit, token):
        return ("emit", token.value.upper())

    def limit(self, count):
        return ("limit", int(count))

    def query(self, items, source, *clauses):
        fields: dict = {"joins": tuple(c for c in clauses if isinstance(c, ast.Join))}
        for clause in clauses:
            if isinstance(clause, ast.Window):
                fields["window"] = clause
            elif isinstance(clause, tuple):
                fields[clause[0]] = clause[1]
        return ast.Select(items, source, **fields)

    # ---- statements
    def source_kind(self, token):
        return token.value.upper()

    def or_replace(self, *tokens):
        return bool(tokens)

    if_not_exists = if_exists = delete_topic = from_beginning = extended = or_replace

    def key_flag(self, *tokens):
        return tokens[0].value.upper()  # KEY or PRIMARY

    def column_def(self, name, type_, flag=None):
        return ast.ColumnDef(str(name), type_, key=flag == "KEY", primary_key=flag == "PRIMARY")

    def table_elements(self, *columns):
        return tuple(columns)

    def property(self, name, value):
        return (name, value)

    def with_props(self, *props):
        result = {}
        for name, value in props:
            key = name.upper()
            if key in result:
                raise _error_at(name, f"property {key} is given twice")
            result[key] = _literal_value(value, name)
        return result

    def as_query(self, query):
        return query

    def create(self, or_replace, kind, if_not_exists, name, *rest):
        columns = next((r for r in rest if isinstance(r, tuple)), None)
        properties = next((r for r in rest if isinstance(r, dict)), {})
        query = next((r for r in rest if isinstance(r, ast.Select)), None)
        if query is not None:
            if columns is not None:
                raise _error_at(name, f"{kind} {name} AS SELECT cannot also declare columns")
            return ast.CreateAsSelect(kind, str(name), query, properties, or_replace, if_not_exists)
        for column in columns or ():
            if kind == "STREAM" and column.primary_key:
                raise _error_at(
                    name, f"column {column.name} of stream {name}: streams take KEY, not PRIMARY KEY"
                )
            if kind == "TABLE" and column.key:
                raise _error_at(
                    name, f"column {column.name} of table {name}: tables take PRIMARY KEY, not KEY"
                )
        return ast.CreateSource(kind, str(name), columns or (), properties, or_replace, if_not_exists)

    def column_names(self, *names):
        return tuple(str(n) for n in names)

    def insert_values(self, target, *rest):
        columns = rest[0] if len(rest) == 2 else ()
        values = rest[-1]
        if columns and len(columns) != len(values):
            raise _error_at(
                target, f"INSERT INTO {target} names {len(columns)} columns but gives {len(values)} values"
            )
        return ast.InsertValues(str(target), columns, values)

    def insert_select(self, target, query):
        return ast.InsertIntoSelect(str(target), query)

    def drop(self, kind, if_exists, name, delete_topic):
        return ast.Drop(kind, str(name), delete_topic, if_exists)

    def show_what(self, token):
        return token.value.upper()

    def show(self, what):
        return ast.Show(what)

    def describe(self, extended, name):
        return ast.Describe(str(name), extended)

    def explain(self, target):
        if isinstance(target, ast.Select):
            return ast.Explain(query=target)
        return ast.Explain(query_id=str(target))

    def terminate(self, target):
        if isinstance(target, Token) and target.type == "ALL":
            return ast.Terminate(None, all=True)
        return ast.Terminate(str(target))

    def print_limit(self, count):
        return int(count)

    def print(self, topic, from_beginning, limit=None):
        text = topic.value
        if topic.type == "STRING":
            text = text[1:-1].replace("''", "'")
        elif topic.type == "QUOTED_IDENT":
            text = text[1:-1].replace("``", "`")
        return ast.Print(text, from_beginning, limit)

    def start(self, *statements):
        return [s for s in statements if s is not None]


# ---------------------------------------------------------------- errors


class _TokenRecorder:
    """A lark post-lexer that remembers the last tokens handed to the parser (per thread), so an error can
    name the token after which it occurred."""

    always_accept = ()

    def __init__(self):
        self.local = threading.local()

    def process(self, stream):
        recent: list[Token] = []
        self.local.recent = recent
        for token in stream:
            recent.append(token)
            del recent[:-2]
            yield token


_recorder = _TokenRecorder()
_parser = Lark(GRAMMAR, parser="lalr", lexer="contextual", postlex=_recorder, maybe_placeholders=False)
_to_ast = _ToAst()

_PUNCTUATION_NAMES = {"$END": "end of input"}
_REGEX_NAMES = {
    "IDENT": "a name",
    "QUOTED_IDENT": "a name",
    "STRING": "a string",
    "INT": "an integer",
    "DECIMAL": "a number",
}
_EXPRESSION_START = {"IDENT", "INT", "STRING"}
_STATEMENT_START = {"CREATE", "SELECT", "INSERT", "DROP"}
_TIME_UNITS = "a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS)"


def _terminal_text(name: str) -> tuple[str, bool]:
    """How a terminal is shown in a message, and whether it is a keyword."""
    if name in _PUNCTUATION_NAMES:
        return _PUNCTUATION_NAMES[name], False
    if name in _REGEX_NAMES:
        return _REGEX_NAMES[name], False
    try:
        pattern = _parser.get_terminal(name).pattern
    except KeyError:
        return name, False
    if isinstance(pattern, PatternStr) and pattern.value.isalpha():
        return pattern.value.upper(), True
    if isinstance(pattern, PatternStr):
        return f"'{pattern.value}'", False
    return name, False


def _describe_expected(expected: set[str]) -> str:
    if _EXPRESSION_START <= expected:
        return "an expression"
    if {"STRING", "TRUE", "NULL"} <= expected:
        return "a literal (a string, a number, TRUE, FALSE or NULL)"
    if _STATEMENT_START <= expected:
        return "a statement"
    if "MILLISECONDS" in expected and "SECONDS" in expected:
        return _TIME_UNITS
    if "FROM" in expected and "AS" in expected:  # after a projection item: FROM is the likely omission
        return "FROM, ',' or an operator"
    texts = sorted({_terminal_text(name) for name in expected}, key=lambda t: (not t[1], t[0]))
    words = [text for text, _ in texts]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    return f"'{token.value}'"


def _describe_previous(token: Token) -> str:
    text, keyword = _terminal_text(token.type)
    return token.value.upper() if keyword else f"'{token.value}'"


def _convert(error: lark.exceptions.LarkError, text: str) -> SqlSyntaxError:
    recent: list[Token] = getattr(_recorder.local, "recent", [])
    if isinstance(error, lark.exceptions.UnexpectedToken):
        token = error.token
        if token.type == "$END":  # the parser adds $END itself: the post-lexer never saw it
            before = recent[-1] if recent else None
        else:
            earlier = [t for t in recent if t.start_pos < token.start_pos]
            before = earlier[-1] if earlier else None
        if token.type != "$END" and text.startswith("/*", token.start_pos):
            return SqlSyntaxError("unterminated comment", token.line, token.column)
        if token.type == "$END":
            line, column = (before.end_line, before.end_column) if before else (1, 1)
        else:
            line, column = token.line, token.column
        expected = _describe_expected(set(error.expected))
        after = f" after {_describe_previous(before)}" if before is not None else ""
        return SqlSyntaxError(f"expected {expected}{after}, found {_describe_token(token)}", line, column)
    if isinstance(error, lark.exceptions.UnexpectedCharacters):
        char = text[error.pos_in_stream]
        if char == "'":
            message = "unterminated string literal"
        elif char == "`":
            message = "unterminated quoted identifier"
        elif text.startswith("/*", error.pos_in_stream):
            message = "unterminated comment"
        else:
            message = f"unexpected character '{char}'"
        return SqlSyntaxError(message, error.line, error.column)
    if isinstance(error, lark.exceptions.UnexpectedEOF):
        return SqlSyntaxError("unexpected end of input", 1, 1)
    return SqlSyntaxError(str(error).splitlines()[0] if str(error) else type(error).__name__, 1, 1)


def parse(text: str) -> list[ast.Statement]:
    """Parse `;`-separated statements; empty input (or only comments) gives an empty list."""
    try:
        tree = _parser.parse(text)
    except lark.exceptions.LarkError as e:
        raise _convert(e, text) from None
    try:
        return _to_ast.transform(tree)
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, SqlSyntaxError):
            raise e.orig_exc from None
        raise


def position(name: str) -> tuple[int, int] | None:
    """Where a name (a column, function or source reference) was written, if the parser made it."""
    line = getattr(name, "line", None)
    return None if line is None else (line, name.column)


def parse_with_text(text: str) -> list[tuple[ast.Statement, str]]:
    """Parse statements, each with its own text (trimmed, with its semicolon), as the command topic keeps it."""
    statements = parse(text)
    complete, rest, _ = split_statements(text)
    texts = [t for t in complete if parse(t)] + ([rest.strip() + ";"] if parse(rest) else [])
    return list(zip(statements, texts, strict=True))
