"""Kafka principals ("User:alice"), and the one a TLS client certificate makes: its subject's RFC 2253 name mapped
by ssl.principal.mapping.rules, as Kafka's DefaultKafkaPrincipalBuilder does."""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.config import ConfigError

USER_TYPE = "User"
WILDCARD_USER = "User:*"  # an ACL for this principal applies to every user
RULES_CONFIG = "ssl.principal.mapping.rules"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """"User:alice" -> KafkaPrincipal("User", "alice"); the name may itself hold colons."""
        principal_type, colon, name = text.partition(":")
        if not colon or not principal_type:
            raise ValueError(f"expected a string in format principalType:principalName but got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


class NoMatchingRule(Exception):
    """No mapping rule applies to a certificate's name: the client cannot be given a principal."""


# Kafka's grammar of the rules, applied the way Kafka applies it: the splitter cuts the list at commas that
# follow a complete rule (so a comma inside a pattern or replacement needs no escape), and a piece the parser
# does not consume whole is an invalid rule. Group 1 of the parser is DEFAULT, 2 the pattern, 4 the
# replacement, 6 the case flag; the last alternative matches leftovers so they can be reported.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(rf"\s*({_RULE})\s*(,\s*|$)", re.ASCII)
_RULE_PARSER = re.compile(_RULE)
_JAVA_TRIM = "".join(map(chr, range(0x21)))  # String.trim() drops every control character and space

Replacement = list[str | int]  # literal text and group numbers, in order
_DIGITS = "0123456789"


class PrincipalMappingRule:
    """DEFAULT (the name as it is), or RULE:pattern/replacement/ with an optional L or U to change case."""

    def __init__(self, pattern: str | None = None, replacement: str = "", case: str = ""):
        self.pattern = pattern
        self.replacement = replacement
        self.case = case
        self._regex = None if pattern is None else _compile(pattern)
        self._parts = [] if self._regex is None else _java_replacement(replacement, self._regex)

    def apply(self, name: str) -> str | None:
        """The mapped name, or None when the rule does not match the whole name."""
        if self._regex is None:
            return name
        if self._regex.fullmatch(name) is None:
            return None
        mapped = _replace_all(self._regex, name, self._expand)
        if self.case == "L":
            return mapped.lower()
        if self.case == "U":
            return mapped.upper()
        return mapped

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else match.group(part) or "" for part in self._parts)

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern}/{self.replacement}{case}"


class SslPrincipalMapper:
    """Kafka's ssl.principal.mapping.rules: the first rule matching a certificate's name gives the principal's."""

    def __init__(self, rules: str = "DEFAULT"):
        self.rules: tuple[PrincipalMappingRule, ...] = tuple(
            rule for text in _split_rules(rules) if (rule := _parse_rule(text)) is not None)

    def map(self, distinguished_name: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {_java_list(self.rules)}")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {_java_list(self.rules)})"


def _split_rules(rules: str) -> list[str]:
    return [match.group(1) for match in _RULE_SPLITTER.finditer(rules.strip(_JAVA_TRIM))]


def _parse_rule(text: str) -> PrincipalMappingRule | None:
    """None for an empty rule, which Kafka skips."""
    match = _RULE_PARSER.match(text)
    assert match is not None  # the last alternative matches anything
    if match.end() != len(text):
        raise ConfigError(f"{RULES_CONFIG}: Invalid rule: `{text}`, unmatched substring: `{text[match.end():]}`")
    if match.group(1) is not None:
        return PrincipalMappingRule()
    if match.group(2) is not None:
        return PrincipalMappingRule(match.group(2), match.group(4), match.group(6))
    return None


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:  # also Java-only syntax, such as (?<name>...) and \p{Alpha}
        raise ConfigError(f"{RULES_CONFIG}: invalid pattern {pattern!r}: {exc}") from None


def _java_list(items: Sequence[object]) -> str:
    return "[" + ", ".join(map(str, items)) + "]"


def _java_replacement(replacement: str, regex: re.Pattern[str]) -> Replacement:
    """Java's replacement syntax: $n and ${name} insert a group, \\x is a literal x.

    Kafka adds one twist: a $n naming no group (after dropping trailing digits, as Java does) is literal text.
    A reference that cannot be resolved fails here, at configuration; Java fails when the rule is used.
    """
    parts: Replacement = []
    literal: list[str] = []
    groups = regex.groups

    def invalid(why: str) -> ConfigError:
        return ConfigError(f"{RULES_CONFIG}: invalid replacement {replacement!r}: {why}")

    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            if i + 1 == len(replacement):
                raise invalid("character to be escaped is missing")
            literal.append(replacement[i + 1])
            i += 2
        elif char != "$":
            literal.append(char)
            i += 1
        elif named := re.match(r"\{([A-Za-z][A-Za-z0-9]*)\}", replacement[i + 1:]):
            if named.group(1) not in regex.groupindex:
                raise invalid(f"No group with name {{{named.group(1)}}}")
            parts += ["".join(literal), regex.groupindex[named.group(1)]]
            literal.clear()
            i += 1 + named.end()
        elif i + 1 < len(replacement) and replacement[i + 1] in _DIGITS:
            group = int(replacement[i + 1])
            if group > groups:
                if groups == 0:
                    raise invalid(f"No group {group}")
                literal.append("$")  # Kafka's literal $n; the digits follow as text
                i += 1
                continue
            i += 2
            # Java takes more digits while they still name a group: with 12 groups $123 is group 12, then "3"
            while i < len(replacement) and replacement[i] in _DIGITS and group * 10 + int(replacement[i]) <= groups:
                group = group * 10 + int(replacement[i])
                i += 1
            parts += ["".join(literal), group]
            literal.clear()
        else:
            raise invalid("Illegal group reference")
    parts.append("".join(literal))
    return parts


def _replace_all(regex: re.Pattern[str], text: str, expand: Callable[[re.Match[str]], str]) -> str:
    """Java's String.replaceAll: after an empty match the search moves on one character (Python's re.sub may
    instead match again, non-empty, at the same place)."""
    pieces: list[str] = []
    copied = search_from = 0
    while search_from <= len(text) and (match := regex.search(text, search_from)) is not None:
        pieces += [text[copied:match.start()], expand(match)]
        copied = match.end()
        search_from = match.end() + (match.end() == match.start())
    pieces.append(text[copied:])
    return "".join(pieces)


# The attributes Java's X500Principal names by an RFC 2253 keyword, by the long names getpeercert() uses.
_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "domainComponent": "DC", "userId": "UID",
    "streetAddress": "STREET",
}
# Other attributes are printed as OID=#<hex of the value's DER>. getpeercert() keeps only the text, so the DER
# string type is the standard one for the attribute: UTF8String unless named here (RFC 5280; OpenSSL does so).
_UTF8_STRING = 0x0C
_STRING_TYPES = {
    "1.2.840.113549.1.9.1": 0x16,  # emailAddress: IA5String
    "2.5.4.5": 0x13,  # serialNumber: PrintableString
    "2.5.4.46": 0x13,  # dnQualifier: PrintableString
    "1.3.6.1.4.1.311.60.2.1.3": 0x13,  # jurisdictionCountryName: PrintableString
}
_ESCAPED = frozenset(',=+<>#;"\\')  # Java escapes "=" and "#" anywhere, beyond RFC 2253's list
_EDGE_WHITESPACE = " \r"

Subject = Sequence[Sequence[tuple[str, str]]]  # ssl.SSLSocket.getpeercert()["subject"]


def distinguished_name(subject: Subject) -> str:
    """The subject as Java's X500Principal.getName() writes it (RFC 2253): the name Kafka's rules map."""
    return ",".join("+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(subject))


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    # getpeercert() names attributes OpenSSL does not know by their OID; the others have OpenSSL's long name
    oid = name if name[:1].isdigit() else ssl._ASN1Object.fromname(name).oid
    return f"{oid}=#{_der_string(_STRING_TYPES.get(oid, _UTF8_STRING), value).hex()}"


def _escape(value: str) -> str:
    escaped = "".join("\\00" if char == "\0" else "\\" + char if char in _ESCAPED else char for char in value)
    lead = len(escaped) - len(escaped.lstrip(_EDGE_WHITESPACE))
    trail = len(escaped.rstrip(_EDGE_WHITESPACE))
    return "".join("\\" + char if i < lead or i >= trail else char for i, char in enumerate(escaped))


def _der_string(tag: int, value: str) -> bytes:
    content = value.encode()
    length = len(content)
    if length < 0x80:
        return bytes([tag, length]) + content
    size = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def principal_from_certificate(subject: Subject, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """The principal of a client that presented a certificate; NoMatchingRule if no rule applies to it."""
    return KafkaPrincipal(USER_TYPE, mapper.map(distinguished_name(subject)))
