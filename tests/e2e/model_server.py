"""Scripted model servers for the real agent binaries: the Anthropic Messages API (for
Claude Code) and the OpenAI Responses API (for Codex), on 127.0.0.1.

A script is a list of assistant turns; each turn is a list of blocks, ``text("...")``
or ``tool("Bash", {"command": "..."})``. The server picks the turn by how many tool
results the conversation already holds: a turn with two tool calls is followed by the
turn after it once both results came back. Past the end of the script the model says
it is done. Requests without tools (the binary's side calls: titles, summaries) get a
short text answer and do not advance the script.

Every request is recorded (path, body, the system prompt, tool names, tool results) so
a test can assert what the binary really sent the model. The same server also answers
as an HTTP proxy that refuses everything and records the host: point the binary's
``HTTPS_PROXY`` at it and any call to the outside world shows up in ``escapes``.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def tool(name: str, arguments: dict) -> dict:
    """A tool call. For the Responses API, ``namespace/name`` calls a tool of a
    namespace (Codex groups each MCP server's tools in one, ``mcp__<server>``)."""
    return {"type": "tool_use", "name": name, "input": arguments}


DONE = [text("Done.")]


def _tool_calls(turn: list[dict]) -> int:
    return sum(1 for block in turn if block["type"] == "tool_use")


def pick_turn(script: list[list[dict]], results: int) -> list[dict]:
    """The turn to play when the conversation holds ``results`` tool results."""
    seen = 0
    for turn in script:
        if seen >= results:
            return turn
        seen += _tool_calls(turn)
    return DONE


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.escapes: list[str] = []
        self.script: list[list[dict]] = []
        self.on_request = None  # called with each request's digest, before the answer

    def play(self, script: list[list[dict]]) -> None:
        with self.lock:
            self.script = list(script)
            self.requests.clear()

    def record(self, entry: dict) -> None:
        with self.lock:
            self.requests.append(entry)

    # -- what the tests ask ---------------------------------------------------------

    def main_requests(self) -> list[dict]:
        """Requests of the agent loop itself (they offer tools)."""
        return [r for r in self.requests if r["tools"]]

    def tool_results(self) -> list[dict]:
        """The tool results of the last main request: ``{"name", "content", "is_error"}``."""
        requests = self.main_requests()
        return requests[-1]["tool_results"] if requests else []


# -- Anthropic Messages API ---------------------------------------------------------


def _flatten(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _flatten(part.get("text") if part.get("type") == "text" else part.get("content"))
            if isinstance(part, dict)
            else str(part)
            for part in content
        )
    return "" if content is None else json.dumps(content)


def anthropic_digest(body: dict) -> dict:
    names: dict[str, str] = {}
    results = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                names[block.get("id")] = block.get("name")
            elif block.get("type") == "tool_result":
                results.append(
                    {
                        "name": names.get(block.get("tool_use_id"), ""),
                        "content": _flatten(block.get("content")),
                        "is_error": bool(block.get("is_error")),
                    }
                )
    return {
        "system": _flatten(body.get("system")),
        "messages_text": "\n".join(_flatten(m.get("content")) for m in body.get("messages") or []),
        "tools": [t.get("name") for t in body.get("tools") or []],
        "tool_results": results,
        "model": body.get("model"),
        "stream": bool(body.get("stream")),
    }


def anthropic_message(turn: list[dict], model: str) -> dict:
    content = []
    for block in turn:
        if block["type"] == "tool_use":
            content.append({**block, "id": f"toolu_{uuid.uuid4().hex[:20]}"})
        else:
            content.append(dict(block))
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if _tool_calls(turn) else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


def anthropic_events(message: dict):
    """The SSE events that stream ``message``, in the API's order."""
    start = {**message, "content": [], "stop_reason": None}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            raw = json.dumps(block["input"])
            # Split the arguments like the API does: several input_json_delta chunks.
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[i : i + 16]}
                for i in range(0, len(raw), 16)
            ]
        else:
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# -- OpenAI Responses API (Codex) ---------------------------------------------------


def responses_digest(body: dict) -> dict:
    names: dict[str, str] = {}
    results = []
    texts = []
    for item in body.get("input") or []:
        kind = item.get("type")
        if kind == "function_call":
            name = item.get("name")
            if item.get("namespace"):
                name = f"{item['namespace']}/{name}"
            names[item.get("call_id")] = name
        elif kind == "function_call_output":
            output = item.get("output")
            results.append(
                {
                    "name": names.get(item.get("call_id"), ""),
                    "content": output if isinstance(output, str) else json.dumps(output),
                    "is_error": False,
                }
            )
        elif kind == "message" or "content" in item:
            texts.append(_flatten(item.get("content")))
    return {
        "system": str(body.get("instructions") or ""),
        "messages_text": "\n".join(texts),
        "tools": [
            name
            for t in body.get("tools") or []
            for name in (
                [f"{t['name']}/{inner.get('name')}" for inner in t.get("tools") or []]
                if t.get("type") == "namespace"
                else [t.get("name") or t.get("type")]
            )
        ],
        "tool_results": results,
        "model": body.get("model"),
        "stream": bool(body.get("stream")),
    }


def responses_events(turn: list[dict], model: str):
    rid = f"resp_{uuid.uuid4().hex[:20]}"
    output = []
    for block in turn:
        if block["type"] == "tool_use":
            namespace, _, name = block["name"].rpartition("/")
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{uuid.uuid4().hex[:20]}",
                    "call_id": f"call_{uuid.uuid4().hex[:20]}",
                    **({"namespace": namespace} if namespace else {}),
                    "name": name,
                    "arguments": json.dumps(block["input"]),
                    "status": "completed",
                }
            )
        else:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:20]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": block["text"], "annotations": []}],
                }
            )
    base = {"id": rid, "object": "response", "model": model, "status": "in_progress", "output": []}
    yield "response.created", {"type": "response.created", "response": base}
    for index, item in enumerate(output):
        yield (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": index, "item": item},
        )
        if item["type"] == "message":
            yield (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "output_index": index,
                    "item_id": item["id"],
                    "content_index": 0,
                    "delta": item["content"][0]["text"],
                },
            )
        yield (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": index, "item": item},
        )
    done = {
        **base,
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 120,
        },
    }
    yield "response.completed", {"type": "response.completed", "response": done}


# -- the server -------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    recorder: Recorder

    def log_message(self, *args):  # quiet: the tests read the recorder
        pass

    def do_CONNECT(self):  # noqa: N802 - http.server's naming
        self.recorder.escapes.append(self.path)
        self._json(403, {"error": "no network in the e2e suite"})

    def do_GET(self):  # noqa: N802
        if self.path.startswith("http"):  # a proxied plain-HTTP request
            self.recorder.escapes.append(self.path)
            self._json(403, {"error": "no network in the e2e suite"})
            return
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"data": [], "models": []})
            return
        self._json(404, {"error": {"type": "not_found", "message": self.path}})

    def do_HEAD(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):  # noqa: N802
        if self.path.startswith("http"):
            self.recorder.escapes.append(self.path)
            self._json(403, {"error": "no network in the e2e suite"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "zstd":  # codex may compress
            self._json(415, {"error": "compressed bodies are not supported"})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": "not JSON"})
            return
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": 100})
            return
        if path.endswith("/messages"):
            self._anthropic(path, body)
        elif path.endswith("/responses"):
            self._responses(path, body)
        else:
            self.recorder.record({"path": path, "body": body, "tools": []})
            self._json(404, {"error": {"type": "not_found", "message": path}})

    def _turn(self, digest: dict) -> list[dict]:
        if self.recorder.on_request is not None:
            self.recorder.on_request(digest)
        if not digest["tools"]:
            return [text("Cairn e2e")]  # a side call: title, summary
        return pick_turn(self.recorder.script, len(digest["tool_results"]))

    def _anthropic(self, path: str, body: dict) -> None:
        digest = anthropic_digest(body)
        self.recorder.record({"path": path, "body": body, **digest})
        message = anthropic_message(self._turn(digest), body.get("model") or "claude")
        if not body.get("stream"):
            self._json(200, message)
            return
        self._sse(anthropic_events(message))

    def _responses(self, path: str, body: dict) -> None:
        digest = responses_digest(body)
        self.recorder.record({"path": path, "body": body, **digest})
        self._sse(responses_events(self._turn(digest), body.get("model") or "gpt"))

    def _sse(self, events) -> None:
        payload = b"".join(
            f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _json(self, status: int, data: dict) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class ModelServer:
    """``with ModelServer() as model: model.play([...]); ... model.url``"""

    def __init__(self):
        self.recorder = Recorder()
        handler = type("BoundHandler", (Handler,), {"recorder": self.recorder})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def play(self, script: list[list[dict]]) -> None:
        self.recorder.play(script)

    @property
    def requests(self) -> list[dict]:
        return self.recorder.requests

    @property
    def escapes(self) -> list[str]:
        return self.recorder.escapes


class Switch:
    """A TCP forwarder in front of Cairn that a test can turn off mid-session: while
    off, every connection is closed at once (what a stopped server looks like to a
    client with connection reuse), and Cairn is reachable again when it is back on."""

    def __init__(self, upstream: str):
        import socket

        host, port = upstream.rsplit("//", 1)[1].rsplit(":", 1)
        self.upstream = (host, int(port))
        self.on = True
        self.hung = False  # on and hung: connections are accepted and never answered
        self.held: list = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self):
        import socket

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if not self.on:
                conn.close()
                continue
            if self.hung:
                self.held.append(conn)
                continue
            try:
                upstream = socket.create_connection(self.upstream)
            except OSError:
                conn.close()
                continue
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                try:
                    end.shutdown(2)
                except OSError:
                    pass

    def __enter__(self) -> Switch:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()


class HungServer:
    """A socket that accepts connections and never answers: a sick Cairn."""

    def __init__(self):
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def __enter__(self) -> HungServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()
