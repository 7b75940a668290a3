"""The lean AMQP client's decoding, checked against frames pika encodes (pure logic, no broker)."""

from __future__ import annotations

import datetime as dt
import selectors
import socket
import struct
import time
from decimal import Decimal

import pika
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pika import frame, spec

from jetspark.datasources.rabbitmq.amqp import (
    MAX_NESTING,
    ChannelClosed,
    Connection,
    ConnectionLost,
    Properties,
    TooDeep,
    decode_properties,
    decode_table,
    encode_table,
)


def _delivery_frames(tag: int, body: bytes, props: pika.BasicProperties, *, frame_max: int = 131_072,
                     exchange: str = "ex", routing_key: str = "rk", redelivered: bool = False) -> bytes:
    deliver = spec.Basic.Deliver(consumer_tag="ctag-1", delivery_tag=tag, redelivered=redelivered,
                                 exchange=exchange, routing_key=routing_key)
    out = frame.Method(1, deliver).marshal() + frame.Header(1, len(body), props).marshal()
    chunk = frame_max - 8
    for i in range(0, len(body), chunk):
        out += frame.Body(1, body[i:i + chunk]).marshal()
    return out


class _Collect(Connection):
    """A connection fed bytes by hand: what the socket would bring."""

    def __init__(self) -> None:
        super().__init__("amqp://guest:guest@localhost:5672/%2F")
        self.got: list[tuple] = []
        self.on_delivery = lambda *d: self.got.append(d)
        self.sent: list[bytes] = []

    def _send(self, frame_bytes: bytes) -> None:
        self.sent.append(frame_bytes)

    def feed(self, data: bytes, step: int | None = None) -> None:
        step = step or len(data)
        for i in range(0, len(data), step):
            chunk = self._rest + data[i:i + step]
            self._rest = chunk[self._frames(chunk):]


def test_deliveries_decode_as_pika_encodes_them():
    c = _Collect()
    headers = {"source": "web", "n": 7, "ok": True, "when": dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
               "nested": {"a": "b"}, "list": [1, "x"], "raw": b"\xff\x00", "price": Decimal("1.25")}
    props = pika.BasicProperties(content_type="application/json", headers=headers, delivery_mode=2,
                                 priority=3, correlation_id="c", reply_to="r", expiration="1000",
                                 message_id="m-1", timestamp=1_700_000_000, type="t", user_id="guest",
                                 app_id="app")
    data = (_delivery_frames(1, b"hello", props, redelivered=True)
            + _delivery_frames(2, b"", pika.BasicProperties())
            + _delivery_frames(3, b"y" * 300_000, pika.BasicProperties(message_id="big")))
    c.feed(data, step=97)  # frames split anywhere across reads
    assert [g[0] for g in c.got] == [1, 2, 3]
    _tag, body, p, rk, ex, redelivered = c.got[0]
    assert (body, rk, ex, redelivered) == (b"hello", "rk", "ex", True)
    assert (p.message_id, p.timestamp) == ("m-1", 1_700_000_000)
    assert p.headers == headers
    assert c.got[1][1:3] == (b"", Properties())
    assert c.got[2][1] == b"y" * 300_000 and c.got[2][2].message_id == "big"
    assert c._rest == b"" and c._content is None


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20)
    | st.binary(max_size=20).filter(lambda b: not _utf8(b)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


@given(st.dictionaries(st.text(max_size=10), _values, max_size=6))
def test_tables_decode_as_pika_encodes_them(table):
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, table)
    encoded = b"".join(pieces)
    decoded, end = decode_table(encoded, 0)
    assert end == len(encoded)
    assert decoded == pika.data.decode_table(encoded, 0)[0]


def test_short_strings_that_are_not_utf8_become_escaped_text():
    c = _Collect()
    c.feed(_delivery_frames(1, b"x", pika.BasicProperties(message_id=b"id-\xff"), routing_key="rk"))
    assert c.got[0][2].message_id == "id-\\xff"


def test_floats_stay_floats():
    decoded, _ = decode_table(b"\x00\x00\x00\x0b\x01xd" + b"?\xf8\x00\x00\x00\x00\x00\x00", 0)
    assert decoded == {"x": 1.5}


def test_client_table_round_trips():
    table = {"product": "jetspark", "capabilities": {"basic.nack": True}, "n": 3, "raw": b"\x01"}
    assert decode_table(encode_table(table), 0)[0] == {**table, "raw": "\x01"}


def test_only_kept_properties_are_read():
    props = pika.BasicProperties(content_encoding="gzip", message_id="abc", cluster_id="c1")
    encoded = frame.Header(1, 0, props).marshal()
    flags = int.from_bytes(encoded[7 + 12:7 + 14], "big")
    assert decode_properties(encoded, 7 + 14, flags) == Properties(message_id="abc")


def test_broker_closing_the_channel_is_raised_with_its_code():
    c = _Collect()
    close = spec.Channel.Close(reply_code=404, reply_text="NOT_FOUND - no queue 'q'",
                               class_id=50, method_id=10)
    with pytest.raises(ChannelClosed) as e:
        c.feed(frame.Method(1, close).marshal())
    assert e.value.reply_code == 404
    assert c.sent[-1] == frame.Method(1, spec.Channel.CloseOk()).marshal()


def test_broker_closing_the_connection_is_a_lost_connection():
    c = _Collect()
    close = spec.Connection.Close(reply_code=320, reply_text="CONNECTION_FORCED", class_id=0, method_id=0)
    with pytest.raises(ConnectionLost, match="320 CONNECTION_FORCED"):
        c.feed(frame.Method(0, close).marshal())


def test_a_frame_without_its_end_byte_is_refused():
    c = _Collect()
    bad = bytearray(frame.Heartbeat().marshal())
    bad[-1] = 0
    with pytest.raises(ConnectionLost, match="malformed"):
        c.feed(bytes(bad) + b"\x00")


def test_frames_we_send_are_what_pika_would_send():
    c = _Collect()
    c.ack(42, multiple=True)
    assert c.sent[-1] == frame.Method(1, spec.Basic.Ack(delivery_tag=42, multiple=True)).marshal()


class _Piped(Connection):
    """A connection on one end of a socket pair; the test plays the broker on the other."""

    def __init__(self) -> None:
        super().__init__("amqp://guest:guest@localhost:5672/%2F")
        self._sock, self.broker = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._sock, selectors.EVENT_READ)
        self.got: list[tuple] = []
        self.on_delivery = lambda *d: self.got.append(d)

    def drain(self) -> None:
        while self.process(0.05):
            pass


def test_after_the_broker_closes_the_channel_the_connection_is_dropped():
    c = _Piped()
    close = spec.Channel.Close(reply_code=406, reply_text="PRECONDITION_FAILED - consumer timeout",
                               class_id=0, method_id=0)
    c.broker.sendall(_delivery_frames(1, b"a", pika.BasicProperties()) + frame.Method(1, close).marshal()
                     + frame.Heartbeat().marshal() + frame.Heartbeat().marshal()[:4])
    with pytest.raises(ChannelClosed, match="406"):
        c.drain()
    assert [g[0] for g in c.got] == [1] and not c.is_open  # the caller reconnects


def _deliver_frame(tag: int) -> bytes:
    return frame.Method(1, spec.Basic.Deliver(consumer_tag="t", delivery_tag=tag, exchange="",
                                              routing_key="q")).marshal()


def _header_frame(flags: int, props: bytes, body_size: int) -> bytes:
    payload = struct.pack(">HHQH", 60, 0, body_size, flags) + props
    return struct.pack(">BHI", 2, 1, len(payload)) + payload + b"\xce"


def test_odd_header_values_do_not_fail_a_delivery():
    c = _Piped()
    table = b"\x04whenT" + b"\xff" * 8 + b"\x03oddZ\x00\x00" + b"\x05laterS\x00\x00\x00\x01x"
    headers = struct.pack(">I", len(table)) + table  # a timestamp beyond datetime, an unknown type
    c.broker.sendall(_deliver_frame(7) + _header_frame(1 << 13, headers, 1) + frame.Body(1, b"b").marshal()
                     + _delivery_frames(8, b"c", pika.BasicProperties()))
    c.drain()
    assert [g[0] for g in c.got] == [7, 8] and c.is_open
    assert c.got[0][2].headers == {"when": 2**64 - 1}  # the unknown type 'Z' ends the table


def test_a_frame_that_does_not_decode_drops_the_connection():
    c = _Piped()
    headers = struct.pack(">I", 100) + b"\x05"  # a table of 100 bytes that has 1
    c.broker.sendall(_deliver_frame(1) + _header_frame(1 << 13, headers, 1))
    with pytest.raises(ConnectionLost, match="undecodable frame"):
        c.drain()
    assert not c.is_open and c.got == []
    c2 = _Piped()
    c2.broker.sendall(struct.pack(">BHI", 1, 1, 10_000_000) + b"\x00")
    with pytest.raises(ConnectionLost, match="over frame_max"):
        c2.drain()
    assert not c2.is_open


def test_frames_waiting_in_the_socket_count_as_signs_of_life():
    c = _Piped()
    c.heartbeat_s = 1
    c._last_recv = c._last_send = time.monotonic() - 5  # the caller stalled for 5 s
    c.broker.sendall(frame.Heartbeat().marshal())
    c.process(0)
    assert c.is_open
    assert c.broker.recv(100) == frame.Heartbeat().marshal()  # ours went out too
    c._last_recv = time.monotonic() - 5
    with pytest.raises(ConnectionLost, match="no frame from the broker"):
        c.process(0)


def test_deliveries_arriving_while_closing_are_not_handed_out():
    c = _Piped()
    c.broker.sendall(_delivery_frames(1, b"late", pika.BasicProperties())
                     + frame.Method(0, spec.Connection.CloseOk()).marshal())
    c.close()
    assert c.got == [] and not c.is_open


def test_client_properties_of_any_common_type_encode():
    table = {"f": 1.5, "none": None, "list": [1, "a", [True]], "nested": {"x": 2}}
    assert decode_table(encode_table(table), 0)[0] == table


def _nested_table(depth: int) -> bytes:
    """A header table ``{"n": {"n": … {"n": 1}}}`` nested ``depth`` tables deep, then ``"k": "v"``."""
    inner = b"\x01nl" + struct.pack(">q", 1)
    for _ in range(depth):
        inner = b"\x01nF" + struct.pack(">I", len(inner)) + inner
    inner += b"\x01kS" + struct.pack(">I", 1) + b"v"
    return struct.pack(">I", len(inner)) + inner


def test_a_header_table_nested_too_deep_keeps_the_message_and_the_connection():
    c = _Piped()
    deep = _nested_table(600)  # ~1200 Python frames when decoded by recursion
    flags = (1 << 13) | (1 << 7) | (1 << 6)  # headers, message_id, timestamp
    props = deep + b"\x03m-1" + struct.pack(">Q", 1_700_000_000)
    c.broker.sendall(_deliver_frame(7) + _header_frame(flags, props, 1) + frame.Body(1, b"b").marshal()
                     + _delivery_frames(8, b"c", pika.BasicProperties(headers={"a": {"b": [1, {"c": 2}]}})))
    c.drain()
    assert [g[0] for g in c.got] == [7, 8] and c.is_open
    assert c.got[0][2] == Properties(message_id="m-1", timestamp=1_700_000_000, headers=None,
                                     headers_malformed=True)
    assert c.got[1][2].headers == {"a": {"b": [1, {"c": 2}]}}


def test_nesting_up_to_the_bound_decodes():
    table, _ = decode_table(_nested_table(MAX_NESTING), 0)
    depth = 0
    while "n" in table and isinstance(table["n"], dict):
        table, depth = table["n"], depth + 1
    assert depth == MAX_NESTING
    with pytest.raises(TooDeep):
        decode_table(_nested_table(MAX_NESTING + 1), 0)
    arrays = b"\x01a" + b"A" + struct.pack(">I", 0)
    for _ in range(MAX_NESTING + 1):
        arrays = b"\x01aA" + struct.pack(">I", len(arrays) - 2) + arrays[2:]
    with pytest.raises(TooDeep):
        decode_table(struct.pack(">I", len(arrays)) + arrays, 0)


def test_a_body_over_max_body_bytes_is_never_kept():
    """maxMessageSize: the body frames of a larger message are skipped as they come (the broker
    announced its size); the delivery comes with an empty body and the announced size."""
    c = _Collect()
    c.max_body_bytes = 1000
    data = (_delivery_frames(1, b"x" * 1000, pika.BasicProperties(message_id="fits"))
            + _delivery_frames(2, b"y" * 300_000, pika.BasicProperties(message_id="big"))
            + _delivery_frames(3, b"z", pika.BasicProperties(message_id="after")))
    c.feed(data, step=4096)
    assert [(g[0], len(g[1]), g[2].dropped_body) for g in c.got] == [(1, 1000, None), (2, 0, 300_000),
                                                                      (3, 1, None)]


def _tracemalloc_cost(table_bytes: bytes) -> float:
    import tracemalloc

    tracemalloc.start()
    try:
        props = decode_properties(table_bytes, 0, 1 << 13)
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert props.headers_bytes == len(table_bytes)
    return used / len(table_bytes)


_DECIMAL, _EMPTY_TABLE = b"D\x02\x00\x00\x01\x00", b"F\x00\x00\x00\x00"


def _filled(entry, room: int = 131_000) -> bytes:
    out, i = bytearray(), 0
    while len(out) < room:
        out += entry(i)
        i += 1
    return struct.pack(">I", len(out)) + bytes(out)


def _array(item: bytes, room: int = 131_000) -> bytes:
    items = item * (room // len(item))
    entry = b"\x01aA" + struct.pack(">I", len(items)) + items
    return struct.pack(">I", len(entry)) + entry


def _key(i: int) -> bytes:
    return bytes([len(str(i))]) + str(i).encode()


@pytest.mark.parametrize("table", [
    pytest.param(_filled(lambda i: _key(i) + b"V"), id="table of keys without values"),
    pytest.param(_filled(lambda i: _key(i) + _DECIMAL), id="table of decimals"),
    pytest.param(_filled(lambda i: _key(i) + _EMPTY_TABLE), id="table of empty tables"),
    pytest.param(_array(_DECIMAL), id="array of decimals"),
    pytest.param(_array(_EMPTY_TABLE), id="array of empty tables"),
])
def test_a_header_table_takes_at_most_header_cost_times_its_wire_size(table):
    """bufferMemory and maxBytesPerTrigger count a header table as HEADER_COST times its wire size:
    the densest tables a frame can carry (tiny entries) stay under that."""
    from jetspark.datasources.rabbitmq.amqp import HEADER_COST

    assert _tracemalloc_cost(table) <= HEADER_COST
