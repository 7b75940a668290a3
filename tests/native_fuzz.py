"""Fuzzing the native decoders under AddressSanitizer and UndefinedBehaviorSanitizer.

:func:`build` compiles the three extensions (``_avro_arrow``, ``_protobuf_arrow``,
``_kafka_arrow``: the sources setup.py builds) with ``-fsanitize=address,undefined`` into a
folder; :func:`fuzz` runs this module as a child Python with the sanitizer runtime preloaded
(``LD_PRELOAD``: the interpreter itself is not instrumented) and returns what the sanitizers
reported, if anything. The child (``python -m tests.native_fuzz``) feeds the decoders with
Hypothesis: random bytes, valid records of realistic schemas mutated (bits flipped, bytes set,
inserted, deleted, cut, extreme varints spliced in), positions out of range and mutated
programs; and reads random records (null and empty keys and values, header lists) produced to
librdkafka's in-process mock cluster back through the Kafka reader, checking every byte. A
sanitizer report ends the child with a nonzero status (``halt_on_error``), and the report is
also looked for in its output.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = {  # module name: (source, extra flags), as setup.py builds them
    "_avro_arrow": ("jetspark/schemas/_avro_arrow.c", []),
    "_protobuf_arrow": ("jetspark/schemas/_protobuf_arrow.c", []),
    # a column's data ends a chunk at 600 bytes, not 2 GiB: records of up to 300 reach that path
    "_kafka_arrow": ("datasources/kafka/_kafka_arrow.c", ["-D_POSIX_C_SOURCE=200809L", "-DMAX_OFFSET=600",
                                                          "-ldl"]),
}
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
            "-g", "-O1"]
REPORTS = ("AddressSanitizer", "UndefinedBehaviorSanitizer", "runtime error:", "LeakSanitizer")


def sanitizer_runtime() -> str:
    """The path of gcc's libasan (the Debian package libasan8 comes with gcc)."""
    path = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True,
                          check=True).stdout.strip()
    if not os.path.isabs(path):
        raise RuntimeError("gcc has no libasan.so (Debian: the libasan package of gcc's version)")
    return path


def build(folder: Path, edit: Callable[[str, str], str] | None = None) -> Path:
    """The three extensions built with the sanitizers into ``folder`` (returned); ``edit(name,
    source)``, when given, changes a source first (a planted bug, to see that it is found)."""
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name, (source, extra) in EXTENSIONS.items():
        path = ROOT / source
        if edit is not None:
            path = folder / Path(source).name
            path.write_text(edit(name, (ROOT / source).read_text()))
        out = folder / f"{name}{suffix}"
        cmd = ["gcc", "-shared", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
               "-Wno-cast-function-type", *SANITIZE, f"-I{include}", f"-I{ROOT / 'native'}",
               f"-I{(ROOT / source).parent}", str(path), "-o", str(out), *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"building {name} with the sanitizers failed:\n{done.stderr[-3000:]}")
    return folder


def fuzz(folder: Path, work: Path, *, examples: int, seed: int | None, kafka: bool = True) -> str:
    """Run the child over the sanitized build in ``folder``: '' when it ended cleanly and no
    sanitizer spoke, else what went wrong (its status and the end of its output)."""
    corpus = work / "corpus.json"
    corpus.write_text(json.dumps(make_corpus()))
    env = dict(os.environ)
    env.update({
        "LD_PRELOAD": sanitizer_runtime(),
        "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:exitcode=86:"
                        "handle_segv=1:detect_stack_use_after_return=0",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=87",
        "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    })
    args = [sys.executable, "-m", "tests.native_fuzz", str(folder), str(corpus), str(examples),
            "random" if seed is None else str(seed), "kafka" if kafka else "no-kafka"]
    cpu = 60 + examples // 10  # CPU seconds, several times what a run takes: a decoder that loops is killed

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=False,
                          preexec_fn=limit)
    output = done.stdout + done.stderr
    if done.returncode != 0 or any(r in output for r in REPORTS):
        return f"status {done.returncode}:\n{output[-6000:]}"
    return ""


# -- the corpus: valid records of realistic schemas, built outside the sanitized child ------------

def make_corpus() -> list[dict]:
    """[{"module", "program" (hex words), "payloads" (hex)}] for Avro and Protobuf."""
    import numpy as np

    from jetspark.schemas import avro_program
    from tests.unit.schemas import test_avro_decode as avro_cases
    from tests.unit.schemas.test_decoder_limits import NULLS, _hostile_nulls

    out = []
    schemas = [(avro_cases.ORDER, None), (avro_cases.EDGES, None), (NULLS, None),
               (avro_cases.ORDER, {"type": "record", "name": "Order", "namespace": "shop", "fields": [
                   {"name": "id", "type": "long"}, {"name": "extra", "type": "string", "default": "x"}]})]
    for writer, reader in schemas:
        program = avro_program.compile_program(writer, reader)
        records = avro_cases._random(writer, 30) if writer is not NULLS else [
            {"id": i, "nothing": [None] * i, "empties": [{"n": None}] * (i % 3)} for i in range(10)]
        payloads = avro_cases._encode(writer, records)
        out.append({"module": "_avro_arrow", "program": program.words.hex(),
                    "payloads": [p.hex() for p in payloads]})
    # regressions, run first as they are: array<null> counts of 2**31 and more in 15-17 bytes
    # (skipped as fields the reader lacks), and a program with a negative fixed size
    hostile = avro_program.compile_program(NULLS, {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}]})
    out.append({"module": "_avro_arrow", "program": hostile.words.hex(),
                "payloads": [p.hex() for p in _hostile_nulls()]})
    negative_fixed = np.array([9, 0, 1, 0, 1, 7, 0, 1, -8, 0], np.int32).tobytes()  # record { fixed(-8) }
    out.append({"module": "_avro_arrow", "program": negative_fixed.hex(), "payloads": ["", "00" * 8]})
    for program, payloads in _protobuf_cases(np.random.default_rng(11)):
        out.append({"module": "_protobuf_arrow", "program": program.words.hex(),
                    "payloads": [p.hex() for p in payloads]})
    return out


def _protobuf_cases(rng) -> list:
    import base64

    from google.protobuf.descriptor import FieldDescriptor as FD

    from jetspark.schemas import protobuf_program as pp
    from jetspark.schemas import protobuf_types as pt
    from tests.protobuf_orders import closed_file, defaults_file, message_class, order_file

    def fill(msg, depth: int = 0) -> None:
        for f in msg.DESCRIPTOR.fields:
            if rng.random() < 0.3:
                continue
            if f.type == FD.TYPE_MESSAGE:
                if depth > 2 or f.message_type.GetOptions().map_entry:
                    continue
                if f.is_repeated:
                    for _ in range(int(rng.integers(0, 3))):
                        fill(getattr(msg, f.name).add(), depth + 1)
                elif f.message_type.full_name.startswith("google.protobuf."):
                    getattr(msg, f.name).seconds = int(rng.integers(0, 2 ** 31))
                else:
                    fill(getattr(msg, f.name), depth + 1)
                continue
            value = _scalar(f, rng)
            if value is None:
                continue
            if f.is_repeated:
                getattr(msg, f.name).extend([value] * int(rng.integers(0, 4)))
            else:
                setattr(msg, f.name, value)

    cases = []
    for fdp, name in [(order_file(), "shop.Order"), (defaults_file(), None), (closed_file(), None)]:
        name = name or f"{fdp.package}.{fdp.message_type[0].name}"
        text = base64.b64encode(fdp.SerializeToString()).decode()
        program = pp.compile_program(pt.message(pt.load_file(text, lambda _n: None), name))
        cls = message_class(fdp, name)
        payloads = []
        for _ in range(30):
            msg = cls()
            fill(msg)
            payloads.append(msg.SerializePartialToString())
        cases.append((program, payloads))
    return cases


def _scalar(f, rng):
    from google.protobuf.descriptor import FieldDescriptor as FD

    t = f.type
    if t in (FD.TYPE_STRING,):
        return "s" * int(rng.integers(0, 5))
    if t == FD.TYPE_BYTES:
        return bytes(rng.integers(0, 256, int(rng.integers(0, 5))).astype("uint8"))
    if t == FD.TYPE_BOOL:
        return bool(rng.integers(0, 2))
    if t in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return float(rng.normal())
    if t == FD.TYPE_ENUM:
        return f.enum_type.values[int(rng.integers(0, len(f.enum_type.values)))].number
    if t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return int(rng.integers(0, 2 ** 32))
    if t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return int(rng.integers(0, 2 ** 63))
    if t in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
        return int(rng.integers(-2 ** 31, 2 ** 31))
    if t in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return int(rng.integers(-2 ** 63, 2 ** 63, dtype="int64"))
    return None


# -- the child: runs with the sanitizer runtime preloaded ----------------------------------------

def _load(folder: str, name: str):
    import importlib.util

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    spec = importlib.util.spec_from_file_location(name, os.path.join(folder, name + suffix))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VARINTS = [b"\xff" * 9 + b"\x01", b"\xff" * 10, b"\x80" * 10 + b"\x00", b"\xfe\xff\xff\xff\x0f",
           b"\xff\xff\xff\xff\x0f", b"\x01", b"\x7f", b"\x00", b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x01"]


def _mutate(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    b = bytearray(data)
    for op, at, value in edits:
        at = at % (len(b) + 1)
        if op == 0 and b:
            b[at % len(b)] ^= 1 << (value & 7)
        elif op == 1 and b:
            b[at % len(b)] = value
        elif op == 2:
            b[at:at] = bytes([value])
        elif op == 3 and b:
            del b[at % len(b)]
        elif op == 4:
            del b[at:]
        elif op == 5:
            b[at:at] = VARINTS[value % len(VARINTS)]
    return bytes(b)


def _positions(payloads: list[bytes], wild: list[tuple[int, int]]) -> tuple[bytes, bytes, bytes]:
    import struct

    data = b"".join(payloads)
    starts, ends, at = [], [], 0
    for p in payloads:
        starts.append(at)
        at += len(p)
        ends.append(at)
    for s, e in wild:  # positions the decoder must refuse, not read
        starts.append(s)
        ends.append(e)
    return struct.pack(f"<{len(starts)}q", *starts), struct.pack(f"<{len(ends)}q", *ends), data


def _decoders(folder: str, corpus: list[dict], examples: int, seed: int | None) -> None:
    import struct

    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as fix_seed
    from hypothesis import strategies as st

    modules = {name: _load(folder, name) for name in ("_avro_arrow", "_protobuf_arrow")}
    cases = [(modules[c["module"]], bytes.fromhex(c["program"]), [bytes.fromhex(p) for p in c["payloads"]])
             for c in corpus]
    edits = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6)

    @st.composite
    def batch(draw):
        module, program, valid = draw(st.sampled_from(cases))
        payloads = draw(st.lists(st.one_of(
            st.binary(max_size=64),
            st.builds(_mutate, st.sampled_from(valid), edits),
            st.sampled_from(valid)), min_size=1, max_size=6))
        wild = draw(st.lists(st.tuples(st.integers(-5, 1 << 20), st.integers(-5, 1 << 20)), max_size=2))
        if draw(st.integers(0, 9)) == 0:  # a program the decoder must refuse or run safely
            words = list(struct.unpack(f"<{len(program) // 4}i", program))
            value = st.integers(-3, 40) | st.integers(-2 ** 31, 2 ** 31 - 1)
            spots = st.tuples(st.integers(0, len(words) - 1), value)
            for at, v in draw(st.lists(spots, min_size=1, max_size=3)):
                words[at] = v
            program = struct.pack(f"<{len(words)}i", *words)
        return module, program, payloads, wild

    for module, program, payloads in cases:  # the corpus as it is first
        starts, ends, data = _positions(payloads, [])
        try:
            module.decode(program, starts, ends, data)
        except ValueError:
            pass

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(batch())
    def run(case):
        module, program, payloads, wild = case
        starts, ends, data = _positions(payloads, wild)
        try:
            _nodes, errors = module.decode(program, starts, ends, data)
        except (ValueError, MemoryError):
            return  # a malformed program (or one whose null row cannot be held)
        assert len(errors) == len(payloads) + len(wild)
        if module is modules["_protobuf_arrow"]:
            module.frames(starts, ends, data)

    if seed is not None:
        run = fix_seed(seed)(run)
    run()


def _kafka(folder: str, examples: int, seed: int | None) -> None:
    import logging
    import re
    import struct

    import confluent_kafka
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as fix_seed
    from hypothesis import strategies as st

    ka = _load(folder, "_kafka_arrow")
    maps = Path("/proc/self/maps").read_text()
    ka.load(next(line.split(None, 5)[5] for line in maps.splitlines()
                 if "librdkafka" in line and len(line.split(None, 5)) == 6))

    class Capture(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    capture = Capture()
    log = logging.getLogger("native_fuzz.mock")
    log.addHandler(capture)
    log.setLevel(logging.DEBUG)
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 1, "logger": log, "linger.ms": 0})
    for _ in range(50):
        producer.poll(0.1)
        found = [m for line in capture.lines if (m := re.search(r"replaced with (\S+)", line))]
        if found:
            break
    bootstrap = found[0].group(1)
    topic = "fuzz"
    reader = ka.Reader({"bootstrap.servers": bootstrap, "group.id": "fuzz", "enable.auto.commit": "false",
                        "enable.partition.eof": "true", "auto.offset.reset": "error"})
    state = {"next": 0}

    def column(col: tuple, n: int) -> list:
        validity, offsets, data, _nulls = col
        ends = struct.unpack(f"<{n + 1}i", offsets)
        out = []
        for i in range(n):
            valid = validity is None or (validity[i >> 3] >> (i & 7)) & 1
            out.append(bytes(data[ends[i]:ends[i + 1]]) if valid else None)
        return out

    blob = st.none() | st.binary(max_size=300)
    headers = st.none() | st.lists(st.tuples(st.text(max_size=8).filter(lambda s: "\0" not in s),
                                             st.none() | st.binary(max_size=20)), max_size=4)
    record = st.tuples(blob, blob, headers)

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(record, min_size=1, max_size=12), st.integers(1, 13), st.integers(1, 4000))
    def run(records, max_rows, max_bytes):
        first = state["next"]
        for key, value, hdrs in records:
            producer.produce(topic, value=value, key=key, partition=0, headers=hdrs or None)
        producer.flush(10)
        state["next"] += len(records)
        reader.assign(topic, 0, first)
        got, reads = [], 0
        while len(got) < len(records):
            reads += 1
            assert reads < 100, f"{len(got)} of {len(records)} records read"
            raw = reader.read(max_rows, state["next"], 5000, True, max_bytes)
            assert raw["error_code"] == 0, raw["error"]
            n = raw["rows"]
            keys, values = column(raw["key"], n), column(raw["value"], n)
            h = raw["headers"]
            entries = len(h["key"][1]) // 4 - 1
            names, hvalues = column(h["key"], entries), column(h["value"], entries)
            starts = struct.unpack(f"<{n + 1}i", h["offsets"])
            for i in range(n):
                pairs = [(names[j].decode(), hvalues[j]) for j in range(starts[i], starts[i + 1])]
                got.append((keys[i], values[i], pairs))
        expected = [(k, v, [(name, hv) for name, hv in (hs or [])]) for k, v, hs in records]
        assert got == expected

    if seed is not None:
        run = fix_seed(seed)(run)
    run()
    reader.close()


def main(argv: list[str]) -> None:
    folder, corpus_path, examples, seed_text, kafka = argv
    seed = None if seed_text == "random" else int(seed_text)
    _decoders(folder, json.loads(Path(corpus_path).read_text()), int(examples), seed)
    if kafka == "kafka":
        _kafka(folder, max(1, int(examples) // 50), seed)
    print("fuzzed without a finding")


if __name__ == "__main__":
    main(sys.argv[1:])
