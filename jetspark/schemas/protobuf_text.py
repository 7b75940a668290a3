"""``.proto`` text schemas into descriptors, with Google's compiler (``protoc``).

A registry holds a Protobuf schema either serialized (a base64 ``FileDescriptorProto``: what
confluent-kafka's Python serializers register, and what Confluent's registry serves any schema
as for ``?format=serialized``) or as ``.proto`` text (what Java's serializers register, and what
Apicurio serves whatever it is asked). Text is compiled here, once per schema and process: the
file and the files it imports (the registry's references, text or serialized) are written to a
private folder and handed to ``protoc`` — the one in ``grpcio-tools`` (``pip install
"jetspark[protobuf-text]"``), else a ``protoc`` on ``PATH`` — which gives the
``FileDescriptorProto``\\ s the rest of jetspark reads. Google's well-known files come with
either compiler.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from jetspark.errors import JetsparkError

ROOT_NAME = "registered.proto"
"""The file name a text schema is compiled under (a registry's text carries none)."""

_IMPORT = re.compile(r'(?:^|;)\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)
_TIMEOUT_S = 60


class ProtoTextError(JetsparkError):
    """A ``.proto`` text schema that does not compile, or no compiler to compile it."""


def serialized(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The ``FileDescriptorProto`` of a serialized schema (base64), or None for anything else."""
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text.strip(), validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None


def imports(text: str) -> list[str]:
    """The files a ``.proto`` text imports, in order."""
    return _IMPORT.findall(_without_comments(text))


def compile_text(text: str, dependency: Callable[[str], str | None], is_well_known: Callable[[str], bool]
                 ) -> list[descriptor_pb2.FileDescriptorProto]:
    """The files of ``text`` and of everything it imports (well-known files left out), the
    text's own file last, named :data:`ROOT_NAME`. ``dependency(name)`` gives an imported
    file's schema (text or serialized), None when the registry has no reference of that name."""
    command = _compiler()
    with tempfile.TemporaryDirectory(prefix="jetspark-proto-") as folder:
        root = Path(folder)
        given = _write_imports(root, text, dependency, is_well_known)
        (root / ROOT_NAME).write_text(text, encoding="utf-8")
        out = root / "out.pb"
        args = [*command, f"--proto_path={root}", f"--descriptor_set_out={out}", "--include_imports"]
        if given:
            args.append(f"--descriptor_set_in={root / 'given.pb'}")
            (root / "given.pb").write_bytes(descriptor_pb2.FileDescriptorSet(file=given).SerializeToString())
        try:
            done = subprocess.run([*args, ROOT_NAME], cwd=root, capture_output=True, text=True,
                                  timeout=_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ProtoTextError(f"protoc did not compile the .proto text schema in {_TIMEOUT_S} s") from None
        if done.returncode != 0 or not out.exists():
            why = (done.stderr or done.stdout).strip().replace(folder + os.sep, "")
            raise ProtoTextError(f"the .proto text schema does not compile: {why[:1000]}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return [f for f in files if not is_well_known(f.name)]


def _write_imports(root: Path, text: str, dependency: Callable[[str], str | None],
                   is_well_known: Callable[[str], bool]) -> list[descriptor_pb2.FileDescriptorProto]:
    """Write each file ``text`` imports (and theirs) under ``root`` by its import name; the
    serialized ones are returned instead (protoc reads them as a descriptor set)."""
    given: list[descriptor_pb2.FileDescriptorProto] = []
    pending, seen = imports(text), set()
    while pending:
        name = pending.pop()
        if name in seen or is_well_known(name):
            continue
        seen.add(name)
        if len(seen) > 256:
            raise ProtoTextError("the .proto text schema imports more than 256 files")
        found = dependency(name)
        if found is None:
            raise ProtoTextError(f"the .proto text schema imports {name!r}, which is none of its "
                                 "references in the registry")
        proto = serialized(found)
        if proto is not None:
            given.append(proto)
            pending.extend(proto.dependency)
            continue
        path = (root / name).resolve()
        if root.resolve() not in path.parents:
            raise ProtoTextError(f"the .proto text schema imports {name!r}, a path outside its folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(found, encoding="utf-8")
        pending.extend(imports(found))
    return given


def _compiler() -> list[str]:
    """The command that runs protoc with Google's well-known files on its path."""
    try:
        import grpc_tools  # noqa: F401  (its protoc and its copy of the well-known files)
    except ImportError:
        found = shutil.which("protoc")
        if found is None:
            raise ProtoTextError(
                "the Protobuf schema is .proto text, and reading it needs Google's compiler: "
                "pip install \"jetspark[protobuf-text]\" (grpcio-tools) where Spark runs Python, "
                "or put protoc on PATH; a registry that serves the serialized form "
                "(?format=serialized, Confluent's) needs neither") from None
        return [found]
    from importlib.resources import files

    return [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={files('grpc_tools') / '_proto'}"]


def _without_comments(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments (string literals kept)."""
    return re.sub(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', lambda m: m.group(1) or " ", text, flags=re.S)
