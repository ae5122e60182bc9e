"""A loopback TCP proxy for fault tests: silence or cut a real service's connections."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class Link:
    client: socket.socket
    upstream: socket.socket
    silent: threading.Event = field(default_factory=threading.Event)


class SilenceableProxy:
    """A loopback TCP proxy to a local service that can make its open connections silent
    (bytes are dropped both ways, sockets stay open) while new connections pass normally, or
    cut the service off altogether (open connections closed, new ones closed on arrival)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.links: list[Link] = []
        self.lock = threading.Lock()
        self.closed = False
        self.severed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                downstream, _ = self.listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            if self.severed.is_set():
                for sock in (downstream, upstream):
                    sock.close()
                continue
            link = Link(downstream, upstream)
            with self.lock:
                self.links.append(link)
            for src, dst in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(src, dst, link), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, link: Link) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not link.silent.is_set():
                    dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def silence_open_connections(self) -> int:
        with self.lock:
            for link in self.links:
                link.silent.set()
            return len(self.links)

    def cut(self) -> None:
        """The service is gone, as far as anyone through the proxy can tell."""
        self.severed.set()
        with self.lock:
            links, self.links = self.links, []
        for link in links:
            for sock in (link.client, link.upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def restore(self) -> None:
        self.severed.clear()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        with self.lock:
            for link in self.links:
                for sock in (link.client, link.upstream):
                    with contextlib.suppress(OSError):
                        sock.close()
