"""Protobuf schemas, as Confluent Schema Registry handles them.

A schema is `.proto` source text or, as confluent-kafka's Python serializer registers it, a base64-encoded
serialized FileDescriptorProto. Either is compiled by protoc (grpcio-tools) together with its references and
the well-known files Confluent resolves without references; everything after works on the resulting
descriptors: the canonical text is rendered back from them, and compatibility is Confluent's schema diff
(io.confluent.kafka.schemaregistry.protobuf.diff) computed over them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import importlib
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import grpc_tools
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_encoding, text_format
from google.protobuf.message import DecodeError, Message

from odradek.registry.schema_types import InvalidSchema, ParsedSchema

FileProto = descriptor_pb2.FileDescriptorProto
MessageProto = descriptor_pb2.DescriptorProto
EnumProto = descriptor_pb2.EnumDescriptorProto
FieldProto = descriptor_pb2.FieldDescriptorProto

# The files Confluent knows without a reference (ProtobufSchema's KNOWN_DEPENDENCIES), taken from the modules
# generated from them; google/type needs googleapis-common-protos, confluent/ confluent-kafka.
_KNOWN_MODULES = (
    *(
        f"google.protobuf.{name}_pb2"
        for name in (
            "any api descriptor duration empty field_mask source_context struct timestamp type wrappers"
        ).split()
    ),
    *(
        f"google.type.{name}_pb2"
        for name in (
            "calendar_period color date datetime dayofweek decimal expr fraction interval latlng money month "
            "phone_number postal_address quaternion timeofday"
        ).split()
    ),
    *(
        f"confluent_kafka.schema_registry.confluent.{name}_pb2"
        for name in ("meta", "type.decimal", "type.variant")
    ),
)

# Runs grpc_tools' protoc. Not `python -m grpc_tools.protoc`: that adds an include path, and only the known
# files above may resolve without a reference, as in Confluent. Nor through grpc_tools.protoc, which takes
# longer to import than protoc takes to compile a schema; and without site initialization (-S), as slow.
_PROTOC = (
    f"import sys; sys.path.insert(0, {os.path.dirname(os.path.dirname(grpc_tools.__file__))!r}); "
    "from grpc_tools import _protoc_compiler; "
    "sys.exit(_protoc_compiler.run_main([argument.encode() for argument in sys.argv]))"
)
_PROTOC_SECONDS = 30
_MAIN_FILE = "default"  # the name Confluent gives a schema's own file in its serialized form

_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_NOT_ERRORS = ("WARNING: All log messages before absl::InitializeLog()", "No edition or syntax specified")
# abseil's prefix on protoc's log lines, as "E0000 00:00:1795727070.340819 9552 descriptor_database.cc:222] "
_LOG_PREFIX = re.compile(r"^[EWIF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ")

_MESSAGE_MAX = 536870911  # the largest field number: `max` in a message's reserved and extension ranges
_ENUM_MAX = 2147483647  # `max` in an enum's reserved ranges


def parse(text: str, references: Mapping[str, str]) -> ProtobufSchema:
    """Compiles a schema (.proto text or base64 FileDescriptorProto) whose imports are the keys of
    `references` (each file's .proto text or base64 descriptor) or well-known files."""
    parsed = _parse(text, tuple(sorted(references.items())))
    if isinstance(parsed, str):
        raise InvalidSchema(parsed)
    return parsed


@functools.lru_cache(maxsize=256)
def _parse(text: str, references: tuple[tuple[str, str], ...]) -> ProtobufSchema | str:
    """The schema, or why it is invalid: the same text comes for every registration, lookup and compatibility
    check naming it, and each compile runs protoc."""
    try:
        if not text.strip():
            raise InvalidSchema("the schema is empty")
        file, imported = _compile(text, dict(references))
        defined = file.message_type or file.enum_type or file.service or file.extension
        if not defined and not file.public_dependency:  # an empty file can re-export what it imports
            raise InvalidSchema("the schema defines no message, enum, service or extension")
    except InvalidSchema as e:
        return str(e)
    return ProtobufSchema(file, imported)


def differences(original: ProtobufSchema, update: ProtobufSchema) -> list[tuple[str, str]]:
    """Confluent's SchemaDiff.compare(original, update): (Difference type, path) pairs, compatible too."""
    diff = _Diff(original, update)
    diff.files()
    return diff.found


class ProtobufSchema:
    """A compiled schema: its own file's descriptor and those of the files it imports, transitively."""

    schema_type = "PROTOBUF"

    def __init__(self, file: FileProto, imported: list[FileProto]):
        self._file = file
        self._imported = imported  # dependencies before the files importing them
        self._types = _index_types(file, imported)

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return self._normalized

    def serialized(self) -> str:
        """The base64 FileDescriptorProto Confluent answers for `?format=serialized`."""
        return base64.b64encode(self._file.SerializeToString(deterministic=True)).decode()

    def dependencies(self) -> list[str]:
        """The paths the schema imports: each is a reference's name or a well-known file."""
        return list(self._file.dependency)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"the writer's schema is {writer.schema_type}, not PROTOBUF"]
        # Confluent's BACKWARD check of a new schema against an old one is diff(old, new): the reader updates
        # the writer.
        return [f"{path}: {kind}" for kind, path in differences(writer, self) if kind not in _COMPATIBLE]

    @functools.cached_property
    def _canonical(self) -> str:
        return _Renderer(self._file, self._pool, normalize=False).render()

    @functools.cached_property
    def _normalized(self) -> str:
        return _Renderer(self._file, self._pool, normalize=True).render()

    @functools.cached_property
    def _pool(self) -> descriptor_pool.DescriptorPool | None:
        """The schema's files loaded in Python's protobuf, which names and types their custom options."""
        pool = descriptor_pool.DescriptorPool()
        try:
            if all(file.name != descriptor_pb2.DESCRIPTOR.name for file in self._imported):
                pool.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)  # the option messages
            for file in (*self._imported, self._file):
                pool.Add(file)
        except (TypeError, ValueError):
            # A file protoc accepts and Python's protobuf does not: custom options go unwritten.
            return None
        return pool


# Compiling -----------------------------------------------------------------------------------------------


@functools.cache
def _known_sources() -> dict[str, str]:
    """The known files as .proto text, rendered from the descriptors Python's protobuf has of them. On disk,
    protoc reads a file only when it is imported: a schema may define the names a known file it does not
    import defines."""
    sources = {}
    for module_name in _KNOWN_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        file = FileProto.FromString(module.DESCRIPTOR.serialized_pb)
        sources[file.name] = _Renderer(file, descriptor_pool.Default(), normalize=False).render()
    return sources


def _decode_descriptor(text: str) -> FileProto | None:
    """The FileDescriptorProto that `text` is in base64, or None when it is not one (so .proto text: that has
    spaces, semicolons or braces, none of which base64 has)."""
    compact = text.strip()
    if len(compact) % 4 or not _BASE64.fullmatch(compact):
        return None
    try:
        return FileProto.FromString(base64.b64decode(compact, validate=True))
    except (binascii.Error, DecodeError):
        return None


def _compile(text: str, references: Mapping[str, str]) -> tuple[FileProto, list[FileProto]]:
    """protoc's descriptors for the schema (named "default") and every file it imports, dependencies first.

    Files given as text, and the known files, are written into source directories; files given as descriptors
    go to protoc in a FileDescriptorSet (--descriptor_set_in), where it looks for imports not on disk."""
    main_name = _MAIN_FILE
    while main_name in references:
        main_name += "_"
    given = descriptor_pb2.FileDescriptorSet()
    with tempfile.TemporaryDirectory(prefix="odradek-protoc-") as work:
        sources, known = os.path.join(work, "sources"), os.path.join(work, "known")
        for path, content in [*references.items(), (main_name, text)]:
            if path != main_name:
                _check_import_path(path)
            descriptor = _decode_descriptor(content)
            if descriptor is None:
                _write_source(sources, path, content)
            else:
                descriptor.name = path  # imports name it by its reference name, whatever it was compiled as
                given.file.append(descriptor)
        for path, content in _known_sources().items():
            if path not in references:  # a reference of the same name comes first
                _write_source(known, path, content)
        os.makedirs(sources, exist_ok=True)  # also when every file is a descriptor
        out_path = os.path.join(work, "out.pb")
        command = [
            sys.executable,
            "-I",
            "-S",
            "-c",
            _PROTOC,
            f"--proto_path={sources}",
            f"--proto_path={known}",
        ]
        if given.file:
            given_path = os.path.join(work, "given.pb")
            with open(given_path, "wb") as out:
                out.write(given.SerializeToString())
            command.append(f"--descriptor_set_in={given_path}")
        command += ["--include_imports", f"--descriptor_set_out={out_path}", main_name]
        try:
            result = subprocess.run(
                command, cwd=work, capture_output=True, text=True, timeout=_PROTOC_SECONDS
            )
        except subprocess.TimeoutExpired:
            raise InvalidSchema(f"protoc did not compile the schema in {_PROTOC_SECONDS} s") from None
        if result.returncode != 0:
            raise InvalidSchema(_one_line(result.stderr, (sources + os.sep, known + os.sep)))
        with open(out_path, "rb") as compiled:
            files = list(descriptor_pb2.FileDescriptorSet.FromString(compiled.read()).file)
    main = next(file for file in files if file.name == main_name)
    return main, [file for file in files if file.name != main_name]


def _check_import_path(path: str) -> None:
    # Reference names become paths in the source directory: nothing may lead out of it.
    if "\\" in path or "\0" in path or any(part in ("", ".", "..") for part in path.split("/")):
        raise InvalidSchema(f"reference name {path!r} is not a relative import path")


def _write_source(sources: str, path: str, text: str) -> None:
    full_path = os.path.join(sources, *path.split("/"))
    try:
        os.makedirs(os.path.dirname(full_path), exist_ok=True)
        with open(full_path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as e:  # a reference name that is another's directory too
        raise InvalidSchema(f"cannot write the file {path!r}: {e.strerror}") from None
    except UnicodeEncodeError as e:  # lone surrogates
        raise InvalidSchema(f"the file {path!r} is not text: {e.reason}") from None


def _one_line(errors: str, directories: tuple[str, ...]) -> str:
    """protoc's errors as one line, without its warnings, abseil's log prefixes and the temporary directories
    (so files are named by their import paths)."""
    lines = []
    for line in errors.splitlines():
        for directory in directories:
            line = line.replace(directory, "")
        line = _LOG_PREFIX.sub("", line).strip()
        if line and ": warning: " not in line and not line.startswith(_NOT_ERRORS):
            lines.append(line)
    return "; ".join(lines)[:1000] or "protoc failed"


# Rendering -----------------------------------------------------------------------------------------------

# A field or oneof (or extend block) to write, with the nested messages it declares itself: a map field's
# entry message, a proto2 group's message.
_Block = tuple[Callable[[], None], list[str]]


class _Renderer:
    """Writes a FileDescriptorProto as .proto text that protoc compiles back to the same descriptor.

    Type names are written fully qualified (".pkg.Type"), as Confluent writes schemas it got as descriptors,
    so they mean the same wherever they stand. With `normalize`, what order does not matter for is sorted
    (imports, options, fields by number, enum values by number, reserved ranges); messages, enums and services
    keep their order, which message indexes count."""

    def __init__(self, file: FileProto, pool: descriptor_pool.DescriptorPool | None, normalize: bool):
        self.file = file
        self.pool = pool
        self.normalize = normalize
        self.lines: list[str] = []
        self.depth = 0

    def render(self) -> str:
        file = self.file
        if file.syntax == "editions":
            self._emit(f'edition = "{descriptor_pb2.Edition.Name(file.edition).removeprefix("EDITION_")}";')
        else:
            self._emit(f'syntax = "{file.syntax or "proto2"}";')
        if file.package:
            self._emit(f"package {file.package};")
        public, weak = set(file.public_dependency), set(file.weak_dependency)
        imports = [
            f"import {'public ' if i in public else 'weak ' if i in weak else ''}{_quote(name)};"
            for i, name in enumerate(file.dependency)
        ]
        self._blank()
        for line in sorted(set(imports)) if self.normalize else imports:
            self._emit(line)
        self._blank()
        for name, value in self._options(file.options):
            self._emit(f"option {name} = {value};")
        top_level = {message.name: message for message in file.message_type}
        blocks = self._extend_blocks(file.extension, file.package, top_level)
        self._messages_and_blocks(file.package, file.message_type, blocks)
        for enum in file.enum_type:
            self._enum(enum)
        for service in file.service:
            self._service(service)
        while self.lines[-1] == "":
            self.lines.pop()
        return "\n".join(self.lines) + "\n"

    def _emit(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def _blank(self) -> None:
        """Separates top-level sections and definitions."""
        if self.depth == 0 and self.lines and self.lines[-1] != "":
            self.lines.append("")

    @contextlib.contextmanager
    def _block(self, header: str) -> Iterator[None]:
        self._blank()
        self._emit(header + " {")
        self.depth += 1
        yield
        self.depth -= 1
        self._emit("}")

    def _messages_and_blocks(
        self, scope: str, messages: Iterable[MessageProto], blocks: list[_Block]
    ) -> None:
        """Writes the messages of a scope and its field blocks, each in its order. A block declaring messages
        goes where its first one falls among the others, so the nested message order survives."""
        declaring = {name: i for i, (_, declared) in enumerate(blocks) for name in declared}
        written = 0
        for message in messages:
            if message.name in declaring:
                while written <= declaring[message.name]:
                    blocks[written][0]()
                    written += 1
            elif not message.options.map_entry:
                self._message(message, scope)
        for write, _ in blocks[written:]:
            write()

    def _message(self, message: MessageProto, scope: str) -> None:
        with self._block(f"message {message.name}"):
            self._message_body(message, _join(scope, message.name))

    def _message_body(self, message: MessageProto, scope: str) -> None:
        for name, value in self._options(message.options):
            self._emit(f"option {name} = {value};")
        reserved = [(r.start, r.end - 1) for r in message.reserved_range]  # ends are exclusive there
        self._reserved(reserved, message.reserved_name, _MESSAGE_MAX)
        for extension_range in message.extension_range:
            suffix = _bracketed(self._options(extension_range.options))
            span = _range(extension_range.start, extension_range.end - 1, _MESSAGE_MAX)
            self._emit(f"extensions {span}{suffix};")
        nested = {nested.name: nested for nested in message.nested_type}
        blocks = self._field_blocks(message, scope, nested)
        blocks += self._extend_blocks(message.extension, scope, nested)
        self._messages_and_blocks(scope, message.nested_type, blocks)
        for enum in message.enum_type:
            self._enum(enum)

    def _field_blocks(
        self, message: MessageProto, scope: str, nested: dict[str, MessageProto]
    ) -> list[_Block]:
        # proto3 `optional` fields each have a synthetic oneof; written `optional`, they are not oneofs here.
        members: dict[int, list[FieldProto]] = {}
        loose: list[FieldProto] = []
        for field in message.field:
            if field.HasField("oneof_index") and not field.proto3_optional:
                members.setdefault(field.oneof_index, []).append(field)
            else:
                loose.append(field)

        def field_block(field: FieldProto) -> _Block:
            declared = self._declared(field, scope, nested)
            return (lambda: self._field(field, scope, nested, in_oneof=False)), declared

        def oneof_block(index: int) -> _Block:
            fields = sorted(members[index], key=lambda f: f.number) if self.normalize else members[index]
            declared = [name for field in fields for name in self._declared(field, scope, nested)]

            def write() -> None:
                with self._block(f"oneof {message.oneof_decl[index].name}"):
                    for name, value in self._options(message.oneof_decl[index].options):
                        self._emit(f"option {name} = {value};")
                    for field in fields:
                        self._field(field, scope, nested, in_oneof=True)

            return write, declared

        if self.normalize:  # as Confluent normalizes: fields by number, then oneofs by their first number
            loose.sort(key=lambda f: f.number)
            oneofs = sorted(members, key=lambda index: min(f.number for f in members[index]))
            return [field_block(field) for field in loose] + [oneof_block(index) for index in oneofs]
        blocks = []
        for field in message.field:  # a oneof goes where its first field is
            if not field.HasField("oneof_index") or field.proto3_optional:
                blocks.append(field_block(field))
            elif field.number == members[field.oneof_index][0].number:
                blocks.append(oneof_block(field.oneof_index))
        return blocks

    def _extend_blocks(
        self, extensions: Iterable[FieldProto], scope: str, nested: dict[str, MessageProto]
    ) -> list[_Block]:
        groups: list[tuple[str, list[FieldProto]]] = []
        for field in extensions:
            if self.normalize:  # one block per extended message, fields by number
                group = next((fields for extendee, fields in groups if extendee == field.extendee), None)
                if group is None:
                    groups.append((field.extendee, [field]))
                else:
                    group.append(field)
            elif groups and groups[-1][0] == field.extendee:
                groups[-1][1].append(field)
            else:
                groups.append((field.extendee, [field]))

        def block(extendee: str, fields: list[FieldProto]) -> _Block:
            if self.normalize:
                fields.sort(key=lambda f: f.number)

            def write() -> None:
                with self._block(f"extend {extendee}"):
                    for field in fields:
                        self._field(field, scope, nested, in_oneof=False)

            return write, [name for field in fields for name in self._declared(field, scope, nested)]

        return [block(extendee, fields) for extendee, fields in groups]

    def _declared(self, field: FieldProto, scope: str, nested: dict[str, MessageProto]) -> list[str]:
        inline = self._inline_message(field, scope, nested)
        return [inline.name] if inline is not None else []

    def _inline_message(
        self, field: FieldProto, scope: str, nested: dict[str, MessageProto]
    ) -> MessageProto | None:
        """The message a field declares itself: a map's entry, a proto2 group's body."""
        prefix = f".{scope}." if scope else "."
        typed = field.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_GROUP)
        if not typed or not field.type_name.startswith(prefix):
            return None
        message = nested.get(field.type_name[len(prefix) :])
        if message is None:
            return None
        if message.options.map_entry and field.label == FieldProto.LABEL_REPEATED:
            return message
        # Editions write a delimited field as a plain message field with a feature option.
        if field.type == FieldProto.TYPE_GROUP and self.file.syntax != "editions":
            return message
        return None

    def _field(self, field: FieldProto, scope: str, nested: dict[str, MessageProto], in_oneof: bool) -> None:
        inline = self._inline_message(field, scope, nested)
        options = [("default", self._default(field))] if field.HasField("default_value") else []
        if field.HasField("json_name") and not field.extendee and field.json_name != _json_name(field.name):
            options.append(("json_name", _quote(field.json_name)))
        options += self._options(field.options)
        if self.normalize:
            options.sort(key=lambda option: option[0])
        suffix = _bracketed(options)
        if inline is not None and inline.options.map_entry:
            key, value = inline.field
            self._emit(f"map<{_type(key)}, {_type(value)}> {field.name} = {field.number}{suffix};")
        elif inline is not None:
            with self._block(f"{self._label(field, in_oneof)}group {inline.name} = {field.number}{suffix}"):
                self._message_body(inline, _join(scope, inline.name))
        else:
            self._emit(f"{self._label(field, in_oneof)}{_type(field)} {field.name} = {field.number}{suffix};")

    def _label(self, field: FieldProto, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if field.label == FieldProto.LABEL_REPEATED:
            return "repeated "
        if self.file.syntax == "proto3":
            return "optional " if field.proto3_optional else ""
        if self.file.syntax == "editions":  # presence is a feature option there
            return ""
        return "required " if field.label == FieldProto.LABEL_REQUIRED else "optional "

    @staticmethod
    def _default(field: FieldProto) -> str:
        if field.type == FieldProto.TYPE_STRING:
            return _quote(field.default_value)
        if field.type == FieldProto.TYPE_BYTES:
            return f'"{field.default_value}"'  # the descriptor holds bytes defaults C-escaped already
        return field.default_value  # a number, inf, nan, true, false or an enum value's name

    def _enum(self, enum: EnumProto) -> None:
        with self._block(f"enum {enum.name}"):
            for name, value in self._options(enum.options):
                self._emit(f"option {name} = {value};")
            self._reserved(((r.start, r.end) for r in enum.reserved_range), enum.reserved_name, _ENUM_MAX)
            values = sorted(enum.value, key=lambda v: (v.number, v.name)) if self.normalize else enum.value
            for value in values:
                self._emit(f"{value.name} = {value.number}{_bracketed(self._options(value.options))};")

    def _service(self, service: descriptor_pb2.ServiceDescriptorProto) -> None:
        with self._block(f"service {service.name}"):
            for name, value in self._options(service.options):
                self._emit(f"option {name} = {value};")
            for method in service.method:
                request = f"{'stream ' if method.client_streaming else ''}{method.input_type}"
                response = f"{'stream ' if method.server_streaming else ''}{method.output_type}"
                header = f"rpc {method.name}({request}) returns ({response})"
                options = self._options(method.options)
                if not options:
                    self._emit(header + ";")
                    continue
                with self._block(header):
                    for name, value in options:
                        self._emit(f"option {name} = {value};")

    def _reserved(self, ranges: Iterable[tuple[int, int]], names: Iterable[str], maximum: int) -> None:
        """Writes reserved numbers (inclusive ranges) and names."""
        ranges, names = list(ranges), list(names)
        if self.normalize:
            ranges.sort()
            names.sort()
        if ranges:
            self._emit(f"reserved {', '.join(_range(start, end, maximum) for start, end in ranges)};")
        if names:
            bare = self.file.syntax == "editions"  # editions reserve names as identifiers, not strings
            self._emit(f"reserved {', '.join(name if bare else _quote(name) for name in names)};")

    def _options(self, options: Message) -> list[tuple[str, str]]:
        """(name, value) of each option set, repeated ones once per value."""
        if not options.ByteSize():
            return []
        if self.pool is not None:
            # Read again with the schema's own files, where custom options are extensions with names, types.
            descriptor = self.pool.FindMessageTypeByName(options.DESCRIPTOR.full_name)
            options = message_factory.GetMessageClass(descriptor).FromString(options.SerializeToString())
        items = []
        for field, value in options.ListFields():
            name = f"(.{field.full_name})" if field.is_extension else field.name
            items.extend((name, _option_value(field, v)) for v in (value if field.is_repeated else [value]))
        if self.normalize:
            items.sort(key=lambda item: item[0])
        return items


def _option_value(field, value) -> str:
    if field.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_GROUP):
        text = text_format.MessageToString(value, as_one_line=True)
        return f"{{ {text} }}" if text else "{}"
    if field.type == FieldProto.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else str(value)
    if field.type == FieldProto.TYPE_STRING:
        return _quote(value)
    if field.type == FieldProto.TYPE_BYTES:
        return f'"{text_encoding.CEscape(value, as_utf8=False)}"'
    if field.type == FieldProto.TYPE_BOOL:
        return "true" if value else "false"
    if field.type in (FieldProto.TYPE_FLOAT, FieldProto.TYPE_DOUBLE):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def _type(field: FieldProto) -> str:
    if field.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_GROUP, FieldProto.TYPE_ENUM):
        return field.type_name
    return FieldProto.Type.Name(field.type).removeprefix("TYPE_").lower()


def _bracketed(options: list[tuple[str, str]]) -> str:
    return f" [{', '.join(f'{name} = {value}' for name, value in options)}]" if options else ""


def _range(start: int, end: int, maximum: int) -> str:
    if start == end:
        return str(start)
    return f"{start} to {'max' if end == maximum else end}"


def _quote(text: str) -> str:
    return f'"{text_encoding.CEscape(text, as_utf8=True)}"'


def _json_name(name: str) -> str:
    """protoc's default json_name: underscores dropped, each letter after one upper-cased."""
    out, upper = [], False
    for char in name:
        if char == "_":
            upper = True
        else:
            out.append(char.upper() if upper else char)
            upper = False
    return "".join(out)


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


# Compatibility -------------------------------------------------------------------------------------------

# Confluent's SchemaDiff.COMPATIBLE_CHANGES; every other Difference type makes the schemas incompatible.
_COMPATIBLE = frozenset(
    (
        "MESSAGE_ADDED MESSAGE_MOVED ENUM_ADDED ENUM_REMOVED ENUM_CONST_ADDED ENUM_CONST_CHANGED "
        "ENUM_CONST_REMOVED FIELD_ADDED FIELD_REMOVED FIELD_NAME_CHANGED FIELD_STRING_OR_BYTES_LABEL_CHANGED "
        "ONEOF_ADDED ONEOF_REMOVED ONEOF_FIELD_ADDED ONEOF_FIELD_MOVED_TO_TOP_LEVEL"
    ).split()
)

# Scalar types whose values read as one another on the wire, as Confluent groups them; enums are numbers.
_SCALAR_KINDS = {
    FieldProto.TYPE_INT32: "GENERAL_NUMBER",
    FieldProto.TYPE_INT64: "GENERAL_NUMBER",
    FieldProto.TYPE_UINT32: "GENERAL_NUMBER",
    FieldProto.TYPE_UINT64: "GENERAL_NUMBER",
    FieldProto.TYPE_BOOL: "GENERAL_NUMBER",
    FieldProto.TYPE_ENUM: "GENERAL_NUMBER",
    FieldProto.TYPE_SINT32: "SIGNED_NUMBER",
    FieldProto.TYPE_SINT64: "SIGNED_NUMBER",
    FieldProto.TYPE_STRING: "STRING_OR_BYTES",
    FieldProto.TYPE_BYTES: "STRING_OR_BYTES",
    FieldProto.TYPE_FIXED32: "FIXED32",
    FieldProto.TYPE_SFIXED32: "FIXED32",
    FieldProto.TYPE_FIXED64: "FIXED64",
    FieldProto.TYPE_SFIXED64: "FIXED64",
    FieldProto.TYPE_FLOAT: "FLOAT",
    FieldProto.TYPE_DOUBLE: "DOUBLE",
}


@dataclass(frozen=True)
class _TypeInfo:
    proto: MessageProto | EnumProto
    package: str
    proto3: bool
    source: bytes | None  # the imported file defining the type, serialized; None for the schema's own types


def _index_types(file: FileProto, imported: list[FileProto]) -> dict[str, _TypeInfo]:
    """Every message and enum the schema can use, by full name (without the leading dot)."""
    types: dict[str, _TypeInfo] = {}

    def add(
        scope: str, container: FileProto | MessageProto, defined_in: FileProto, source: bytes | None
    ) -> None:
        proto3 = defined_in.syntax == "proto3"
        for enum in container.enum_type:
            types[_join(scope, enum.name)] = _TypeInfo(enum, defined_in.package, proto3, source)
        for message in _messages(container):
            name = _join(scope, message.name)
            types[name] = _TypeInfo(message, defined_in.package, proto3, source)
            add(name, message, defined_in, source)

    for dependency in imported:
        add(dependency.package, dependency, dependency, dependency.SerializeToString(deterministic=True))
    add(file.package, file, file, None)
    return types


class _Diff:
    """Confluent's schema diff between an original and an updated schema, over their descriptors.

    Paths are Confluent's: "#/" then message names, oneof names and field or enum value numbers."""

    def __init__(self, original: ProtobufSchema, update: ProtobufSchema):
        self.original = original
        self.update = update
        self.found: list[tuple[str, str]] = []
        self.path: list[str] = []
        self.comparing: set[str] = set()  # original messages whose fields are being compared: recursive types

    def add(self, kind: str) -> None:
        self.found.append((kind, "#/" + "/".join(self.path)))

    @contextlib.contextmanager
    def at(self, *steps: str) -> Iterator[None]:
        self.path.extend(steps)
        yield
        del self.path[-len(steps) :]

    def files(self) -> None:
        original, update = self.original._file, self.update._file
        if original.package != update.package:
            self.add("PACKAGE_CHANGED")
        self.types(original.package, original, update.package, update)

    def types(self, original_scope: str, original, update_scope: str, update) -> None:
        """Compares the messages and enums defined in a file or a message, by name."""
        # Map entries are compared as the map fields using them.
        original_messages = {
            m.name: i for i, m in enumerate(m for m in _messages(original) if not m.options.map_entry)
        }
        update_messages = {
            m.name: i for i, m in enumerate(m for m in _messages(update) if not m.options.map_entry)
        }
        for name in _union(original_messages, update_messages):
            with self.at(name):
                if name not in update_messages:
                    self.add("MESSAGE_REMOVED")
                elif name not in original_messages:
                    self.add("MESSAGE_ADDED")
                else:
                    self.messages(_join(original_scope, name), _join(update_scope, name))
                    if original_messages[name] != update_messages[name]:
                        self.add("MESSAGE_MOVED")  # compatible: message indexes go with the writer's schema
        original_enums = {e.name: e for e in original.enum_type}
        update_enums = {e.name: e for e in update.enum_type}
        for name in _union(original_enums, update_enums):
            with self.at(name):
                if name not in update_enums:
                    self.add("ENUM_REMOVED")
                elif name not in original_enums:
                    self.add("ENUM_ADDED")
                else:
                    self.enums(original_enums[name], update_enums[name])

    def enums(self, original: EnumProto, update: EnumProto) -> None:
        original_values = {value.number: value.name for value in original.value}
        update_values = {value.number: value.name for value in update.value}
        for number in sorted(original_values.keys() | update_values.keys()):
            with self.at(str(number)):
                if number not in update_values:
                    self.add("ENUM_CONST_REMOVED")
                elif number not in original_values:
                    self.add("ENUM_CONST_ADDED")
                elif original_values[number] != update_values[number]:
                    self.add("ENUM_CONST_CHANGED")

    def messages(self, original_name: str, update_name: str) -> None:
        original_info, update_info = self.original._types[original_name], self.update._types[update_name]
        original, update = original_info.proto, update_info.proto
        if original_name not in self.comparing:
            self.comparing.add(original_name)
            self.fields(original_info, update_info)
            self.comparing.discard(original_name)
        self.types(original_name, original, update_name, update)

    def fields(self, original_info: _TypeInfo, update_info: _TypeInfo) -> None:
        """Compares fields by number wherever they are, then how oneofs group them."""
        original_fields, original_oneof_of = _fields(original_info.proto)
        update_fields, update_oneof_of = _fields(update_info.proto)
        original_oneofs = _oneofs(original_oneof_of)
        update_oneofs = _oneofs(update_oneof_of)
        # A oneof gone with all its fields is a compatible removal; one whose fields moved is not gone.
        deleted = {
            name
            for name, numbers in original_oneofs.items()
            if name not in update_oneofs and not any(number in update_fields for number in numbers)
        }
        # Fields a oneof now holds that could all be set together before: old data may have several of them.
        for name, numbers in update_oneofs.items():
            origins: set[str | int] = set()
            moved = 0
            for number in numbers:
                if number in original_oneof_of:
                    origins.add(original_oneof_of[number])
                elif number in original_fields:
                    origins.add(number)
                    moved += 1
            if len(origins) > 1:
                with self.at(name):
                    self.add(
                        "MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF"
                    )
        for name in sorted(original_oneofs.keys() | update_oneofs.keys()):
            with self.at(name):
                if name not in update_oneofs:
                    self.add("ONEOF_REMOVED")
                elif name not in original_oneofs:
                    self.add("ONEOF_ADDED")
        for number in sorted(original_fields.keys() | update_fields.keys()):
            original, update = original_fields.get(number), update_fields.get(number)
            original_oneof, update_oneof = original_oneof_of.get(number), update_oneof_of.get(number)
            if update is None:
                if original_oneof is None:
                    with self.at(str(number)):
                        required = _label(original_info, original, False) == "required"
                        self.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED")
                elif original_oneof not in deleted:
                    with self.at(original_oneof, str(number)):
                        self.add("ONEOF_FIELD_REMOVED")
            elif original is None:
                if update_oneof is None:
                    with self.at(str(number)):
                        required = _label(update_info, update, False) == "required"
                        self.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED")
                else:
                    with self.at(update_oneof, str(number)):
                        self.add("ONEOF_FIELD_ADDED")
            else:
                if original_oneof is not None and update_oneof is None:
                    with self.at(str(number)):
                        self.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL")
                with self.at(*([update_oneof] if update_oneof else []), str(number)):
                    if original.name != update.name:
                        self.add("FIELD_NAME_CHANGED")
                    self.field_types(
                        _label(original_info, original, original_oneof is not None),
                        original,
                        _label(update_info, update, update_oneof is not None),
                        update,
                    )

    def field_types(
        self, original_label: str | None, original: FieldProto, update_label: str | None, update: FieldProto
    ) -> None:
        original_kind, update_kind = _kind(self.original, original), _kind(self.update, update)
        if original_kind != update_kind:
            self.add("FIELD_KIND_CHANGED")
        elif original_kind == "SCALAR":
            original_scalar, update_scalar = _SCALAR_KINDS[original.type], _SCALAR_KINDS[update.type]
            if original_scalar != update_scalar:
                self.add("FIELD_SCALAR_KIND_CHANGED")
            elif original_label and update_label and original_label != update_label:
                # Repeated numbers may be packed, which a singular reader cannot read; strings never are.
                numeric = original_scalar != "STRING_OR_BYTES"
                self.add("FIELD_NUMERIC_LABEL_CHANGED" if numeric else "FIELD_STRING_OR_BYTES_LABEL_CHANGED")
        elif original_kind == "MESSAGE":
            self.message_types(original.type_name[1:], update.type_name[1:])
        else:  # maps: keys and values compared as fields without labels
            original_entry = self.original._types[original.type_name[1:]].proto
            update_entry = self.update._types[update.type_name[1:]].proto
            for original_part, update_part in zip(original_entry.field, update_entry.field, strict=True):
                self.field_types(None, original_part, None, update_part)

    def message_types(self, original_name: str, update_name: str) -> None:
        original, update = self.original._types[original_name], self.update._types[update_name]
        original_local = _local(original_name, original.package)
        update_local = _local(update_name, update.package)
        if original_local != update_local:
            self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        if original.source == update.source:
            return  # the schemas' own types are compared by name anyway; an unchanged import needs nothing
        # A type from another file, or from a changed one: compared here, reported at its own path.
        path, start = self.path, len(self.found)
        self.path = original_local.split(".")
        self.messages(original_name, update_name)
        self.path = path
        if any(kind not in _COMPATIBLE for kind, _ in self.found[start:]):
            self.add("FIELD_NAMED_TYPE_CHANGED")


def _messages(container) -> Iterable[MessageProto]:
    return container.message_type if isinstance(container, FileProto) else container.nested_type


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    names = list(first)
    return names + [name for name in second if name not in names]


def _fields(message: MessageProto) -> tuple[dict[int, FieldProto], dict[int, str]]:
    """The message's fields by number, and the oneof of each field in one (not proto3 `optional`'s)."""
    fields = {field.number: field for field in message.field}
    oneof_of = {
        field.number: message.oneof_decl[field.oneof_index].name
        for field in message.field
        if field.HasField("oneof_index") and not field.proto3_optional
    }
    return fields, oneof_of


def _oneofs(oneof_of: dict[int, str]) -> dict[str, list[int]]:
    oneofs: dict[str, list[int]] = {}
    for number, name in oneof_of.items():
        oneofs.setdefault(name, []).append(number)
    return oneofs


def _label(info: _TypeInfo, field: FieldProto, in_oneof: bool) -> str | None:
    """The label as Confluent sees it: none for oneof fields and proto3 fields without one."""
    if in_oneof:
        return None
    if field.proto3_optional:
        return "optional"
    if field.label == FieldProto.LABEL_REPEATED:
        return "repeated"
    if info.proto3:
        return None
    return "required" if field.label == FieldProto.LABEL_REQUIRED else "optional"


def _kind(schema: ProtobufSchema, field: FieldProto) -> str:
    if field.type not in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_GROUP):
        return "SCALAR"
    return "MAP" if schema._types[field.type_name[1:]].proto.options.map_entry else "MESSAGE"


def _local(name: str, package: str) -> str:
    return name[len(package) + 1 :] if package and name.startswith(package + ".") else name
