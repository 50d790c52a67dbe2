"""A proxy that forwards nothing: an agent pointed at it (HTTP_PROXY, HTTPS_PROXY) shows every request it tries to
send past reef, as the first line of each connection (`CONNECT host:443 HTTP/1.1`), and gets no answer."""

from __future__ import annotations

import socket
import threading


class ProxyWatch:
    """Listens on a loopback port from a thread; `attempts` are the first lines received, `url` the proxy URL."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> ProxyWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.close()
        self._thread.join(timeout=10)

    def env(self) -> dict[str, str]:
        """Proxy variables sending everything but loopback (reef) here."""
        names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
        proxies = {name: self.url for name in names} | {name.lower(): self.url for name in names}
        return proxies | {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}

    def _serve(self) -> None:
        while True:
            try:
                connection, _address = self._server.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                try:
                    first = connection.recv(4096).split(b"\r\n", 1)[0]
                except OSError:
                    first = b"(nothing sent)"
                self.attempts.append(first.decode("latin-1"))
