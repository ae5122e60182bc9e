"""A local OpenAI-compatible chat-completions endpoint for tests, answering from a function."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (status, body, delay in seconds) for a request's headers and body.
Respond = Callable[[dict[str, str], bytes], tuple[int, bytes, float]]


def chat_answer(content: Any) -> bytes:
    """A chat-completions response whose assistant message is `content` as JSON text."""
    message = {"role": "assistant", "content": json.dumps(content)}
    return json.dumps({"choices": [{"message": message}]}).encode()


@contextlib.contextmanager
def serve(respond: Respond) -> Iterator[str]:
    """Serve on a free loopback port; yields the base URL (ending in /v1)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            status, data, delay = respond(dict(self.headers), body)
            time.sleep(delay)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            # The client may have given up waiting (timeout tests).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
