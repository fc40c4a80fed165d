"""The bytes between a jailed kernel and nbgrader's client, counted before anyone reads them.

nbgrader's client (ZeroMQ, in the grader's process) receives whatever the kernel sends,
queues it and decodes it as JSON before the output budget can count a message: a kernel
that publishes many large messages, each under ZeroMQ's per-part limit, fills the
grader's memory. So the client never talks to the kernel directly. For each of the
kernel's sockets, ``KernelRelay`` listens on the path the connection file names (where the
client connects) and, for each connection the client makes, connects to the kernel's own
socket beside it; a thread of the grader copies the bytes both ways, in chunks of
``CHUNK`` bytes, reading a side only once what it sent last has been written. Every byte
the kernel sends, on any of its sockets, counts against one budget for the kernel's life
(``JailedExecute.output_bytes``); the chunk that would pass it is not forwarded, every
connection is closed and no other is accepted (``over_budget``), so the client holds at
most the budget and one chunk of what the kernel sent, and the kernel manager stops the
kernel. Nothing is parsed here: the relay sees only byte counts.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading

# Bytes read from one side at a time (and the most held per connection, each way).
CHUNK = 64 * 2**10


class _Pair:
    """One connection of the client and the one the relay made to the kernel for it."""

    def __init__(self, client: socket.socket, kernel: socket.socket) -> None:
        self.client, self.kernel = client, kernel
        self.pending = {client: b"", kernel: b""}  # bytes waiting to be written to it
        self.ended = False  # one side closed: the other gets what is pending, then closes

    def other(self, sock: socket.socket) -> socket.socket:
        return self.kernel if sock is self.client else self.client


class KernelRelay:
    """Byte-counting relays of one kernel's sockets (see the module doc).

    Args:
        paths: ``(client_path, kernel_path)`` for each socket: the path the relay binds and
            listens on (the connection file's), and the path of the kernel's listening
            Unix socket, both in the grader's own folder.
        budget: bytes the kernel may send, all sockets together, over its life.

    Attributes:
        received: bytes the kernel sent so far (the refused chunk included).
        over_budget: True once ``received`` passed ``budget``; the relay has then closed
            every connection and refuses new ones.
    """

    def __init__(self, paths: list[tuple[str, str]], budget: int) -> None:
        self.budget = int(budget)
        self.received = 0
        self.over_budget = False
        self._kernel_path: dict[socket.socket, str] = {}
        self._pairs: dict[socket.socket, _Pair] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._closed = False
        for client_path, kernel_path in paths:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(client_path)
            listener.listen(16)
            listener.setblocking(False)
            self._kernel_path[listener] = kernel_path
            self._selector.register(listener, selectors.EVENT_READ, "listen")
        self._thread = threading.Thread(target=self._run, name="kernel-relay", daemon=True)

    def start(self) -> None:
        """Start relaying (a daemon thread of the grader's process)."""
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and close every socket of the relay (waits for the thread)."""
        if not self._closed:
            self._closed = True
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
            if self._thread.is_alive() and self._thread is not threading.current_thread():
                self._thread.join(10)
            self._shut_all()
            self._selector.close()
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass

    # -- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed:
            for key, events in self._selector.select():
                if key.data == "wake":
                    return
                if key.data == "listen":
                    self._accept(key.fileobj)  # type: ignore[arg-type]
                    continue
                pair: _Pair = key.data
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                if sock not in self._pairs:
                    continue  # closed earlier in this round
                if events & selectors.EVENT_WRITE:
                    self._write(pair, sock)
                if events & selectors.EVENT_READ and sock in self._pairs:
                    self._read(pair, sock)
                if self.over_budget:
                    self._shut_all()
                    return

    def _accept(self, listener: socket.socket) -> None:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        kernel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            kernel.connect(self._kernel_path[listener])
        except OSError:  # the kernel closed its socket: the client is refused too
            kernel.close()
            client.close()
            return
        pair = _Pair(client, kernel)
        for sock in (client, kernel):
            sock.setblocking(False)
            self._pairs[sock] = pair
            self._selector.register(sock, selectors.EVENT_READ, pair)

    def _update(self, pair: _Pair) -> None:
        """Read a side only when what it sent is written; write a side that has bytes; once
        a side closed, close the pair when nothing is left to write."""
        if pair.ended and not any(pair.pending.values()):
            self._drop(pair)
            return
        registered = self._selector.get_map()
        for sock in (pair.client, pair.kernel):
            events = 0
            if not pair.ended and not pair.pending[pair.other(sock)]:
                events |= selectors.EVENT_READ
            if pair.pending[sock]:
                events |= selectors.EVENT_WRITE
            if events and sock in registered:
                self._selector.modify(sock, events, pair)
            elif events:
                self._selector.register(sock, events, pair)
            elif sock in registered:
                self._selector.unregister(sock)

    def _read(self, pair: _Pair, sock: socket.socket) -> None:
        try:
            data = sock.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            pair.ended = True
            self._update(pair)
            return
        if sock is pair.kernel:
            self.received += len(data)
            if self.received > self.budget:
                self.over_budget = True
                return
        pair.pending[pair.other(sock)] += data
        self._update(pair)

    def _write(self, pair: _Pair, sock: socket.socket) -> None:
        try:
            sent = sock.send(pair.pending[sock])
        except BlockingIOError:
            return
        except OSError:
            self._drop(pair)
            return
        pair.pending[sock] = pair.pending[sock][sent:]
        self._update(pair)

    def _drop(self, pair: _Pair) -> None:
        for sock in (pair.client, pair.kernel):
            self._pairs.pop(sock, None)
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()

    def _shut_all(self) -> None:
        """Refuse new connections, then close the open ones."""
        for listener in list(self._kernel_path):
            try:
                self._selector.unregister(listener)
            except (KeyError, ValueError):
                pass
            listener.close()
        self._kernel_path.clear()
        for pair in list(self._pairs.values()):
            self._drop(pair)
