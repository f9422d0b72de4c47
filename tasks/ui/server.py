"""``stateflow ui``'s HTTP server: the standard library's threading server over :class:`UiApp`.

Why the standard library: the UI is a local, single-user viewer serving a few pages per second;
``http.server.ThreadingHTTPServer`` does that with no dependency, and starlette/uvicorn are not
in StateFlow's dependencies (they come only with llama-cpp-python's ``[server]`` extra).

What the server enforces on every request, whatever the page: only ``GET``, ``HEAD`` and
the pages' own forms (``POST``, see :meth:`_Handler.do_POST`); a
``Host`` header naming this server (a web page elsewhere cannot reach it through a DNS name it
controls: "DNS rebinding"); a request line of bounded length; and response headers that keep
the pages from loading anything but this server's own assets (Content-Security-Policy) or being
framed. It listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from stateflow.tasks.ui.app import Response, UiApp

__all__ = ["UiServer", "is_loopback", "running"]

_SECURITY_HEADERS = {
    # graphviz's SVG and the plot are inline markup; scripts and styles come only from /static
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on the pages' own form posts
    "Referrer-Policy": "same-origin",
}
_MAX_TARGET = 4096  # characters of a request target; the pages' URLs are far shorter
_MAX_STREAMS = 16  # live pages open at once (each holds a thread polling the side files)
_MAX_FORM = 4096  # bytes of a posted form; the what-if form is about 150


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    server: UiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, resp: Response, *, head: bool = False) -> None:
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(resp.body)))
        for k, v in {**_SECURITY_HEADERS, **resp.headers}.items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(resp.body)

    def _plain(self, status: int, text: str) -> Response:
        return Response(status, (text + "\n").encode(), "text/plain; charset=utf-8")

    def _answer(self, *, head: bool) -> None:
        if len(self.path) > _MAX_TARGET:
            self._send(self._plain(414, "request target too long"), head=head)
            return
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in self.server.allowed_hosts:
            allowed = ", ".join(sorted(self.server.allowed_hosts))
            self._send(self._plain(421, f"this server answers only to {allowed}"), head=head)
            return
        parts = urlsplit(self.path)
        if parts.path == "/api/live" and not head:
            self._stream()
            return
        params = dict(parse_qsl(parts.query, keep_blank_values=True, max_num_fields=64))
        try:
            resp = self.server.app.handle(parts.path, params)
        except ValueError as err:  # e.g. too many query fields
            resp = self._plain(400, str(err))
        except Exception:  # one bad page must not take the server down; say so
            self.server.report_error()
            resp = self._plain(500, "internal error (see the terminal running `stateflow ui`)")
        self._send(resp, head=head)

    def _stream(self) -> None:
        """``/api/live``: the live feed as server-sent events, until the page goes away or the
        server stops (its own thread: the other pages are served meanwhile)."""
        self.close_connection = True
        if not self.server.streams.acquire(blocking=False):
            self._send(self._plain(503, f"{_MAX_STREAMS} live pages are open already: close one"))
            return
        try:
            self._stream_events()
        finally:
            self.server.streams.release()

    def _stream_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        for k, v in _SECURITY_HEADERS.items():
            self.send_header(k, v)
        self.end_headers()
        try:
            for chunk in self.server.app.live_feed().events(self.server.stopping):
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page was closed

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_POST(self) -> None:
        """A form of this server's pages (the what-if replay). Besides the checks of every
        request, the post must come from this server's own pages: no cross-site ``Origin`` or
        ``Sec-Fetch-Site``, a form body of bounded size, and the page's token (checked by the app)."""
        self.close_connection = True  # the body may be left unread on a refusal
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in self.server.allowed_hosts:
            self._send(self._plain(421, "this server answers only to its own address"))
            return
        origin = (self.headers.get("Origin") or "").strip().lower()
        if origin and origin not in {f"http://{h}" for h in self.server.allowed_hosts}:
            self._send(self._plain(403, f"a post from {origin} is refused: only this server's pages post here"))
            return
        if (self.headers.get("Sec-Fetch-Site") or "same-origin") not in ("same-origin", "none"):
            self._send(self._plain(403, "a cross-site post is refused"))
            return
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            self._send(self._plain(415, "post the page's form (application/x-www-form-urlencoded)"))
            return
        try:
            length = int(self.headers.get("Content-Length") or "-1")
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_FORM:
            self._send(self._plain(413, f"a form body of 0..{_MAX_FORM} bytes with its Content-Length"))
            return
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        try:
            params = dict(parse_qsl(body, keep_blank_values=True, max_num_fields=16))
            resp = self.server.app.post(urlsplit(self.path).path, params)
        except ValueError as err:
            resp = self._plain(400, str(err))
        except Exception:
            self.server.report_error()
            resp = self._plain(500, "internal error (see the terminal running `stateflow ui`)")
        self._send(resp)

    def _refuse(self) -> None:
        self._send(self._plain(405, "only GET, HEAD and the pages' own forms (POST)"))

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse


class UiServer(ThreadingHTTPServer):
    """The UI served on ``host:port`` (``port=0``: any free port, see :attr:`url`)."""

    daemon_threads = True

    def __init__(self, app: UiApp, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False):
        # Set before binding: when the bind fails, the base class calls server_close, which reads them.
        self.app = app
        self.verbose = verbose
        self.stopping = threading.Event()  # ends the live feeds' streams
        self.streams = threading.BoundedSemaphore(_MAX_STREAMS)
        super().__init__((host, port), _Handler)
        bound = self.server_address[1]
        names = {host, "127.0.0.1", "localhost", "[::1]"} if is_loopback(host) else {host}
        self.allowed_hosts = {f"{n}:{bound}".lower() for n in names}

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def shutdown(self) -> None:
        self.stopping.set()
        super().shutdown()

    def server_close(self) -> None:
        self.stopping.set()
        super().server_close()

    def report_error(self) -> None:
        """Print the exception being handled (a page failed) where the user started the server."""
        import traceback

        traceback.print_exc()


@contextmanager
def running(app: UiApp, host: str = "127.0.0.1", port: int = 0) -> Iterator[UiServer]:
    """Serve ``app`` in a background thread for the duration of the ``with`` block (tests, benches)."""
    server = UiServer(app, host, port)
    thread = threading.Thread(target=server.serve_forever, name="stateflow-ui", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
