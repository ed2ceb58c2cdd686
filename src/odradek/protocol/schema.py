"""Declarative Kafka message schemas, compiled into straight-line encode/decode functions per version.

A message is declared once (see `messages/`), as plain data:

    Api(key=0, name="Produce", valid_versions=(3, 12), flexible_from=9, request=[
        Field("transactional_id", String, versions="3+", nullable_versions="3+", default=None),
        Field("topic_data", Array(Struct(
            Field("name", String),
            Field("partition_data", Array(Struct(
                Field("index", Int32),
                Field("records", Records, nullable_versions="0+"),
            ), name="PartitionProduceData")),
        ), name="TopicProduceData")),
    ], response=[...])

On first use of an (api, direction, version) the declaration is turned into Python source text (one
function per struct, fixed-width runs of fields packed with one precompiled `struct.Struct`), compiled
once and cached; identical sources (versions that do not differ) share one compiled function.

Messages are dicts keyed by the snake_case field name (`snake_case`): decoding returns exactly the fields
present in the version (tagged fields absent from the wire take their default); encoding ignores keys
not in the version and uses the declared default for missing keys. Wire rules follow Kafka's generated
code: compact (uvarint length + 1) strings, bytes and arrays in flexible versions, a tagged-field section
at the end of every struct in flexible versions (unknown tags skipped, known tags written only when the
value differs from the default), nullable structs prefixed by an int8 (-1 null, 1 present), uuids as
16 raw bytes.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from odradek.protocol.file_region import FileRegion
from odradek.protocol.types import MalformedMessage, read_uvarint, write_uvarint

__all__ = [
    "Api", "Array", "Bool", "Bytes", "EncodeError", "Field", "Float64", "Int8", "Int16", "Int32", "Int64",
    "MalformedMessage", "Primitive", "Records", "String", "Struct", "UInt16", "UInt32", "UnsupportedVersion",
    "Uuid", "Versions", "snake_case",
]

MAX_VERSION = 0x7FFF


class UnsupportedVersion(ValueError):
    """The api version is outside the declared valid range."""


class EncodeError(ValueError):
    """A message dict does not fit its declaration (wrong type, None for a non-nullable field, ...)."""


def snake_case(name: str) -> str:
    """Kafka field name to dict key: `TopicData` -> `topic_data`, `TopicID` -> `topic_id`, `LogDirs` -> `log_dirs`.

    An underscore goes before every capital that starts a capitalised word (`[A-Z][a-z]+`) and between a
    lowercase letter or digit and a capital; then everything is lowercased.
    """
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


class Versions:
    """A version range in Kafka's notation: "3+", "1-4", "5" or "none"."""

    __slots__ = ("lo", "hi", "text")

    def __init__(self, text: str | None):
        self.text = text
        if text is None or text == "none":
            self.lo, self.hi = 1, 0
        elif text.endswith("+"):
            self.lo, self.hi = int(text[:-1]), MAX_VERSION
        elif "-" in text:
            lo, hi = text.split("-")
            self.lo, self.hi = int(lo), int(hi)
        else:
            self.lo = self.hi = int(text)

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def key(self) -> tuple[int, int]:
        return (self.lo, self.hi) if self.lo <= self.hi else (1, 0)

    def __eq__(self, other) -> bool:
        return isinstance(other, Versions) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"Versions({self.text!r})"


# ---------------------------------------------------------------------------------------------- types

class Primitive:
    """A scalar wire type. `fmt` is its struct format when fixed-width, else None."""

    __slots__ = ("name", "fmt", "size", "default", "min_size", "compact_min_size")

    def __init__(self, name: str, fmt: str | None, size: int, default: Any, min_size: int = 0,
                 compact_min_size: int = 0):
        self.name = name  # Kafka's type name in the JSON specs
        self.fmt = fmt
        self.size = size
        self.default = default
        self.min_size = min_size or size
        self.compact_min_size = compact_min_size or size

    def __repr__(self) -> str:
        return self.name


Bool = Primitive("bool", "?", 1, False)
Int8 = Primitive("int8", "b", 1, 0)
Int16 = Primitive("int16", "h", 2, 0)
UInt16 = Primitive("uint16", "H", 2, 0)
Int32 = Primitive("int32", "i", 4, 0)
UInt32 = Primitive("uint32", "I", 4, 0)
Int64 = Primitive("int64", "q", 8, 0)
Float64 = Primitive("float64", "d", 8, 0.0)
Uuid = Primitive("uuid", "16s", 16, bytes(16))
String = Primitive("string", None, 0, "", min_size=2, compact_min_size=1)
Bytes = Primitive("bytes", None, 0, b"", min_size=4, compact_min_size=1)
Records = Primitive("records", None, 0, None, min_size=4, compact_min_size=1)

PRIMITIVES = {p.name: p for p in (Bool, Int8, Int16, UInt16, Int32, UInt32, Int64, Float64, Uuid, String, Bytes,
                                  Records)}


class Struct:
    """An ordered group of fields; `name` is Kafka's struct type name (informational, checked by tests)."""

    __slots__ = ("fields", "name")

    def __init__(self, *fields: Field, name: str = ""):
        self.fields = tuple(fields)
        self.name = name

    def __repr__(self) -> str:
        return f"Struct({self.name or '...'})"


class Array:
    __slots__ = ("elem",)

    def __init__(self, elem: Primitive | Struct):
        self.elem = elem

    def __repr__(self) -> str:
        return f"Array({self.elem!r})"


_NO_DEFAULT = object()


class Field:
    __slots__ = ("name", "type", "versions", "nullable_versions", "tagged_versions", "tag", "default",
                 "has_default")

    def __init__(self, name: str, type: Primitive | Array | Struct, versions: str = "0+",
                 nullable_versions: str | None = None, tagged_versions: str | None = None, tag: int | None = None,
                 default: Any = _NO_DEFAULT):
        self.name = name
        self.type = type
        self.versions = Versions(versions)
        self.nullable_versions = Versions(nullable_versions)
        self.tagged_versions = Versions(tagged_versions)
        self.tag = tag
        self.has_default = default is not _NO_DEFAULT
        self.default = default if self.has_default else None
        if (tagged_versions is None) != (tag is None):
            raise ValueError(f"field {name}: tag and tagged_versions go together")

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r})"


# ---------------------------------------------------------------------------------------------- api

class Api:
    """One Kafka API: its declaration and the lazily compiled codecs of each version."""

    def __init__(self, key: int, name: str, valid_versions: tuple[int, int], flexible_from: int | None,
                 request: list[Field], response: list[Field]):
        self.key = key
        self.name = name
        self.valid_versions = tuple(valid_versions)
        self.flexible_from = flexible_from
        self.request = Struct(*request, name=f"{name}Request")
        self.response = Struct(*response, name=f"{name}Response")
        count = self.valid_versions[1] + 1
        # [decode_request, encode_request, decode_response, encode_response], each indexed by version
        self._codecs: list[list] = [[None] * count for _ in range(4)]

    def __repr__(self) -> str:
        return f"Api({self.key}, {self.name!r})"

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        if self.key == 7 and version == 0:  # ControlledShutdown v0
            return 0
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.key == 18:  # ApiVersions responses always use header v0 (KIP-511)
            return 0
        return 1 if self.is_flexible(version) else 0

    def compile_all(self) -> None:
        """Compile every version's codecs now rather than on first use (e.g. at broker start)."""
        for version in range(self.valid_versions[0], self.valid_versions[1] + 1):
            for slot in range(4):
                self._codec(slot, version)

    def _codec(self, slot: int, version: int):
        lo, hi = self.valid_versions
        if not lo <= version <= hi:
            raise UnsupportedVersion(f"{self.name} v{version} is outside the valid versions {lo}-{hi}")
        fn = self._codecs[slot][version]
        if fn is None:
            struct_ = self.request if slot < 2 else self.response
            fn = _compile(struct_, version, self.is_flexible(version), encode=bool(slot & 1))
            self._codecs[slot][version] = fn
        return fn

    def _decode(self, slot: int, version: int, buf, pos: int) -> dict:
        fn = self._codecs[slot][version] if 0 <= version < len(self._codecs[slot]) else None
        if fn is None:
            fn = self._codec(slot, version)
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        try:
            return fn(buf, pos)[0]
        except MalformedMessage as exc:
            raise MalformedMessage(f"{self.name} v{version} {_DIRECTIONS[slot]}: {exc}") from None
        except (struct.error, IndexError, ValueError, TypeError) as exc:
            raise MalformedMessage(f"{self.name} v{version} {_DIRECTIONS[slot]}: truncated or invalid: {exc}") \
                from None

    def _encode(self, slot: int, version: int, body: dict) -> list:
        fn = self._codecs[slot][version] if 0 <= version < len(self._codecs[slot]) else None
        if fn is None:
            fn = self._codec(slot, version)
        out = bytearray()
        parts: list = []
        try:
            fn(out, parts, body)
        except (struct.error, TypeError, AttributeError, ValueError) as exc:
            raise EncodeError(f"{self.name} v{version} {_DIRECTIONS[slot]}: {exc!r}") from exc
        if parts:
            if out:
                parts.append(bytes(out))
            return parts
        return [bytes(out)]

    def decode_request(self, version: int, buf, pos: int = 0) -> dict:
        return self._decode(0, version, buf, pos)

    def encode_request(self, version: int, body: dict) -> bytes:
        parts = self._encode(1, version, body)
        if len(parts) == 1 and type(parts[0]) is bytes:
            return parts[0]
        raise EncodeError(f"{self.name} v{version} request: FileRegion records are only allowed in responses")

    def decode_response(self, version: int, buf, pos: int = 0) -> dict:
        return self._decode(2, version, buf, pos)

    def encode_response(self, version: int, body: dict) -> list:
        return self._encode(3, version, body)


_DIRECTIONS = ("request", "request", "response", "response")


# ---------------------------------------------------------------------------------------------- compiler

_COMPILED: dict[str, Any] = {}  # source text -> root function, shared by identical versions


def _compile(root: Struct, version: int, flexible: bool, encode: bool):
    gen = _Gen(version, flexible)
    root_name = gen.encoder(root) if encode else gen.decoder(root)
    source = "\n".join(gen.lines) + "\n"
    fn = _COMPILED.get(source)
    if fn is None:
        ns = dict(gen.ns)
        exec(compile(source, f"<odradek codec {root.name} v{version}>", "exec"), ns)  # noqa: S102
        for const, enc_name, prefix in gen.default_encodings:  # tagged struct fields: their default's bytes
            out = bytearray(prefix)
            ns[enc_name](out, None, {})
            ns[const] = bytes(out)
        fn = _COMPILED[source] = ns[root_name]
    return fn


def _skip_tags(buf, pos: int) -> int:
    """Skip a tagged field section none of whose tags are known."""
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise MalformedMessage("tagged field count exceeds the remaining bytes")
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedMessage("tagged field size exceeds the remaining bytes")
    return pos


def _fmt_ident(fmt: str) -> str:
    return fmt.replace("?", "z")


def field_default(field: Field, version: int, flexible: bool):
    """The value a field takes when absent (Kafka's rules: explicit default, else the type's zero)."""
    t = field.type
    if field.has_default:
        return field.default
    if isinstance(t, Primitive):
        return t.default
    if isinstance(t, Array):
        return []
    return {f.name: field_default(f, version, flexible) for f in t.fields if version in f.versions}


class _Gen:
    """Generates the source of the encode or decode functions of one (struct tree, version)."""

    def __init__(self, version: int, flexible: bool):
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_MM": MalformedMessage, "_ruv": read_uvarint, "_uv": write_uvarint, "_FR": FileRegion,
            "_pack": struct.pack, "_E": {}, "_bytes": bytes, "_str": str, "_skip_tags": _skip_tags,
        }
        self.names: dict[tuple[int, str], str] = {}
        self.default_encodings: list[tuple[str, str, bytes]] = []
        self.counter = 0

    # -- helpers ------------------------------------------------------------------------------------

    def packer(self, fmt: str) -> str:
        name = "_P_" + _fmt_ident(fmt)
        self.ns.setdefault(name, struct.Struct(">" + fmt).pack)
        return name

    def unpacker(self, fmt: str) -> str:
        name = "_U_" + _fmt_ident(fmt)
        self.ns.setdefault(name, struct.Struct(">" + fmt).unpack_from)
        return name

    def iter_unpacker(self, fmt: str) -> str:
        name = "_I_" + _fmt_ident(fmt)
        self.ns.setdefault(name, struct.Struct(">" + fmt).iter_unpack)
        return name

    def present(self, s: Struct) -> tuple[list[Field], list[Field]]:
        """(regular fields, tagged fields sorted by tag) of a struct in this version."""
        regular, tagged = [], []
        for f in s.fields:
            if self.version not in f.versions:
                continue
            if self.flexible and self.version in f.tagged_versions:
                tagged.append(f)
            else:
                regular.append(f)
        tagged.sort(key=lambda f: f.tag)
        return regular, tagged

    def nullable(self, f: Field) -> bool:
        return self.version in f.nullable_versions

    def min_size(self, t) -> int:
        """Smallest wire size of a value of type t (used to bound array counts before allocating)."""
        if isinstance(t, Primitive):
            return t.compact_min_size if self.flexible else t.min_size
        if isinstance(t, Array):
            return 1 if self.flexible else 4
        regular, _ = self.present(t)
        size = 1 if self.flexible else 0
        for f in regular:
            size += 1 if isinstance(f.type, Struct) and self.nullable(f) else self.min_size(f.type)
        return size

    def default_literal(self, f: Field) -> str:
        return repr(field_default(f, self.version, self.flexible))

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- encoder ------------------------------------------------------------------------------------

    def encoder(self, s: Struct) -> str:
        key = (id(s), "e")
        if key in self.names:
            return self.names[key]
        name = self.names[key] = self.fresh("_e")
        regular, tagged = self.present(s)
        body: list[str] = []
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and isinstance(regular[i].type, Primitive) and regular[i].type.fmt:
                run.append(regular[i])
                i += 1
            if run:
                fmt = "".join(f.type.fmt for f in run)
                args = ", ".join(f"d.get({f.name!r}, {self.default_literal(f)})" for f in run)
                body.append(f"b += {self.packer(fmt)}({args})")
                continue
            f = regular[i]
            i += 1
            body.append(f"v = d.get({f.name!r}, {self.enc_default(f)})")
            body.extend(self.enc_value(f, "v", "b"))
        if self.flexible:
            if not tagged:
                body.append("b.append(0)")
            else:
                body.append("tl = []")
                for f in tagged:
                    body.extend(self.enc_tagged(f))
                body.append("if tl:")
                body.append("    b += _uv(len(tl))")
                body.append("    for x in tl:")
                body.append("        b += x")
                body.append("else:")
                body.append("    b.append(0)")
        self.lines.append(f"def {name}(b, p, d):")
        self.lines.extend("    " + line for line in body or ["pass"])
        return name

    def enc_default(self, f: Field) -> str:
        if isinstance(f.type, Array):
            return "None" if f.has_default and f.default is None else "()"
        if isinstance(f.type, Struct):
            return "None" if f.has_default and f.default is None else "_E"
        return self.default_literal(f)

    def enc_tagged(self, f: Field) -> list[str]:
        t = f.type
        out = [f"v = d.get({f.name!r}, {self.enc_default(f)})"]
        if isinstance(t, Struct) and not (f.has_default and f.default is None):
            # written only when it encodes differently from the default struct ({} is the default)
            const = self.fresh("_D")
            self.default_encodings.append((const, self.encoder(t), b"\x01" if self.nullable(f) else b""))
            out.append("if v:")
            out.append("    t = bytearray()")
            out.extend("    " + line for line in self.enc_value(f, "v", "t"))
            out.append(f"    if t != {const}:")
            out.append(f"        tl.append(_uv({f.tag}) + _uv(len(t)) + t)")
            return out
        else:
            if isinstance(t, Array):
                if f.has_default and f.default is None:
                    cond = "v is not None"
                else:  # default empty: a null (where nullable) or a non-empty array differs from it
                    cond = "v is None or v" if self.nullable(f) else "v"
            elif isinstance(t, Struct) or f.default is None and f.has_default:
                cond = "v is not None"
            else:
                cond = f"v != {self.default_literal(f)}"
            out.append(f"if {cond}:")
            out.append("    t = bytearray()")
            out.extend("    " + line for line in self.enc_value(f, "v", "t"))
        out.append(f"    tl.append(_uv({f.tag}) + _uv(len(t)) + t)")
        return out

    def enc_len(self, n: str, target: str, width_fmt: str) -> list[str]:
        """Lines writing a length: compact (uvarint n+1) or fixed width."""
        if self.flexible:
            return [f"n = {n} + 1",
                    "if n < 128:",
                    f"    {target}.append(n)",
                    "else:",
                    f"    {target} += _uv(n)"]
        return [f"{target} += {self.packer(width_fmt)}({n})"]

    def enc_null(self, target: str, width_fmt: str) -> str:
        if self.flexible:
            return f"{target}.append(0)"
        null = b"\xff" * struct.calcsize(width_fmt)
        return f"{target} += {null!r}"

    def enc_value(self, f: Field, v: str, target: str) -> list[str]:
        """Lines encoding the value in local `v` of field f (type, nullability of this version) into target."""
        t = f.type
        nullable = self.nullable(f)
        out: list[str] = []
        if isinstance(t, Struct):
            enc = self.encoder(t)
            if nullable:
                out += [f"if {v} is None:", f"    {target}.append(255)", "else:", f"    {target}.append(1)",
                        f"    {enc}({target}, p, {v})"]
            else:
                out.append(f"{enc}({target}, p, {v})")
            return out
        if isinstance(t, Array):
            inner = [*self.enc_len(f"len({v})", target, "i")]
            e = t.elem
            if isinstance(e, Struct):
                enc = self.encoder(e)
                inner += [f"for x in {v}:", f"    {enc}({target}, p, x)"]
            elif e.fmt and e is not Uuid:
                inner += [f"if {v}:", f"    {target} += _pack('>%d{e.fmt}' % len({v}), *{v})"]
            else:
                inner += [f"for x in {v}:"]
                inner += ["    " + line for line in self.enc_scalar(e, "x", target, nullable=False)]
            if nullable:
                return [f"if {v} is None:", f"    {self.enc_null(target, 'i')}", "else:",
                        *("    " + line for line in inner)]
            return inner
        return self.enc_scalar(t, v, target, nullable)

    def enc_scalar(self, t: Primitive, v: str, target: str, nullable: bool) -> list[str]:
        if t.fmt:
            return [f"{target} += {self.packer(t.fmt)}({v})"]
        width = "h" if t is String else "i"
        if t is String:
            inner = [f"{v} = {v}.encode()", *self.enc_len(f"len({v})", target, width), f"{target} += {v}"]
        elif t is Bytes:
            inner = [*self.enc_len(f"len({v})", target, width), f"{target} += {v}"]
        else:  # Records: bytes-like, or a FileRegion that ends the current chunk
            inner = [f"if {v}.__class__ is _FR:",
                     *("    " + line for line in self.enc_len(f"{v}.size", target, width)),
                     f"    p.append(_bytes({target}))",
                     f"    p.append({v})",
                     f"    {target}.clear()",
                     "else:",
                     *("    " + line for line in self.enc_len(f"len({v})", target, width)),
                     f"    {target} += {v}"]
        if nullable:
            return [f"if {v} is None:", f"    {self.enc_null(target, width)}", "else:",
                    *("    " + line for line in inner)]
        return inner

    # -- decoder ------------------------------------------------------------------------------------

    def decoder(self, s: Struct) -> str:
        key = (id(s), "d")
        if key in self.names:
            return self.names[key]
        name = self.names[key] = self.fresh("_d")
        regular, tagged = self.present(s)
        body: list[str] = ["end = len(buf)"]
        items: list[str] = []
        local = 0
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and isinstance(regular[i].type, Primitive) and regular[i].type.fmt:
                run.append(regular[i])
                i += 1
            if run:
                fmt = "".join(f.type.fmt for f in run)
                names = []
                for f in run:
                    names.append(f"f{local}")
                    items.append(f"{f.name!r}: f{local}")
                    local += 1
                body.append(f"{', '.join(names)}, = {self.unpacker(fmt)}(buf, pos)")
                body.append(f"pos += {struct.calcsize('>' + fmt)}")
                continue
            f = regular[i]
            i += 1
            var = f"f{local}"
            local += 1
            items.append(f"{f.name!r}: {var}")
            body.extend(self.dec_value(f, var))
        if self.flexible:
            tagged_vars = []
            for f in tagged:
                var = f"f{local}"
                local += 1
                tagged_vars.append(var)
                items.append(f"{f.name!r}: {var}")
                body.append(f"{var} = {self.default_literal(f)}")
            if not tagged:
                body += ["if buf[pos] == 0:",
                         "    pos += 1",
                         "else:",
                         "    pos = _skip_tags(buf, pos)"]
            else:
                loop = [*self.dec_uvarint("nt"),
                        "if nt > end - pos:",
                        "    raise _MM('tagged field count exceeds the remaining bytes')",
                        "for _ in range(nt):",
                        *("    " + line for line in self.dec_uvarint("tag")),
                        *("    " + line for line in self.dec_uvarint("sz")),
                        "    te = pos + sz",
                        "    if te > end:",
                        "        raise _MM('tagged field size exceeds the remaining bytes')"]
                first = True
                for f, var in zip(tagged, tagged_vars, strict=True):
                    loop.append(f"    {'if' if first else 'elif'} tag == {f.tag}:")
                    first = False
                    loop.extend("        " + line for line in self.dec_value(f, var))
                    loop += ["        if pos > te:",
                             f"            raise _MM('tagged field {f.name} overruns its size')"]
                loop.append("    pos = te")
                body += ["if buf[pos] == 0:", "    pos += 1", "else:", *("    " + line for line in loop)]
        body.append(f"return {{{', '.join(items)}}}, pos")
        self.lines.append(f"def {name}(buf, pos):")
        self.lines.extend("    " + line for line in body)
        return name

    def dec_uvarint(self, var: str) -> list[str]:
        return [f"{var} = buf[pos]",
                f"if {var} < 128:",
                "    pos += 1",
                "else:",
                f"    {var}, pos = _ruv(buf, pos)"]

    def dec_len(self, var: str, width_fmt: str) -> list[str]:
        """Lines reading a length into var: -1 means null."""
        if self.flexible:
            return [*self.dec_uvarint(var), f"{var} -= 1"]
        return [f"{var}, = {self.unpacker(width_fmt)}(buf, pos)", f"pos += {struct.calcsize(width_fmt)}"]

    def dec_null_check(self, f: Field, n: str, var: str, nullable: bool) -> list[str]:
        if nullable:
            return [f"if {n} < 0:",
                    f"    if {n} != -1:",
                    f"        raise _MM('negative length for {f.name}')",
                    f"    {var} = None",
                    "else:"]
        return [f"if {n} < 0:",
                f"    raise _MM('null or negative length for non-nullable {f.name}')",
                "else:"]

    def dec_value(self, f: Field, var: str) -> list[str]:
        t = f.type
        nullable = self.nullable(f)
        if isinstance(t, Struct):
            dec = self.decoder(t)
            if nullable:
                return ["if buf[pos] > 127:",
                        "    pos += 1",
                        f"    {var} = None",
                        "else:",
                        f"    {var}, pos = {dec}(buf, pos + 1)"]
            return [f"{var}, pos = {dec}(buf, pos)"]
        if isinstance(t, Array):
            e = t.elem
            out = [*self.dec_len("n", "i"), *self.dec_null_check(f, "n", var, nullable)]
            min_size = max(1, self.min_size(e))
            inner = [f"if n * {min_size} > end - pos:",
                     f"    raise _MM('array length %d of {f.name} exceeds the remaining bytes' % n)"]
            if isinstance(e, Struct):
                dec = self.decoder(e)
                inner += [f"{var} = []",
                          f"ap = {var}.append",
                          "for _ in range(n):",
                          f"    x, pos = {dec}(buf, pos)",
                          "    ap(x)"]
            elif e.fmt:
                inner += [f"e = pos + n * {e.size}",
                          f"{var} = [x for x, in {self.iter_unpacker(e.fmt)}(buf[pos:e])]",
                          "pos = e"]
            else:
                inner += [f"{var} = []",
                          f"ap = {var}.append",
                          "for _ in range(n):",
                          *("    " + line for line in self.dec_scalar(e, f, "x", nullable=False)),
                          "    ap(x)"]
            return out + ["    " + line for line in inner]
        return self.dec_scalar(t, f, var, nullable)

    def dec_scalar(self, t: Primitive, f: Field, var: str, nullable: bool) -> list[str]:
        if t.fmt:
            return [f"{var}, = {self.unpacker(t.fmt)}(buf, pos)", f"pos += {t.size}"]
        width = "h" if t is String else "i"
        if t is String:
            value = "_str(buf[pos:e], 'utf-8')"
        elif t is Bytes:
            value = "_bytes(buf[pos:e])"
        else:
            value = "buf[pos:e]"
        return [*self.dec_len("n", width), *self.dec_null_check(f, "n", var, nullable),
                "    e = pos + n",
                "    if e > end:",
                f"        raise _MM('length %d of {f.name} exceeds the remaining bytes' % n)",
                f"    {var} = {value}",
                "    pos = e"]
