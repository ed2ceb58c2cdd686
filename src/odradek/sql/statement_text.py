"""Statements in a text: where each ends (`;` outside strings, quoted identifiers and comments), and the
text without its comments. Shared by the parser and the shell, which must split before it can parse."""

from __future__ import annotations


def split_statements(text: str) -> tuple[list[str], str, bool]:
    """The complete statements of a text (each trimmed, with its ';'; empty ones left out), the text after
    the last ';', and whether that text ends inside a string, a quoted identifier or a /* comment."""
    statements: list[str] = []
    start = i = 0
    while i < len(text):
        c = text[i]
        if c in "'`":
            end = text.find(c, i + 1)
            while end != -1 and text.startswith(c, end + 1):  # a doubled quote is an escaped one
                end = text.find(c, end + 2)
            if end == -1:
                return statements, text[start:], True
            i = end + 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end == -1 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end == -1:
                return statements, text[start:], True
            i = end + 2
        elif c == ";":
            statement = text[start:i + 1].strip()
            if not is_blank(statement[:-1]):
                statements.append(statement)
            start = i = i + 1
        else:
            i += 1
    return statements, text[start:], False


def code_of(text: str) -> str:
    """The text without its comments (each replaced by a space); strings and identifiers kept."""
    parts: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in "'`":
            end = text.find(c, i + 1)
            while end != -1 and text.startswith(c, end + 1):
                end = text.find(c, end + 2)
            end = len(text) if end == -1 else end + 1
            parts.append(text[i:end])
            i = end
        elif text.startswith("--", i) or text.startswith("/*", i):
            closing = "\n" if c == "-" else "*/"
            end = text.find(closing, i + 2)
            i = len(text) if end == -1 else end + len(closing)
            parts.append(" ")
        else:
            parts.append(c)
            i += 1
    return "".join(parts)


def is_blank(text: str) -> bool:
    return not code_of(text).strip()
