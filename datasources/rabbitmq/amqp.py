"""A lean AMQP 0-9-1 client: one connection, one channel, what a queue consumer needs.

The queue source's throughput is bound by decoding deliveries on the driver. A general
client decodes each frame into method objects and dispatches it through several layers
of callbacks; here the socket is read in large chunks and deliveries (``Basic.Deliver``,
its content header and body frames) are decoded in one tight loop, with only the
properties the source uses (``message_id``, ``timestamp``, ``headers``) kept. Everything
else a consumer needs is here too: the handshake (PLAIN or EXTERNAL, TLS from the URL or
:mod:`.endpoint`), a passive queue declare (the ready count), ``Basic.Qos``, ``Basic.Consume``, ``Basic.Ack``,
heartbeats both ways, and the broker closing the channel or the connection (raised as
:class:`ChannelClosed` / :class:`ConnectionLost`).

URLs are parsed by pika's ``URLParameters`` (host, port, vhost, credentials, ``heartbeat``,
``frame_max``, ``channel_max``, ``socket_timeout``, ``ssl_options``, ``locale``), so every
URL pika accepts keeps its meaning. Not thread-safe: the caller serializes all use.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from jetspark.datasources.rabbitmq.endpoint import AmqpEndpoint

FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
CHANNEL = 1
READ_CHUNK = 1 << 20
RPC_TIMEOUT_S = 30.0
ACCESS_REFUSED = 403
MAX_NESTING = 64
"""Deepest nesting of tables and arrays in a header table that is decoded; a deeper one is
not (its message keeps its ID and timestamp, its headers are marked malformed)."""

HEADER_COST = 20
"""Memory of a decoded header table per byte on the wire, at most (measured: an array of
decimals takes 19 times its wire size as Python objects, a table of tiny entries 12-18)."""

_HDR = struct.Struct(">BHI")  # frame type, channel, payload size
_IDS = struct.Struct(">HH")  # class id, method id
_U8, _U16, _U32, _U64 = (struct.Struct(f) for f in (">B", ">H", ">I", ">Q"))
_HEADER = struct.Struct(">HHQH")  # class id, weight, body size, property flags
_DELIVER = (60, 60)

# Basic property flags, in wire order (bit 15 first); the properties after the timestamp
# are not read. Skipped ones: (flag, size), size 0 for a short string.
_P_HEADERS, _P_MESSAGE_ID, _P_TIMESTAMP = 1 << 13, 1 << 7, 1 << 6
_SKIP_BEFORE_HEADERS = ((1 << 15, 0), (1 << 14, 0))  # content-type, content-encoding
_SKIP_BEFORE_MESSAGE_ID = ((1 << 12, 1), (1 << 11, 1), (1 << 10, 0), (1 << 9, 0), (1 << 8, 0))
"""delivery-mode, priority, correlation-id, reply-to, expiration."""


class AmqpError(Exception):
    """The connection cannot be used: lost, refused, or the broker broke the protocol."""


class ConnectionLost(AmqpError):
    """The connection is gone (socket closed, heartbeats missed, ``Connection.Close``:
    then ``reply_code`` says why, e.g. 403 ACCESS_REFUSED)."""

    def __init__(self, message: str, reply_code: int | None = None) -> None:
        super().__init__(message)
        self.reply_code = reply_code


class Refused(AmqpError):
    """The broker refused the connection for good: TLS verification or the login failed.
    Retrying cannot help; the message names the options to check, never a secret."""


class ChannelClosed(AmqpError):
    """The broker closed the channel (``Channel.Close``): ``reply_code`` says why (404: no queue)."""

    def __init__(self, reply_code: int, reply_text: str) -> None:
        super().__init__(f"channel closed by the broker: {reply_code} {reply_text}")
        self.reply_code = reply_code
        self.reply_text = reply_text


@dataclass(slots=True)
class Properties:
    """The message properties the queue source reads (AMQP ``timestamp`` is in seconds)."""

    message_id: str | None = None
    timestamp: int | None = None
    headers: dict[str, Any] | None = None
    headers_malformed: bool = False
    """The header table was not decoded (nested deeper than :data:`MAX_NESTING`); ``headers`` is None."""
    headers_bytes: int = field(default=0, compare=False)
    """The header table's size on the wire (its decoded objects take up to :data:`HEADER_COST` times that)."""
    dropped_body: int | None = None
    """The body's size when it was over the connection's ``max_body_bytes`` and not kept (the
    delivery's body is then empty)."""

    @property
    def memory(self) -> int:
        """An estimate of the memory the decoded properties take beyond a body: the header table's."""
        return HEADER_COST * self.headers_bytes


OnDelivery = Callable[[int, bytes, Properties, str, str, bool], None]
"""``(delivery_tag, body, properties, routing_key, exchange, redelivered)``."""


# -- field values ------------------------------------------------------------------------
def _text(raw: bytes) -> str | bytes:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


def _shortstr(data: bytes, pos: int) -> tuple[str, int]:
    """A short string (names, IDs, routing keys) as text; bytes that are not UTF-8 are
    written as ``\\xNN`` escapes, so an odd ``message_id`` stays a distinct ID, not an error."""
    end = pos + 1 + data[pos]
    return data[pos + 1:end].decode(errors="backslashreplace"), end


def _longstr(data: bytes, pos: int) -> tuple[bytes, int]:
    end = pos + 4 + _U32.unpack_from(data, pos)[0]
    return data[pos + 4:end], end


_FIXED = {ord(kind): struct.Struct(">" + fmt) for kind, fmt in  # fixed-size field types
          (("b", "b"), ("B", "B"), ("s", "h"), ("U", "h"), ("u", "H"), ("I", "i"), ("i", "I"),
           ("l", "q"), ("L", "q"), ("f", "f"), ("d", "d"))}


def decode_value(data: bytes, pos: int, depth: int = 0) -> tuple[Any, int]:
    """One typed field value (RabbitMQ's field types) at ``pos``; the value and the next position.

    Types as pika gives them, except that floats stay floats: long strings as text (bytes
    when not UTF-8), timestamps as aware UTC datetimes, tables as dicts, arrays as lists.
    ``depth``: the tables and arrays around the value; :class:`TooDeep` beyond :data:`MAX_NESTING`.
    """
    kind = data[pos]
    pos += 1
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed.unpack_from(data, pos)[0], pos + fixed.size
    if kind == 0x53:  # S
        raw, pos = _longstr(data, pos)
        return _text(raw), pos
    if kind == 0x74:  # t
        return bool(data[pos]), pos + 1
    if kind == 0x54:  # T
        seconds = _U64.unpack_from(data, pos)[0]
        try:
            return datetime.fromtimestamp(seconds, UTC), pos + 8
        except (ValueError, OverflowError, OSError):  # beyond datetime's range: the number
            return seconds, pos + 8
    if kind == 0x46:  # F
        return decode_table(data, pos, depth + 1)
    if kind == 0x41:  # A
        if depth >= MAX_NESTING:
            raise TooDeep(MAX_NESTING)
        end = pos + 4 + _U32.unpack_from(data, pos)[0]
        pos += 4
        items = []
        while pos < end:
            item, pos = decode_value(data, pos, depth + 1)
            items.append(item)
        return items, end
    if kind == 0x78:  # x
        return _longstr(data, pos)
    if kind == 0x44:  # D
        scale, raw = data[pos], struct.unpack_from(">i", data, pos + 1)[0]
        return Decimal(raw).scaleb(-scale), pos + 5
    if kind == 0x56:  # V
        return None, pos
    raise _UnknownFieldType(chr(kind))


class _UnknownFieldType(AmqpError):
    """A field type this decoder does not know: its length is unknown, so the rest of the
    enclosing table is skipped (its size is known) rather than failing the delivery."""


class TooDeep(AmqpError):
    """A field table nests tables or arrays deeper than :data:`MAX_NESTING`: decoding it would
    exhaust Python's stack (a recursion error would drop the connection, and the broker would
    redeliver the message forever)."""


def decode_table(data: bytes, pos: int, depth: int = 0) -> tuple[dict[str, Any], int]:
    """A field table at ``pos``; the dict and the next position. Fields from one of an
    unknown type on are left out; :class:`TooDeep` when nested beyond :data:`MAX_NESTING`."""
    if depth > MAX_NESTING:
        raise TooDeep(MAX_NESTING)
    end = pos + 4 + _U32.unpack_from(data, pos)[0]
    pos += 4
    table = {}
    try:
        while pos < end:
            key, pos = _shortstr(data, pos)
            table[key], pos = decode_value(data, pos, depth)
    except _UnknownFieldType:
        pass
    return table, end


def encode_table(table: dict[str, Any]) -> bytes:
    """A field table (client properties) of text, bytes, booleans, integers, floats, None,
    lists and nested tables."""
    out = bytearray()
    for key, value in table.items():
        name = key.encode()
        out += _U8.pack(len(name)) + name + _encode_value(value)
    return _U32.pack(len(out)) + bytes(out)


def _encode_value(value: Any) -> bytes:
    if value is None:
        return b"V"
    if isinstance(value, bool):
        return b"t" + _U8.pack(value)
    if isinstance(value, int):
        return b"l" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"d" + struct.pack(">d", value)
    if isinstance(value, dict):
        return b"F" + encode_table(value)
    if isinstance(value, list | tuple):
        items = b"".join(map(_encode_value, value))
        return b"A" + _U32.pack(len(items)) + items
    raw = value.encode() if isinstance(value, str) else bytes(value)
    return b"S" + _U32.pack(len(raw)) + raw


def _shortstr_bytes(value: str) -> bytes:
    raw = value.encode()
    if len(raw) > 255:
        raise AmqpError(f"AMQP short string longer than 255 bytes: {value[:40]!r}…")
    return _U8.pack(len(raw)) + raw


def decode_properties(data: bytes, pos: int, flags: int) -> Properties:
    """The Basic properties after a content header's flags (the ones kept, the others skipped)."""
    props = Properties()
    for flag, size in _SKIP_BEFORE_HEADERS:
        if flags & flag:
            pos += size or 1 + data[pos]
    if flags & _P_HEADERS:
        props.headers_bytes = 4 + _U32.unpack_from(data, pos)[0]
        try:
            props.headers, pos = decode_table(data, pos)
        except TooDeep:  # its size is known: skip it, keep the message
            props.headers_malformed = True
            pos += 4 + _U32.unpack_from(data, pos)[0]
    for flag, size in _SKIP_BEFORE_MESSAGE_ID:
        if flags & flag:
            pos += size or 1 + data[pos]
    if flags & _P_MESSAGE_ID:
        props.message_id, pos = _shortstr(data, pos)
    if flags & _P_TIMESTAMP:
        props.timestamp = _U64.unpack_from(data, pos)[0]
    return props


def method_frame(class_id: int, method_id: int, args: bytes = b"", channel: int = CHANNEL) -> bytes:
    payload = _IDS.pack(class_id, method_id) + args
    return _HDR.pack(FRAME_METHOD, channel, len(payload)) + payload + b"\xce"


HEARTBEAT_FRAME = _HDR.pack(FRAME_HEARTBEAT, 0, 0) + b"\xce"


# -- the connection ----------------------------------------------------------------------
class Connection:
    """One AMQP connection with one channel, opened by :meth:`open`.

    Deliveries go to ``on_delivery`` as they are decoded, by :meth:`process` and while a
    synchronous call waits for its reply.
    """

    def __init__(self, endpoint: str | AmqpEndpoint, *, client_name: str = "jetspark") -> None:
        endpoint = endpoint if isinstance(endpoint, AmqpEndpoint) else AmqpEndpoint(endpoint)
        self.params = endpoint.parameters()
        self.mechanism = endpoint.mechanism
        self.client_name = client_name
        self.on_delivery: OnDelivery | None = None
        self.heartbeat_s = 0
        self.frame_max = 131_072
        self.max_body_bytes: int | None = None
        """A body announced larger than this is not kept: its frames are skipped, the delivery
        comes with an empty body and ``Properties.dropped_body`` (option ``maxMessageSize``)."""
        self._sock: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._rest = b""
        self._replies: list[tuple[int, int, bytes, int]] = []  # (class, method, data, args pos)
        self._content: list | None = None  # a delivery whose header/body frames are due
        self._last_recv = self._last_send = 0.0

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    # handshake ---------------------------------------------------------------------------
    def open(self) -> None:
        """Connect, authenticate, tune, open the vhost and channel 1."""
        p = self.params
        timeout = p.socket_timeout or 10.0
        self._sock = socket.create_connection((p.host, p.port), timeout=timeout)
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)  # even with heartbeat=0
            if p.ssl_options is not None:
                try:
                    self._sock = p.ssl_options.context.wrap_socket(
                        self._sock, server_hostname=p.ssl_options.server_hostname or p.host)
                except ssl.SSLCertVerificationError as e:
                    raise Refused(f"TLS: the broker's certificate is not trusted: {e.verify_message} "
                                  "(options ssl.ca.location, ssl.endpoint.identification.algorithm)"
                                  ) from None
                except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError) as e:
                    raise ConnectionLost(f"TLS handshake cut short: {e}") from None  # retried
                except ssl.SSLError as e:  # an alert from the broker: it refuses our certificate
                    raise Refused(f"TLS handshake refused: {e.reason or e} "
                                  "(options ssl.certificate.location, ssl.key.location)") from None
            self._selector = selectors.DefaultSelector()
            self._selector.register(self._sock, selectors.EVENT_READ)
            self._last_recv = self._last_send = time.monotonic()
            self._send(PROTOCOL_HEADER)
            data, pos = self._wait(10, 10, timeout)  # Connection.Start
            pos = decode_table(data, pos + 2)[1]
            mechanisms = _longstr(data, pos)[0].split()
            wanted = self.mechanism.encode()
            if wanted not in mechanisms:
                offered = b" ".join(mechanisms).decode(errors="replace")
                raise Refused(f"the broker does not offer authentication {self.mechanism} (it offers "
                              f"{offered}; option authMechanism)")
            creds = p.credentials
            if self.mechanism == "EXTERNAL":  # the client certificate names the user
                user, response = "the client certificate's subject", b""
            else:
                user = repr(creds.username)
                response = b"\0" + creds.username.encode() + b"\0" + creds.password.encode()
            client = {"product": self.client_name, "platform": "Python",
                      "capabilities": {"authentication_failure_close": True,
                                       "consumer_cancel_notify": True, "basic.nack": True},
                      **(p.client_properties or {})}
            self._send(method_frame(10, 11, encode_table(client) + _shortstr_bytes(self.mechanism)
                                    + _U32.pack(len(response)) + response
                                    + _shortstr_bytes(p.locale or "en_US"), channel=0))
            try:
                data, pos = self._wait(10, 30, timeout)  # Connection.Tune
            except ConnectionLost as e:  # 403 ACCESS_REFUSED is for good; anything else is retried
                if e.reply_code != ACCESS_REFUSED:
                    raise
                raise Refused(f"the broker refused the login of {user} with {self.mechanism}: {e} "
                              "(options user, password, authMechanism or the url's credentials)") from None
            channel_max, frame_max, heartbeat = struct.unpack_from(">HIH", data, pos)
            self.frame_max = min(frame_max or p.frame_max, p.frame_max)
            self.heartbeat_s = heartbeat if p.heartbeat is None else int(p.heartbeat)
            channel_max = min(channel_max or p.channel_max, p.channel_max)
            self._send(method_frame(10, 31, struct.pack(">HIH", channel_max, self.frame_max,
                                                        self.heartbeat_s), channel=0))
            self._send(method_frame(10, 40, _shortstr_bytes(p.virtual_host) + b"\x00\x00", channel=0))
            self._wait(10, 41, timeout)
            self._send(method_frame(20, 10, b"\x00"))
            self._wait(20, 11, timeout)
        except BaseException:
            self._abandon()
            raise

    # channel methods ---------------------------------------------------------------------
    def declare_passive(self, queue: str) -> int:
        """The queue's ready message count; :class:`ChannelClosed` (404) when it does not exist."""
        self._send(method_frame(50, 10, b"\x00\x00" + _shortstr_bytes(queue) + b"\x01" + _U32.pack(0)))
        data, pos = self._wait(50, 11)
        pos = _shortstr(data, pos)[1]
        return _U32.unpack_from(data, pos)[0]

    def qos(self, prefetch: int) -> None:
        self._send(method_frame(60, 10, struct.pack(">IHB", 0, prefetch, 0)))
        self._wait(60, 11)

    def consume(self, queue: str, on_delivery: OnDelivery) -> None:
        """Start consuming with manual acks; deliveries go to ``on_delivery``."""
        self.on_delivery = on_delivery
        self._send(method_frame(60, 20, b"\x00\x00" + _shortstr_bytes(queue) + b"\x00" + b"\x00"
                                + _U32.pack(0)))
        self._wait(60, 21)

    def ack(self, delivery_tag: int, multiple: bool = False) -> None:
        self._send(method_frame(60, 80, struct.pack(">QB", delivery_tag, multiple)))

    def reject(self, delivery_tag: int) -> None:
        """``Basic.Reject`` without requeue: the broker dead-letters the message (to the queue's
        ``x-dead-letter-exchange``) or, without one, drops it."""
        self._send(method_frame(60, 90, struct.pack(">QB", delivery_tag, False)))

    def process(self, time_limit: float) -> int:
        """Read what arrives within ``time_limit`` seconds (0: only what is there already),
        returning after the first read that brought frames; heartbeats are sent and checked.
        Returns the number of bytes read."""
        sock = self._sock
        if sock is None:
            raise ConnectionLost("connection is closed")
        got = 0
        if (isinstance(sock, ssl.SSLSocket) and sock.pending()) or self._readable(0.0):
            got = self._read()
        elif time_limit > 0:
            self._heartbeat()  # due sends go out before waiting
            if self._readable(time_limit):
                got = self._read()
        self._heartbeat()  # after reading: a stalled caller still finds the broker's frames
        return got

    def _readable(self, timeout: float) -> bool:
        try:
            return bool(self._selector.select(max(0.0, timeout)))
        except (OSError, ValueError) as e:
            self._abandon()
            raise ConnectionLost(f"connection lost: {e}") from None

    def close(self) -> None:
        """Close politely (the broker requeues unacked deliveries); errors are ignored."""
        if self._sock is None:
            return
        self.on_delivery = None  # what arrives while closing is requeued by the broker
        try:
            self._send(method_frame(10, 50, struct.pack(">H", 200) + _shortstr_bytes("Normal shutdown")
                                    + _IDS.pack(0, 0), channel=0))
            self._wait(10, 51, 2.0)
        except (AmqpError, OSError):
            pass
        self._abandon()

    # frames --------------------------------------------------------------------------------
    def _send(self, frame: bytes) -> None:
        if self._sock is None:
            raise ConnectionLost("connection is closed")
        try:
            self._sock.sendall(frame)
        except OSError as e:
            self._abandon()
            raise ConnectionLost(f"connection lost while sending: {e}") from None
        self._last_send = time.monotonic()

    def _heartbeat(self) -> None:
        if not self.heartbeat_s or self._sock is None:
            return
        now = time.monotonic()
        if now - self._last_recv > 2 * self.heartbeat_s:
            self._abandon()
            raise ConnectionLost(f"no frame from the broker for {now - self._last_recv:.0f} s "
                                 f"(heartbeat {self.heartbeat_s} s)")
        if now - self._last_send >= self.heartbeat_s / 2:
            self._send(HEARTBEAT_FRAME)

    def _wait(self, class_id: int, method_id: int, timeout: float = RPC_TIMEOUT_S) -> tuple[bytes, int]:
        """Read until the method ``class_id.method_id`` arrives; its payload and argument position."""
        deadline = time.monotonic() + timeout
        while True:
            for i, (c, m, data, pos) in enumerate(self._replies):
                if (c, m) == (class_id, method_id):
                    del self._replies[i]
                    return data, pos
            left = deadline - time.monotonic()
            if left <= 0:
                self._abandon()
                raise ConnectionLost(f"no reply {class_id}.{method_id} from the broker "
                                     f"within {timeout:.0f} s")
            self.process(min(left, 1.0))

    def _read(self) -> int:
        try:
            chunk = self._sock.recv(READ_CHUNK)
        except (OSError, ssl.SSLError) as e:
            self._abandon()
            raise ConnectionLost(f"connection lost: {e}") from None
        if not chunk:
            self._abandon()
            raise ConnectionLost("the broker closed the connection")
        self._last_recv = time.monotonic()
        data = self._rest + chunk if self._rest else chunk
        try:
            self._rest = data[self._frames(data):]
        except AmqpError:  # channel or connection closed by the broker, consumer cancelled
            self._abandon()  # one channel per connection: the connection is done for
            raise
        except Exception as e:  # a frame that does not decode: the stream cannot be trusted
            self._abandon()
            raise ConnectionLost(f"undecodable frame from the broker: {e!r}") from e
        return len(chunk)

    def _frames(self, data: bytes) -> int:
        """Handle the complete frames in ``data``; returns where the incomplete rest starts."""
        pos, n = 0, len(data)
        unpack_hdr, unpack_ids = _HDR.unpack_from, _IDS.unpack_from
        while n - pos >= 8:
            kind, _channel, size = unpack_hdr(data, pos)
            if size > self.frame_max:
                raise ConnectionLost(f"AMQP frame of {size} bytes, over frame_max {self.frame_max}")
            start, end = pos + 7, pos + 7 + size
            if end >= n:
                break
            if data[end] != FRAME_END:
                raise ConnectionLost("malformed AMQP frame (no frame end)")
            content = self._content
            if kind == FRAME_BODY and content is not None:
                if content[1].dropped_body is None:
                    content[6].append(data[start:end])
                content[5] -= size
                if content[5] <= 0:
                    self._deliver()
            elif kind == FRAME_METHOD:
                ids = unpack_ids(data, start)
                if ids == _DELIVER:
                    p = start + 5 + data[start + 4]  # past the consumer tag
                    tag = _U64.unpack_from(data, p)[0]
                    redelivered = bool(data[p + 8])
                    exchange, p = _shortstr(data, p + 9)
                    routing_key, p = _shortstr(data, p)
                    # tag, properties, routing key, exchange, redelivered, body bytes due, body
                    self._content = [tag, None, routing_key, exchange, redelivered, 0, []]
                else:
                    self._on_method(ids, data[start:end])
            elif kind == FRAME_HEADER and content is not None:
                _cls, _weight, body_size, flags = _HEADER.unpack_from(data, start)
                content[1] = props = decode_properties(data, start + 14, flags) if flags else Properties()
                content[5] = body_size
                if self.max_body_bytes is not None and body_size > self.max_body_bytes:
                    props.dropped_body = body_size
                if body_size == 0:
                    self._deliver()
            pos = end + 1
        return pos

    def _deliver(self) -> None:
        tag, props, routing_key, exchange, redelivered, _due, body = self._content
        self._content = None
        if self.on_delivery is not None:
            self.on_delivery(tag, body[0] if len(body) == 1 else b"".join(body), props,
                             routing_key, exchange, redelivered)

    def _on_method(self, ids: tuple[int, int], payload: bytes) -> None:
        """A method other than Basic.Deliver. A close or cancel raises: ``_read`` then drops
        the connection (it has one channel)."""
        if ids in ((10, 50), (20, 40)):  # Connection.Close, Channel.Close
            code, text = _U16.unpack_from(payload, 4)[0], _shortstr(payload, 6)[0]
            try:
                self._send(method_frame(ids[0], ids[1] + 1, channel=CHANNEL if ids[0] == 20 else 0))
            except AmqpError:
                pass
            if ids[0] == 10:
                raise ConnectionLost(f"the broker closed the connection: {code} {text}", code)
            raise ChannelClosed(code, text)
        if ids == (60, 30):  # Basic.Cancel: the queue was deleted
            raise ChannelClosed(404, "consumer cancelled by the broker (queue deleted?)")
        if ids == (20, 20):  # Channel.Flow
            self._send(method_frame(20, 21, payload[4:5]))
            return
        self._replies.append((ids[0], ids[1], payload, 4))

    def _abandon(self) -> None:
        sock, self._sock = self._sock, None
        self._rest, self._content, self._replies = b"", None, []
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
