"""MCP tools: a Model Context Protocol server's tools as tools an ``LLM`` may call.

``LLM(tools=[MCPTools(command=["python", "server.py"])])`` starts the server when the run
starts (over stdio; ``url=`` connects to a running server over streamable HTTP, or SSE for a URL
ending in ``/sse``), lists its tools through AG2's ``autogen.mcp.create_toolkit`` and gives each
one to the model with the schema the server declared, next to the state's plain tools. The
server process lives as long as the run and is stopped when the run ends.

The client is asyncio (the ``mcp`` package); a run is synchronous, so each connection owns one
event-loop thread and a tool call waits for its answer there with a timeout. Server output is
hostile: a server that dies, hangs or answers something that is not MCP gives the model a tool
error naming the server, the tool and what happened (the trace records it as a failed tool call
with ``ok: False``), never a hang; a server that cannot start, or does not list its tools within
``start_timeout_s``, fails the run before any model call, with the tail of its stderr, and is
stopped first (the MCP stdio shutdown: stdin closed, SIGTERM after 2 s, SIGKILL after 2 more), so
the error comes at most about 4 s after the timeout and no server is left running.

A server started with ``command`` gets only a safe list of this process's environment variables
plus ``env=`` (see :class:`MCPTools`).

Requires the ``mcp`` extra (``pip install 'stateflow[mcp]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, NoReturn

from stateflow.errors import ConfigError, StateFlowError

__all__ = ["MCPConnection", "MCPServerError", "MCPSessions", "MCPToolError", "MCPTools"]

#: How long stopping a stdio server may take: the MCP stdio shutdown closes its stdin, waits up to
#: 2 s, sends SIGTERM, waits up to 2 s, then SIGKILL (``mcp.client.stdio``), plus slack.
_STOP_ALLOWANCE_S = 6.0


class MCPServerError(StateFlowError):
    """An MCP server could not be started or listed (the run fails before any model call)."""


class MCPToolError(StateFlowError):
    """One MCP tool call failed; the model receives this message as the tool's result."""


@dataclass(frozen=True)
class MCPTools:
    """The tools of one MCP server (a description: nothing starts until a run does).

    Args:
        command: the server's command line, started with its stdin/stdout as the transport.
        url: the URL of a running server (streamable HTTP; SSE when it ends in ``/sse``).
        env: environment variables for the command, set on top of the few it inherits. A server
            started here is untrusted, so it gets only the MCP SDK's safe list from this process
            (``HOME LOGNAME PATH SHELL TERM USER`` on POSIX, see ``mcp.client.stdio``) plus
            ``env``; nothing else of this process's environment (API keys, tokens, proxies)
            reaches it. Pass what the server needs by name, e.g.
            ``env={"GITHUB_TOKEN": os.environ["GITHUB_TOKEN"]}``. Only with ``command``.
        name: the server's name in errors and the trace (default: the command's or URL's last part).
        call_timeout_s: how long one tool call may take before the model is told it failed.
        start_timeout_s: how long starting the server and listing its tools may take.

    Raises:
        ValueError: neither or both of ``command`` and ``url``; ``env`` with ``url``; a timeout
            that is not positive.
    """

    command: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    name: str = ""
    call_timeout_s: float = 30.0
    start_timeout_s: float = 30.0
    #: marks MCP tool sources for ``LLM(tools=...)`` (which accepts callables and AutoGen tools)
    mcp_server: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("MCPTools: give exactly one of command= (a server to start) or url= (a running server)")
        if self.command is not None:
            cmd = (self.command,) if isinstance(self.command, str) else tuple(self.command)
            if not cmd or not all(isinstance(c, str) and c for c in cmd):
                raise ValueError(f"MCPTools: command must be a non-empty list of strings, got {self.command!r}")
            object.__setattr__(self, "command", cmd)
        if self.url is not None and self.env:
            raise ValueError(
                f"MCPTools: env= applies to a server started with command=; the server at {self.url} is "
                "already running with its own environment (remove env=)"
            )
        if self.call_timeout_s <= 0 or self.start_timeout_s <= 0:
            raise ValueError("MCPTools: timeouts must be positive")
        object.__setattr__(self, "env", dict(self.env))
        if not self.name:
            where = self.command[-1] if self.command else str(self.url)
            object.__setattr__(self, "name", os.path.basename(where.rstrip("/")) or "mcp")

    def identity(self) -> dict[str, Any]:
        """What a flow's fingerprint records of this server: where it is and how it is called."""
        return {
            "command": list(self.command) if self.command else None,
            "url": self.url,
            "env": sorted(self.env),  # names only: values may be secrets
            "call_timeout_s": self.call_timeout_s,
        }

    def server_environment(self) -> dict[str, str]:
        """The environment a server started with ``command`` gets: the MCP SDK's safe list of
        this process's variables (``mcp.client.stdio.get_default_environment``), then ``env``.

        Raises:
            ConfigError: the ``mcp`` package is not installed.
        """
        try:
            from mcp.client.stdio import get_default_environment
        except ImportError as err:
            raise ConfigError("MCPTools needs the mcp package: pip install 'stateflow[mcp]'") from err
        return {**get_default_environment(), **self.env}

    def connect(self) -> MCPConnection:
        """Start (or connect to) the server and list its tools; close the result when done.

        Raises:
            ConfigError: the ``mcp`` package is not installed.
            MCPServerError: the server did not start or list its tools in time.
        """
        return MCPConnection(self)


class MCPConnection:
    """A live session with one MCP server, on its own event-loop thread.

    Attributes:
        tools: the server's tools as ``autogen.tools.Tool`` objects with synchronous functions.
    """

    def __init__(self, spec: MCPTools):
        try:
            from autogen.mcp import create_toolkit  # noqa: F401  (checked here, used in the loop)
        except ImportError as err:
            raise ConfigError("MCPTools needs the mcp package: pip install 'stateflow[mcp]'") from err
        self.spec = spec
        # the server's stderr, for error messages; closed by close()
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._closing = asyncio.Event()  # set by close(): the session ends (binds to the loop on first use)
        self._failure: BaseException | None = None
        self._listed: list[Any] = []
        self._start_timed_out = False
        self._served = self._loop.create_task(self._serve())
        self._thread = threading.Thread(target=self._loop_main, name=f"mcp-{spec.name}", daemon=True)
        self._thread.start()
        # The loop thread enforces start_timeout_s itself and then stops the server; the wait here
        # also covers that stop (the MCP stdio shutdown: stdin closed, SIGTERM, SIGKILL).
        if not self._ready.wait(spec.start_timeout_s + _STOP_ALLOWANCE_S) or self._start_timed_out:
            self._fail(f"did not start and list its tools within {spec.start_timeout_s:g}s", None)
        if self._failure is not None:
            self._fail(f"could not start: {_describe(self._failure)}", self._failure)
        self.tools = [self._sync_tool(t) for t in self._listed]

    def _fail(self, what: str, cause: BaseException | None) -> NoReturn:
        """Raise the start-up error; the server is stopped first, so its stderr is complete (the
        file is read before close() closes it)."""
        self._stop()
        tail = self._stderr_tail()
        self.close()
        raise MCPServerError(f"MCP server {self.spec.name!r} {what}{tail}") from cause

    # -- the event-loop thread -----------------------------------------------------------------

    def _loop_main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._served)
        except BaseException as err:
            self._failure = self._failure or err
        finally:
            self._ready.set()
            self._loop.close()

    async def _serve(self) -> None:
        import anyio
        from autogen.mcp import create_toolkit
        from mcp import ClientSession

        # The start-up deadline is enforced here, in the loop: a server that never answers
        # initialize() is then stopped by the transport's own shutdown as the stack unwinds
        # (a deadline enforced only by the waiting thread would leave this task stuck, and the
        # server running).
        deadline = anyio.current_time() + self.spec.start_timeout_s
        try:
            async with AsyncExitStack() as stack:
                # (the contexts are entered outside the deadline's scope: anyio requires a scope
                # to end after the task groups opened inside it; spawning and connecting are
                # bounded on their own: a process starts or fails, a URL has its HTTP timeout)
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                with anyio.move_on_at(deadline) as starting:
                    await session.initialize()
                    toolkit = await create_toolkit(session, use_mcp_resources=False)
                if starting.cancelled_caught:
                    self._start_timed_out = True
                    return
                self._listed = list(toolkit.tools)
                self._ready.set()
                await self._closing.wait()
        except BaseException as err:
            self._failure = err
            raise

    def _transport(self) -> Any:
        spec = self.spec
        if spec.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            # the environment is given in full (the SDK would add its safe list to env= anyway):
            # what the server gets is what MCPTools.server_environment() documents
            params = StdioServerParameters(
                command=spec.command[0], args=list(spec.command[1:]), env=spec.server_environment()
            )
            return _pairs(stdio_client(params, errlog=self._stderr))
        assert spec.url is not None
        if spec.url.rstrip("/").endswith("/sse"):
            from mcp.client.sse import sse_client

            return _pairs(sse_client(spec.url, timeout=spec.start_timeout_s))
        from mcp.client.streamable_http import streamablehttp_client

        return _pairs(streamablehttp_client(spec.url, timeout=spec.start_timeout_s))

    # -- calls from the run's thread -------------------------------------------------------------

    def _sync_tool(self, tool: Any) -> Any:
        spec, call = self.spec, tool.func
        declared = getattr(tool, "_func_schema", None) or {}
        parameters = declared.get("function", {}).get("parameters") or {"type": "object", "properties": {}}

        def run_tool(**arguments: Any) -> str:
            if self._served.done():
                raise MCPToolError(
                    f"MCP server {spec.name!r} is no longer running, so tool {tool.name!r} cannot be called"
                    f"{self._stderr_tail()}"
                )
            future = asyncio.run_coroutine_threadsafe(call(**arguments), self._loop)
            try:
                content, extra = future.result(spec.call_timeout_s)
            except TimeoutError:
                future.cancel()
                why = (
                    "the server process has ended"
                    if self._served.done()
                    else "the server is stuck, or answers with something that is not MCP"
                )
                raise MCPToolError(
                    f"MCP server {spec.name!r} gave no answer to tool {tool.name!r} within "
                    f"{spec.call_timeout_s:g}s ({why}){self._stderr_tail()}"
                ) from None
            except MCPToolError:
                raise
            except Exception as err:
                raise MCPToolError(
                    f"MCP server {spec.name!r}, tool {tool.name!r}: {_describe(err)}{self._stderr_tail()}"
                ) from err
            text = "\n".join(content) if isinstance(content, list) else str(content)
            if extra:
                text += f"\n({len(extra)} non-text content item(s) omitted)"
            return text

        run_tool.__name__ = tool.name
        return _declared_schema_tool(
            tool.name, tool.description or f"{tool.name} (MCP server {spec.name})", run_tool, parameters
        )

    def _stderr_tail(self, chars: int = 400) -> str:
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            tail = self._stderr.read()[-chars:].strip()
        except (OSError, ValueError):
            return ""
        return f"; server stderr: {tail!r}" if tail else ""

    def _stop(self) -> None:
        """End the session and wait for its thread: the transport stops the server it started.

        A session waiting for close() ends at once; one still inside a call or start-up (it cannot
        see the closing event) is cancelled.
        """
        loop = self._loop
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the thread is ending anyway
                loop.call_soon_threadsafe(self._closing.set if self._ready.is_set() else self._served.cancel)
        self._thread.join(timeout=_STOP_ALLOWANCE_S)

    def close(self) -> None:
        """Stop the session (and the server process it started); idempotent."""
        self._stop()
        if not self._stderr.closed:
            self._stderr.close()


def _declared_schema_tool(name: str, description: str, func: Any, parameters: dict[str, Any]) -> Any:
    """An AutoGen ``Tool`` whose schema is the one the server declared.

    AG2 0.14's ``Tool.tool_schema`` rebuilds the schema from the function's signature even when
    ``parameters_json_schema`` was given, which for an MCP tool (``**arguments``) would offer
    the model one parameter named ``arguments``; the declared schema is what the model must see.
    """
    from autogen.tools import Tool

    class DeclaredSchemaTool(Tool):
        @property
        def tool_schema(self) -> dict[str, Any]:
            return {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            }

    return DeclaredSchemaTool(name=name, description=description, func_or_tool=func, parameters_json_schema=parameters)


def _describe(err: BaseException) -> str:
    """One line for an error from the MCP stack (task groups wrap the real one)."""
    inner = getattr(err, "exceptions", None)
    if isinstance(inner, Sequence) and inner:
        return _describe(inner[0])
    if type(err).__name__ in ("ClosedResourceError", "BrokenResourceError", "EndOfStream"):
        return "the connection to the server is closed (its process ended)"
    if str(err) == "Connection closed":
        return "the server closed the connection before answering (its process ended)"
    return f"{type(err).__name__}: {err}"


class _pairs:
    """An async context manager yielding only (read, write) of a transport that may yield more."""

    def __init__(self, inner: Any):
        self.inner = inner

    async def __aenter__(self) -> tuple[Any, Any]:
        streams = await self.inner.__aenter__()
        return streams[0], streams[1]

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.inner.__aexit__(*exc)


class MCPSessions:
    """The MCP connections of one run: opened while the run builds its agents (one per
    :class:`MCPTools` object, shared by every ``LLM`` that lists it), closed when it ends."""

    def __init__(self) -> None:
        self._open: dict[int, MCPConnection] = {}

    def expand(self, tools: Sequence[Any]) -> list[Any]:
        """``tools`` with every :class:`MCPTools` replaced by its server's tools.

        Raises:
            MCPServerError: a server did not start (connections opened so far are closed).
        """
        out: list[Any] = []
        for t in tools:
            if not isinstance(t, MCPTools):
                out.append(t)
                continue
            conn = self._open.get(id(t))
            if conn is None:
                try:
                    conn = t.connect()
                except BaseException:
                    self.close()
                    raise
                self._open[id(t)] = conn
            out.extend(conn.tools)
        return out

    def close(self) -> None:
        """Close every connection (stopping the servers this run started)."""
        for conn in self._open.values():
            conn.close()
        self._open.clear()
