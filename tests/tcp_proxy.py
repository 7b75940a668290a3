"""A TCP proxy the tests put between a client and a service, to fail the network on cue.

Each accepted connection is forwarded to ``upstream`` by two pump threads. On cue:

- ``stall_on(pattern)``: the next connection whose client sends ``pattern`` stops being
  forwarded in both directions from that chunk on, its sockets held open (a network or
  server that stops answering without closing: what a timeout must end);
- ``stall_open()``: every connection open now stops being forwarded, its sockets held open
  (new connections are forwarded: a client that gives up on a dead connection can reconnect);
- ``stall_connects()``: new connections are accepted and never forwarded (a server that
  takes the TCP handshake and says nothing);
- ``reset_on(pattern)``: the next connection whose client sends ``pattern`` is reset (RST)
  on both sides before the chunk is forwarded;
- ``reset_open()``: every connection open now is reset (a network that drops them mid-transfer);
- ``delay_s``: every chunk waits this long before it is forwarded (a slow network);
- ``heal()``: back to forwarding without delay; stalled connections are closed.

Patterns are looked for in the client's chunks as they arrive (a pattern split across two
reads is not seen: tests use short ones, such as a statement's first word).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._stall_pattern: bytes | None = None
        self._reset_pattern: bytes | None = None
        self._stall_connects = False
        self._held: list[socket.socket] = []
        self._open: set[tuple[socket.socket, socket.socket]] = set()
        self.stalled = threading.Event()
        """Set when a connection was stalled or reset on a pattern."""
        self._closed = False
        self.delay_s = 0.0
        threading.Thread(target=self._accept, daemon=True, name="tcp-proxy").start()

    # -- cues ------------------------------------------------------------------------------
    def stall_on(self, pattern: bytes) -> None:
        with self._lock:
            self._stall_pattern = pattern
            self.stalled.clear()

    def reset_on(self, pattern: bytes) -> None:
        with self._lock:
            self._reset_pattern = pattern
            self.stalled.clear()

    def stall_open(self) -> int:
        """Stall every connection open now; the number stalled."""
        with self._lock:
            pairs, self._open = self._open, set()
            for pair in pairs:
                self._held.extend(pair)
            if pairs:
                self.stalled.set()
            return len(pairs)

    def reset_open(self) -> int:
        """Reset every connection open now; the number reset."""
        with self._lock:
            pairs, self._open = self._open, set()
        for pair in pairs:
            _reset(pair)
        return len(pairs)

    def stall_connects(self) -> None:
        with self._lock:
            self._stall_connects = True

    def heal(self) -> None:
        self.delay_s = 0.0
        with self._lock:
            self._stall_pattern = self._reset_pattern = None
            self._stall_connects = False
            held, self._held = self._held, []
        for s in held:  # shutdown first: close() alone leaves a socket open while a pump thread
            with contextlib.suppress(OSError):  # still blocks in its recv()
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        self.heal()
        with contextlib.suppress(OSError):
            self._server.close()

    # -- forwarding ------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                if self._stall_connects:
                    self._held.append(client)
                    continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            pair = (client, server)
            with self._lock:
                self._open.add(pair)
            threading.Thread(target=self._pump, args=(client, server, pair, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, pair, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pair: tuple, from_client: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if from_client and self._cue(data, pair):
                    return
                if self.delay_s:
                    time.sleep(self.delay_s)
                with self._lock:
                    if any(s in self._held for s in pair):
                        return  # stalled: nothing more either way
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._open.discard(pair)
            if any(s in self._held for s in pair):
                return
        for s in pair:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def _cue(self, data: bytes, pair: tuple) -> bool:
        """Stall or reset ``pair`` when ``data`` holds an armed pattern (once per cue)."""
        with self._lock:
            if self._stall_pattern is not None and self._stall_pattern in data:
                self._stall_pattern = None
                self._open.discard(pair)
                self._held.extend(pair)
                self.stalled.set()
                return True
            if self._reset_pattern is None or self._reset_pattern not in data:
                return False
            self._reset_pattern = None
            self._open.discard(pair)
            self.stalled.set()  # before the client can see the reset
        _reset(pair)
        return True


def _reset(pair: tuple[socket.socket, socket.socket]) -> None:
    """Reset both sockets: linger 0 makes the close send RST; SHUT_RD wakes the other pump's recv()."""
    for s in pair:
        with contextlib.suppress(OSError):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.shutdown(socket.SHUT_RD)
        with contextlib.suppress(OSError):
            s.close()
