"""A record's ROWTIME from its TIMESTAMP column: epoch ms, a TIMESTAMP, or text in a TIMESTAMP_FORMAT.

TIMESTAMP_FORMAT is a Java DateTimeFormatter pattern, as in ksqlDB (`yyyy-MM-dd HH:mm:ss.SSS`); it is
translated once to a strptime format. Text without a zone is UTC.
"""

from __future__ import annotations

import datetime
import re

from odradek.sql import ast

# Java pattern letters and their strptime directives, longest runs first.
_JAVA_TO_STRPTIME = [
    ("yyyy", "%Y"), ("uuuu", "%Y"), ("yy", "%y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"), ("M", "%m"),
    ("dd", "%d"), ("d", "%d"), ("HH", "%H"), ("H", "%H"), ("hh", "%I"), ("h", "%I"), ("mm", "%M"), ("m", "%M"),
    ("ss", "%S"), ("s", "%S"), ("SSSSSS", "%f"), ("SSS", "%f"), ("SS", "%f"), ("S", "%f"), ("a", "%p"),
    ("XXX", "%z"), ("XX", "%z"), ("X", "%z"), ("xxx", "%z"), ("Z", "%z"), ("EEEE", "%A"), ("EEE", "%a"),
    ("DDD", "%j"),
]
_LETTER_RUN = re.compile(r"'([^']*)'|([A-Za-z])\2*")


class TimestampFormatError(ValueError):
    pass


def strptime_format(java_pattern: str) -> str:
    """The strptime format of a Java DateTimeFormatter pattern, or TimestampFormatError."""
    out, position = [], 0
    for match in _LETTER_RUN.finditer(java_pattern):
        out.append(java_pattern[position:match.start()].replace("%", "%%"))
        position = match.end()
        if match.group(1) is not None:  # 'quoted text'; '' is a single quote
            out.append((match.group(1) or "'").replace("%", "%%"))
            continue
        run = match.group(0)
        directive = next((d for letters, d in _JAVA_TO_STRPTIME if letters == run), None)
        if directive is None:
            raise TimestampFormatError(f"TIMESTAMP_FORMAT '{java_pattern}': the pattern letters '{run}' are "
                                       "not supported")
        out.append(directive)
    out.append(java_pattern[position:].replace("%", "%%"))
    return "".join(out)


def check_timestamp_column(column_type: ast.SqlType, java_pattern: str | None) -> None:
    """Refuse a TIMESTAMP column that cannot be a record time, as ksqlDB refuses it at CREATE."""
    name = column_type.name if isinstance(column_type, ast.PrimitiveType) else None
    if java_pattern is not None:
        if name != "STRING":
            raise TimestampFormatError("TIMESTAMP_FORMAT is for a VARCHAR TIMESTAMP column")
        strptime_format(java_pattern)
    elif name == "STRING":
        raise TimestampFormatError("a VARCHAR TIMESTAMP column needs a TIMESTAMP_FORMAT")
    elif name not in ("BIGINT", "TIMESTAMP"):
        raise TimestampFormatError("the TIMESTAMP column must be BIGINT (epoch ms), TIMESTAMP, or VARCHAR with a "
                                   "TIMESTAMP_FORMAT")


def epoch_ms(value, strptime: str | None = None) -> int | None:
    """ROWTIME from a column value; ValueError when text does not match the format."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.datetime.strptime(value, strptime) if strptime else datetime.datetime.fromisoformat(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return round(value.timestamp() * 1000)
    return int(value)
