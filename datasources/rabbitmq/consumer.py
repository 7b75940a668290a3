"""Driver-side consumption of one RabbitMQ queue with manual acks (:mod:`.amqp`'s lean client).

* Deliveries are pushed by the broker (``basic_consume``) up to ``prefetch`` unacked ones
  and buffered here until a batch takes them.
* Every delivery carries the *generation* of the channel it came on. A reconnect starts
  a new generation; the broker requeues what the old channel held, so acks for an older
  generation are skipped (a tag is only valid on its own channel) and the redeliveries
  are deduplicated by the source.
* The connection answers heartbeats and reads deliveries only while it is called. The
  driver's reader sits idle between Spark's calls (while the batch runs on the
  executors), so a daemon thread, the *pump*, services the connection in short slices
  under the same lock as every other use: heartbeats are answered and deliveries are read
  ahead into the buffer, up to the prefetch window, so decoding overlaps the batch. The
  pump steps aside whenever a Spark call waits for the lock. Every call checks the
  connection and reconnects when the broker dropped it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from jetspark import faults
from jetspark.datasources.rabbitmq.amqp import AmqpError, ChannelClosed, Connection, Properties, Refused
from jetspark.datasources.rabbitmq.endpoint import AmqpEndpoint
from jetspark.errors import JetsparkError
from jetspark.redaction import redact_dsn

log = logging.getLogger(__name__)

KEEPALIVE_INTERVAL_S = 1.0
PUMP_SLICE_S = 0.02
"""How long the pump holds the connection (and the lock) at a time."""
_CONNECTION_ERRORS = (AmqpError, OSError)


class QueueError(JetsparkError):
    """The queue cannot be consumed (missing queue, broker unreachable past the timeout)."""


@dataclass(slots=True)
class Delivery:
    generation: int
    tag: int
    body: bytes
    properties: Properties
    routing_key: str
    exchange: str
    redelivered: bool

    @property
    def size(self) -> int:
        """The bytes it counts for in ``bufferMemory`` and ``maxBytesPerTrigger``: its body and
        an estimate of its decoded header table (:data:`.amqp.HEADER_COST` times its wire size)."""
        return len(self.body) + self.properties.memory


class QueueConsumer:
    """A reconnecting consumer of ``queue`` whose deliveries are acked explicitly."""

    def __init__(
        self, url: str | AmqpEndpoint, queue: str, prefetch: int, *, reconnect_timeout_s: float = 60.0,
        display_url: str | None = None, buffer_bytes: int = 256 << 20, max_body_bytes: int | None = None,
    ) -> None:
        self.endpoint = url if isinstance(url, AmqpEndpoint) else AmqpEndpoint(url)
        url = self.endpoint.url
        self.queue = queue
        self.prefetch = prefetch
        self.reconnect_timeout_s = reconnect_timeout_s
        self.display_url = display_url or redact_dsn(url)
        self.generation = 0
        self.reconnects = 0
        self._conn: Connection | None = None
        self._buffer: deque[Delivery] = deque()
        self.buffer_bytes = buffer_bytes
        """Bound of the buffered deliveries' :attr:`Delivery.size`: past it the socket is not read
        (TCP holds the broker back)."""
        self.max_body_bytes = max_body_bytes
        """A body larger than this is not kept (:attr:`.amqp.Properties.dropped_body`)."""
        self._buffered_bytes = [0]
        self._unacked: set[int] = set()
        self._lock = threading.RLock()
        self._callers = 0  # Spark calls waiting for or holding the lock: the pump steps aside
        self._callers_lock = threading.Lock()
        self._stop = threading.Event()
        self._keepalive: threading.Thread | None = None

    # -- connection ---------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return bool(self._conn and self._conn.is_open)

    def ensure_open(self) -> None:
        """Service the connection; reconnect (new generation) when it is gone."""
        with self._held():
            if self.is_open:
                try:
                    self._conn.process(0)
                    return
                except _CONNECTION_ERRORS as e:
                    log.warning("jetrabbitmq: connection to %s lost: %s", self.display_url, e)
            self._reconnect()

    def _reconnect(self) -> None:
        self._drop_connection()
        deadline = time.monotonic() + self.reconnect_timeout_s
        delay = 0.2
        while True:
            try:
                self._connect()
                break
            except QueueError:
                raise
            except Refused as e:  # for good: a retry would only delay the same answer
                raise QueueError(f"jetrabbitmq: cannot consume queue {self.queue!r} at "
                                 f"{self.display_url}: {e}") from None
            except _CONNECTION_ERRORS as e:
                if time.monotonic() >= deadline:
                    raise QueueError(
                        f"jetrabbitmq: cannot consume queue {self.queue!r} at {self.display_url} "
                        f"within {self.reconnect_timeout_s:.0f} s (option reconnectTimeout): {e!r}"
                    ) from e
                self._drop_connection()
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        if self.generation > 1:
            self.reconnects += 1
            log.warning("jetrabbitmq: reconnected to %s (reconnect %d; the broker requeues what the "
                        "lost channel held unacked)", self.display_url, self.reconnects)
        if self._keepalive is None or not self._keepalive.is_alive():
            self._keepalive = threading.Thread(target=self._keep_alive, name="jetrabbitmq-keepalive",
                                               daemon=True)
            self._keepalive.start()

    def _open_channel(self) -> tuple[Connection, int]:
        """A new connection (and channel) on the queue, with the queue's ready count."""
        conn = Connection(self.endpoint)
        conn.max_body_bytes = self.max_body_bytes
        try:
            conn.open()
            try:
                ready = conn.declare_passive(self.queue)
            except ChannelClosed as e:
                if e.reply_code == 404:
                    raise QueueError(
                        f"jetrabbitmq: queue {self.queue!r} does not exist at {self.display_url} "
                        "(option queue); declare it first (durable, for no loss across broker restarts)"
                    ) from None
                raise
        except BaseException:
            _close_quietly(conn)
            raise
        return conn, ready

    def _connect(self) -> None:
        conn, _ = self._open_channel()
        try:
            conn.qos(self.prefetch)
            self.generation += 1
            generation = self.generation
            unacked, buffer, size = self._unacked, self._buffer, self._buffered_bytes

            def on_delivery(tag, body, properties, routing_key, exchange, redelivered) -> None:
                unacked.add(tag)
                delivery = Delivery(generation, tag, body, properties, routing_key, exchange, redelivered)
                size[0] += delivery.size
                buffer.append(delivery)

            conn.consume(self.queue, on_delivery)
        except BaseException:
            _close_quietly(conn)
            raise
        self._conn = conn

    def _drop_connection(self) -> None:
        """Forget the connection; what it held is requeued by the broker."""
        conn, self._conn = self._conn, None
        self._buffer.clear()
        self._buffered_bytes[0] = 0
        self._unacked.clear()
        if conn is not None and conn.is_open:
            _close_quietly(conn)

    @contextmanager
    def _held(self) -> Iterator[None]:
        """The lock, for a Spark call: the pump yields it at its next slice."""
        with self._callers_lock:
            self._callers += 1
        try:
            with self._lock:
                yield
        finally:
            with self._callers_lock:
                self._callers -= 1

    def _keep_alive(self) -> None:
        """The pump: heartbeats, and deliveries read ahead while no Spark call needs the lock."""
        while not self._stop.is_set():
            if self._callers or not self._lock.acquire(timeout=KEEPALIVE_INTERVAL_S):
                self._stop.wait(0.01)  # a Spark call has the connection
                continue
            received = False
            try:
                if self.is_open and not self._callers and not self._buffer_full():
                    before = len(self._buffer)
                    self._conn.process(PUMP_SLICE_S)
                    received = len(self._buffer) > before
            except _CONNECTION_ERRORS:
                pass  # the next call sees the closed connection and reconnects
            except Exception:  # never let the pump die: heartbeats would stop
                log.exception("jetrabbitmq: the connection pump failed; dropping the connection")
                self._drop_connection()
            finally:
                self._lock.release()
            if not received:  # idle, or the prefetch window is full
                self._stop.wait(0.05)

    def close(self) -> None:
        self._stop.set()
        with self._held():
            self._drop_connection()

    # -- consuming ----------------------------------------------------------------------
    def fetch(
        self, max_count: int, poll_timeout_s: float, first_wait_s: float | None = None,
        max_bytes: int | None = None, oversize_first: bool = True,
    ) -> list[Delivery]:
        """Up to ``max_count`` deliveries: those buffered plus what arrives without a pause
        longer than ``poll_timeout_s`` (``first_wait_s`` for the first one when none is buffered);
        with ``max_bytes``, no more than their sizes fit in (but one delivery larger than that
        when ``oversize_first``: a message larger than the bound must still go somewhere)."""
        with self._held():
            self.ensure_open()
            wait = poll_timeout_s if self._buffer or first_wait_s is None else first_wait_s
            try:
                while (len(self._buffer) < max_count and not self._buffer_full()
                       and (max_bytes is None or self._buffered_bytes[0] < max_bytes)
                       and self._conn.process(wait)):
                    wait = poll_timeout_s
            except _CONNECTION_ERRORS as e:
                log.warning("jetrabbitmq: connection lost while fetching: %s", e)
                self._reconnect()
            out: list[Delivery] = []
            taken = 0
            while self._buffer and len(out) < max_count:
                size = self._buffer[0].size
                if max_bytes is not None and taken + size > max_bytes and (out or not oversize_first):
                    break
                out.append(self._buffer.popleft())
                taken += size
            self._buffered_bytes[0] -= taken
            return out

    def deliveries_due(self) -> bool:
        """Whether the queue holds ready messages while this consumer has room for them in its
        prefetch window: deliveries on their way, worth waiting for before a batch says "no
        data" (one passive declare on the channel)."""
        with self._held():
            generation = self.generation
            self.ensure_open()  # deliveries read meanwhile land in the buffer
            if self.generation != generation:  # reconnected: what the old channel held is requeued
                return True
            if self._buffer:
                return True
            if len(self._unacked) >= self.prefetch or self._buffer_full():
                return False
            try:
                ready = self._conn.declare_passive(self.queue)
            except _CONNECTION_ERRORS as e:
                log.warning("jetrabbitmq: the queue's ready count failed: %s", e)
                self._reconnect()
                return True
            # the count leaves out what the broker sent us already: those wait in the buffer
            return bool(self._buffer) or ready > 0

    def _buffer_full(self) -> bool:
        return self._buffered_bytes[0] >= self.buffer_bytes

    def unfetch(self, deliveries: list[Delivery]) -> None:
        """Put deliveries back at the head of the buffer (same generation only)."""
        with self._held():
            for d in reversed(deliveries):
                if d.generation == self.generation and d.tag in self._unacked:
                    self._buffer.appendleft(d)
                    self._buffered_bytes[0] += d.size

    def buffered(self) -> int:
        return len(self._buffer)

    def count_ready(self) -> int:
        """Messages in the queue now. Anything this consumer holds is handed back first
        (the connection is closed, the broker requeues it), so the count is exact."""
        with self._held():
            self._drop_connection()
            try:
                conn, ready = self._open_channel()
            except _CONNECTION_ERRORS as e:
                raise QueueError(f"jetrabbitmq: cannot count queue {self.queue!r} at {self.display_url} "
                                 f"(option url): {e}") from None
            _close_quietly(conn)
            return ready

    def ack(self, deliveries: list[Delivery]) -> int:
        """Ack the deliveries of the current channel; returns how many were acked.

        Deliveries of an older channel are skipped: the broker has requeued them. A lost
        connection is tolerated: the unacked ones come back and are deduplicated.
        """
        with self._held():
            tags = sorted(d.tag for d in deliveries if d.generation == self.generation)
            tags = [t for t in tags if t in self._unacked]
            if not tags or not self.is_open:
                return 0
            half = len(tags) // 2
            acked = 0
            try:
                if half:
                    self._ack_tags(tags[:half])
                    acked = half
                faults.point("rabbitmq.during_ack")
                self._ack_tags(tags[half:])
                acked = len(tags)
            except _CONNECTION_ERRORS as e:
                log.warning("jetrabbitmq: lost connection while acking (redeliveries are deduped): %s", e)
            return acked

    def reject(self, deliveries: list[Delivery]) -> int:
        """Reject deliveries of the current channel without requeue (dead-lettered by the
        broker where the queue has a dead-letter exchange); returns how many were rejected."""
        with self._held():
            tags = [d.tag for d in deliveries if d.generation == self.generation and d.tag in self._unacked]
            if not tags or not self.is_open:
                return 0
            try:
                for t in tags:
                    self._conn.reject(t)
                    self._unacked.discard(t)
            except _CONNECTION_ERRORS as e:  # redelivered, and rejected again
                log.warning("jetrabbitmq: lost connection while rejecting: %s", e)
                return 0
            return len(tags)

    def _ack_tags(self, tags: list[int]) -> None:
        top = tags[-1]
        below = sum(1 for t in self._unacked if t <= top)
        if below == len(tags):
            self._conn.ack(top, multiple=True)
        else:
            for t in tags:
                self._conn.ack(t)
        self._unacked.difference_update(tags)


def _close_quietly(conn) -> None:
    """Close a connection that is being abandoned after an error; its own errors don't matter."""
    try:
        conn.close()
    except Exception:
        pass
