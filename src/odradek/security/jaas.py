"""JAAS configuration as Kafka reads sasl.jaas.config: `<login module> <flag> (<option>=<value>)*;`, one module.

Kafka tokenizes the text with Java's StreamTokenizer, and what that accepts is the format: words of letters,
digits, ".", "-", "_" and "$"; quoted strings with backslash escapes; // and /* */ comments. A word that starts
with a digit, "." or "-" is a number, which Kafka rejects as a value: numbers must be quoted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from odradek.config import ConfigError

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str  # one of CONTROL_FLAGS
    options: dict[str, str]


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "quoted", "number", or the character itself (";", "=", ...)
    text: str | None  # the word or the quoted string; None for numbers and characters


_END = _Token("end", None)


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of a sasl.jaas.config value; ConfigError naming `key` if Kafka would refuse it."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    try:
        while (token := next(tokens)) is not _END:
            entries.append(_entry(token, tokens))
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    if not entries:
        raise ConfigError(f"{key}: Login module not specified in JAAS config")
    if len(entries) != 1:
        raise ConfigError(f"{key}: JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]


def _entry(first: _Token, tokens: Iterator[_Token]) -> JaasEntry:
    flag_token = next(tokens)
    if flag_token is _END:
        raise ValueError("Login module control flag not specified in JAAS config")
    if flag_token.text is None:
        raise ValueError("Login module control flag is not available in the JAAS config")
    flag = flag_token.text.upper().lower()  # Java compares the upper case, in which "ſ" is "S"
    if flag not in CONTROL_FLAGS:
        raise ValueError(f"Invalid login module control flag '{flag_token.text}' in JAAS config")
    options: dict[str, str] = {}
    while (token := next(tokens)) is not _END and token.kind != ";":
        if token.text is None:  # Kafka would store it under a null name
            raise ValueError(f"Option name expected in JAAS config, found {token.kind!r}")
        value = _END if next(tokens).kind != "=" else next(tokens)
        if value.text is None:
            raise ValueError(f"Value not specified for key '{token.text}' in JAAS config")
        options[token.text] = value.text
    if token.kind != ";":
        raise ValueError("JAAS config entry not terminated by semi-colon")
    if not first.text:
        raise ValueError("Login module not specified in JAAS config")
    return JaasEntry(first.text, flag, options)


_DIGITS = "0123456789"
_NUMBER_START = frozenset(_DIGITS + ".-")
_ASCII_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_$")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_OCTAL = "01234567"


def _is_word_char(char: str) -> bool:
    """Letters, "-", "_", "$" and everything from U+00A0 on; digits and "." go on a word but do not start one."""
    return char in _ASCII_WORD_CHARS or ord(char) >= 0xA0


def _tokens(text: str) -> Iterator[_Token]:
    """Java's StreamTokenizer as Kafka sets it up; yields _END for ever once the text is used up."""
    i, n = 0, len(text)
    while True:
        while i < n and ord(text[i]) <= 0x20:
            i += 1
        if i == n:
            yield _END
            continue
        char = text[i]
        if char in _NUMBER_START:
            if char == "-" and not (i + 1 < n and text[i + 1] in _DIGITS + "."):
                i += 1
                yield _Token("-", None)
                continue
            i += 1
            seen_dot = char == "."
            while i < n and (text[i] in _DIGITS or text[i] == "." and not seen_dot):
                seen_dot = seen_dot or text[i] == "."
                i += 1
            yield _Token("number", None)
        elif _is_word_char(char):
            start = i
            while i < n and (_is_word_char(text[i]) or text[i] in _NUMBER_START):
                i += 1
            yield _Token("word", text[start:i])
        elif char in "\"'":
            i, value = _quoted(text, i + 1, char)
            yield _Token("quoted", value)
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif char == "/":
            # "//" and, "/" being Java's default comment character, a lone "/" too; the character after the "/"
            # belongs to the comment even when it ends the line, so the comment then runs to the next line's end
            i = min(i + 2, n)
            while i < n and text[i] not in "\r\n":
                i += 1
        else:
            i += 1
            yield _Token(char, None)


def _quoted(text: str, i: int, quote: str) -> tuple[int, str]:
    """The string from i to its closing quote, and where the text goes on; a line end or the text's end also
    closes it, as in Java."""
    chars: list[str] = []
    n = len(text)
    while i < n and text[i] not in (quote, "\n", "\r"):
        char = text[i]
        i += 1
        if char != "\\":
            chars.append(char)
        elif i == n:
            break
        elif text[i] in _OCTAL:
            # up to three octal digits, the first of three at most 3 so the value fits a byte
            digits = 3 if text[i] <= "3" else 2
            end = i + 1
            while end < n and end - i < digits and text[end] in _OCTAL:
                end += 1
            chars.append(chr(int(text[i:end], 8)))
            i = end
        else:
            chars.append(_ESCAPES.get(text[i], text[i]))
            i += 1
    if i < n and text[i] == quote:
        i += 1
    return i, "".join(chars)
