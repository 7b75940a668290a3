"""Protobuf schemas as a Schema Registry holds them, and their Spark types.

A registry keeps a Protobuf schema as one ``.proto`` file, which may import others (its
references, each a subject version of its own) and Google's well-known types. jetspark reads
the file in its serialized form — a base64 ``FileDescriptorProto``, what confluent-kafka's
serializers register and what Confluent's registry serves for ``?format=serialized`` — or,
from a registry that serves ``.proto`` text, compiles the text (:mod:`protobuf_text`), and
builds the file's descriptors in a pool of its own (:func:`load_file`).

The Spark type of a message is the one Spark's ``from_protobuf`` gives it with its default
options (:func:`spark_type`): ``int32``/``sint32``/``sfixed32``/``uint32``/``fixed32`` →
int, the 64-bit ones → long, enums → their value's name, ``google.protobuf.Timestamp`` →
timestamp, ``google.protobuf.Duration`` → day-time interval, maps → map, repeated → array, a
message → struct; a message without fields is left out, and a recursive message is refused.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor
from pyspark.sql import types as T

from jetspark.errors import JetsparkError, OptionError
from jetspark.options import Options
from jetspark.schemas import protobuf_text
from jetspark.schemas.registry import RegisteredSchema, RegistryClient

_WELL_KNOWN = ("any", "descriptor", "duration", "empty", "field_mask", "source_context", "struct",
               "timestamp", "wrappers", "type", "api")
"""Google's well-known files, each after those it imports."""


class ProtobufSchemaError(JetsparkError):
    """A Protobuf schema that cannot be read, or has no Spark type."""


def file_proto(text: str, proto: descriptor_pb2.FileDescriptorProto | None = None
               ) -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` a registry's schema text carries (base64, serialized);
    ``proto``: the text already decoded (:func:`protobuf_text.serialized`)."""
    proto = proto if proto is not None else protobuf_text.serialized(text)
    if proto is None:
        raise ProtobufSchemaError(
            "the Protobuf schema is neither a serialized descriptor (a base64 FileDescriptorProto) "
            "nor .proto text")
    if not proto.name:
        raise ProtobufSchemaError("the Protobuf schema names no file (not a FileDescriptorProto)")
    return proto


def load_file(text: str, dependency: Callable[[str], str | None]) -> FileDescriptor:
    """The file ``text`` describes, with its imports: Google's well-known files, and the
    others from ``dependency(import name)`` (a reference's schema text, or None)."""
    pool = descriptor_pool.DescriptorPool()
    _add_well_known(pool)
    added: set[str] = set()

    def add(proto: descriptor_pb2.FileDescriptorProto, depth: int = 0) -> None:
        if depth > 32:
            raise ProtobufSchemaError("the Protobuf schema's imports nest too deep")
        for name in proto.dependency:
            if not isinstance(name, str):  # a serialized file's import that is not UTF-8 comes as bytes
                raise ProtobufSchemaError(f"the Protobuf file {_shown_name(proto.name)} imports {name!r}, "
                                          "a name that is not UTF-8")
            if name in added or _is_well_known(name):
                continue
            found = dependency(name)
            if found is None:
                raise ProtobufSchemaError(f"the Protobuf schema imports {name!r}, which is none of its "
                                          "references in the registry")
            add(file_proto(found), depth + 1)
        try:
            pool.Add(proto)
        except TypeError as e:
            raise ProtobufSchemaError(f"the Protobuf file {proto.name!r} does not build: {e}") from None
        _keep_alias_defaults(pool, proto)
        added.add(proto.name)

    decoded = protobuf_text.serialized(text)
    if decoded is None and _looks_like_text(text):
        try:
            files = protobuf_text.compile_text(text, dependency, _is_well_known)
        except protobuf_text.ProtoTextError as e:
            raise ProtobufSchemaError(str(e)) from None
        for proto in files:
            add(proto)
        root = files[-1]
    else:
        root = file_proto(text, decoded)
        add(root)
    try:
        return pool.FindFileByName(root.name)
    except KeyError as e:
        raise ProtobufSchemaError(f"the Protobuf file {root.name!r} does not build: {e}") from None


def _shown_name(name: str | bytes) -> str:
    """A file's name as an error shows it (a serialized file's name may not be UTF-8 either)."""
    return repr(name) if isinstance(name, str) else repr(name.decode("utf-8", "backslashreplace"))


_ALIAS_DEFAULTS: dict[FileDescriptor, dict[str, str]] = {}
"""Per built file that has them: its enum fields whose default names an alias, and that name.
Google's runtime keeps a default enum value by number (so its first name), Java by the name
declared, which from_protobuf gives; kept only for such files, which are rare."""


def _fields(proto: descriptor_pb2.FileDescriptorProto):
    """The fields of a file's messages, nested ones too, with their full names."""
    stack = [(_joined(proto.package, m.name), m) for m in proto.message_type]
    while stack:
        name, m = stack.pop()
        for f in m.field:
            yield f"{name}.{f.name}", f
        stack.extend((f"{name}.{n.name}", n) for n in m.nested_type)


def _keep_alias_defaults(pool: descriptor_pool.DescriptorPool, proto: descriptor_pb2.FileDescriptorProto
                         ) -> None:
    aliases = {}
    for name, field in _fields(proto):
        if field.type == FieldDescriptor.TYPE_ENUM and field.HasField("default_value"):
            built = pool.FindFieldByName(name)
            if built.enum_type.values_by_number[built.default_value].name != field.default_value:
                aliases[name] = field.default_value
    if aliases:
        _ALIAS_DEFAULTS[pool.FindFileByName(proto.name)] = aliases


def _looks_like_text(text: str) -> bool:
    """Whether a schema that is not serialized reads as ``.proto`` text (a statement of the language)."""
    return re.search(r"^\s*(syntax|edition|package|message|enum|import|option)\b", text,
                     re.MULTILINE) is not None


def _is_well_known(name: str) -> bool:
    return name.startswith("google/protobuf/") and name.removeprefix("google/protobuf/").removesuffix(
        ".proto") in _WELL_KNOWN


def _add_well_known(pool: descriptor_pool.DescriptorPool) -> None:
    import importlib

    for name in _WELL_KNOWN:
        module = importlib.import_module(f"google.protobuf.{name}_pb2")
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)


def message(file: FileDescriptor, name: str | None) -> Descriptor:
    """The file's message ``name`` (a full name, or a name in the file's package), or its
    first message when ``name`` is None."""
    if name is None:
        if not file.message_types_by_name:
            raise ProtobufSchemaError(f"the Protobuf file {file.name!r} defines no message")
        proto = descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb)
        return file.pool.FindMessageTypeByName(_joined(file.package, proto.message_type[0].name))
    for candidate in (name, _joined(file.package, name)):
        try:
            return file.pool.FindMessageTypeByName(candidate)
        except KeyError:
            continue
    raise ProtobufSchemaError(f"the Protobuf file {file.name!r} has no message {name!r} (its messages: "
                              f"{', '.join(_all_messages(file))})")


@functools.lru_cache(maxsize=1024)
def message_at(file: FileDescriptor, indexes: tuple[int, ...]) -> str | None:
    """The full name of the message at ``indexes`` (Confluent's message indexes: a top-level
    message, then nested ones), or None when there is none; kept per file, so a read task parses
    the file's descriptor once per message key, not once per chunk."""
    proto = descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb)
    found, names = proto.message_type, [file.package] if file.package else []
    for i in indexes:
        if i >= len(found):
            return None
        names.append(found[i].name)
        found = found[i].nested_type
    return ".".join(names)


def _joined(package: str, name: str) -> str:
    return f"{package}.{name}" if package else name


def _all_messages(file: FileDescriptor) -> list[str]:
    out = []

    def walk(d: Descriptor) -> None:
        out.append(d.full_name)
        for n in d.nested_types:
            if not n.GetOptions().map_entry:
                walk(n)

    for d in file.message_types_by_name.values():
        walk(d)
    return out


# -- Spark types -------------------------------------------------------------------------------------

_INTS = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32,
         FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32}
_LONGS = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64,
          FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64}
_SCALARS = {FieldDescriptor.TYPE_FLOAT: T.FloatType(), FieldDescriptor.TYPE_DOUBLE: T.DoubleType(),
            FieldDescriptor.TYPE_BOOL: T.BooleanType(), FieldDescriptor.TYPE_STRING: T.StringType(),
            FieldDescriptor.TYPE_BYTES: T.BinaryType(), FieldDescriptor.TYPE_ENUM: T.StringType(),
            **{t: T.IntegerType() for t in _INTS}, **{t: T.LongType() for t in _LONGS}}


def is_time(d: Descriptor, name: str) -> bool:
    """A ``Timestamp`` or ``Duration`` as Spark recognizes them: the name, and the fields
    ``seconds`` and ``nanos``."""
    return d.name == name and [f.name for f in d.fields] == ["seconds", "nanos"]


_UNSIGNED_BITS = {FieldDescriptor.TYPE_UINT32: 32, FieldDescriptor.TYPE_FIXED32: 32,
                  FieldDescriptor.TYPE_UINT64: 64, FieldDescriptor.TYPE_FIXED64: 64}


def default_value(f: FieldDescriptor) -> object | None:
    """What ``from_protobuf`` gives singular field ``f`` when its message lacks it: the default
    the schema declares (proto2's ``[default = …]``) as Spark holds it — an unsigned number as
    Java's signed one, an enum value by name — or None without one (an implicit default, 0 or
    empty, is not given: Spark reads the field null)."""
    if not f.has_default_value or f.is_repeated or f.type in (FieldDescriptor.TYPE_MESSAGE,
                                                              FieldDescriptor.TYPE_GROUP):
        return None
    if f.type == FieldDescriptor.TYPE_ENUM:  # the name declared (Java keeps an alias), else the number's
        declared = _ALIAS_DEFAULTS.get(f.file, {}).get(f.full_name)
        return declared or f.enum_type.values_by_number[f.default_value].name
    bits = _UNSIGNED_BITS.get(f.type)
    value = f.default_value
    return value - 2**bits if bits and value >= 2 ** (bits - 1) else value


def is_closed_enum(f: FieldDescriptor) -> bool:
    """Whether enum field ``f`` takes only the numbers its enum defines (another is an unknown
    field), as protobuf-java reads it: a closed (proto2) enum's field, and any enum field of a
    proto2 file (an open proto3 enum too: Java's legacy rule, where Google's Python runtime
    keeps the number)."""
    return f.enum_type.is_closed or _syntax(f.file) in ("", "proto2")


@functools.lru_cache(maxsize=1024)
def _syntax(file: FileDescriptor) -> str:
    return descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb).syntax


def is_map(field: FieldDescriptor) -> bool:
    return (field.type == FieldDescriptor.TYPE_MESSAGE and field.is_repeated
            and field.message_type.GetOptions().map_entry)


def spark_type(d: Descriptor) -> T.StructType:
    """The Spark type of message ``d`` (raises ProtobufSchemaError for a recursive message)."""
    struct = _struct(d, (d.full_name,))
    if struct is None:
        raise ProtobufSchemaError(f"the Protobuf message {d.full_name} has no fields Spark can type")
    return struct


def _struct(d: Descriptor, seen: tuple[str, ...]) -> T.StructType | None:
    fields = []
    for f in d.fields:
        data_type = _field_type(f, seen)
        if data_type is None:
            continue
        if isinstance(data_type, T.MapType):
            fields.append(T.StructField(f.name, data_type))
        elif f.is_repeated:
            fields.append(T.StructField(f.name, T.ArrayType(data_type, containsNull=False)))
        else:
            fields.append(T.StructField(f.name, data_type, nullable=not f.is_required))
    return T.StructType(fields) if fields else None


def _field_type(f: FieldDescriptor, seen: tuple[str, ...]) -> T.DataType | None:
    if f.type == FieldDescriptor.TYPE_GROUP:
        raise ProtobufSchemaError(f"the Protobuf field {f.full_name} is a group, which jetspark "
                                  "does not read")
    if f.type != FieldDescriptor.TYPE_MESSAGE:
        return _SCALARS[f.type]
    m = f.message_type
    if is_time(m, "Timestamp"):
        return T.TimestampType()
    if is_time(m, "Duration"):
        return T.DayTimeIntervalType()
    if is_map(f):
        key, value = m.fields_by_name["key"], m.fields_by_name["value"]
        key_type, value_type = _field_type(key, seen), _field_type(value, seen)
        if key_type is None or value_type is None:
            return None
        return T.MapType(key_type, value_type, valueContainsNull=False)
    if m.full_name in seen:
        raise ProtobufSchemaError(f"the Protobuf message {m.full_name} is recursive (field {f.full_name}): "
                                  "a Spark type cannot hold it")
    return _struct(m, (*seen, m.full_name))


# -- carried to the workers ---------------------------------------------------------------------------

def file_set(file: FileDescriptor) -> str:
    """``file`` and the files it imports (but Google's well-known ones), dependencies first, as
    a base64 ``FileDescriptorSet``: what a worker needs to build the file again (:func:`load_set`)."""
    files: list[FileDescriptor] = []

    def walk(f: FileDescriptor) -> None:
        for dep in f.dependencies:
            if not _is_well_known(dep.name) and dep not in files:
                walk(dep)
        if f not in files:
            files.append(f)

    walk(file)
    out = descriptor_pb2.FileDescriptorSet()
    for f in files:
        proto = out.file.add()
        proto.MergeFromString(f.serialized_pb)
        aliases = _ALIAS_DEFAULTS.get(f, {})
        for name, field in _fields(proto):
            if name in aliases:
                field.default_value = aliases[name]
    return base64.b64encode(out.SerializeToString()).decode("ascii")


def load_set(text: str) -> FileDescriptor:
    """The last file of a :func:`file_set`, built with the others."""
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(text)).file
    pool = descriptor_pool.DescriptorPool()
    _add_well_known(pool)
    for proto in files:
        pool.Add(proto)
        _keep_alias_defaults(pool, proto)
    return pool.FindFileByName(files[-1].name)


# -- from a registry and the options --------------------------------------------------------------

def registered_file(client: RegistryClient, schema: RegisteredSchema) -> FileDescriptor:
    """A registered Protobuf schema's file, its references asked from the registry."""
    known = {name: (subject, version) for name, subject, version in schema.references}

    def dependency(name: str) -> str | None:
        if name not in known:
            return None
        found = client.version(*known[name], serialized=True)
        known.update({n: (s, v) for n, s, v in found.references})
        return found.text

    return load_file(schema.text, dependency)


def message_option(file: FileDescriptor, opts: Options, column: str) -> Descriptor:
    """The message ``<column>.message`` names (else ``<column>.subject.record``, else the first)."""
    name = opts.string(f"{column}.message") or opts.string(f"{column}.subject.record")
    try:
        return message(file, name)
    except ProtobufSchemaError as e:
        option = f"{column}.message" if opts.string(f"{column}.message") else f"{column}.subject.record"
        raise OptionError(option, name, f"a message of the schema's file: {e}") from None
