"""A scripted chat model on loopback that drives an agent through Stash's tools.

It speaks two wire formats, each as its framework's own client sends it:

* OpenAI chat completions (``POST /v1/chat/completions``), for openai-agents,
  pydantic-ai and langchain;
* Gemini ``generateContent`` (``POST /v1beta/models/<model>:generateContent``), for
  google-genai.

The model follows ``script``: on each request it counts the tool results already in the
conversation and asks for the next call; when the script is spent it answers with the
text of every tool result it was given, so a test reads in the agent's final answer what
the tools returned (a recalled memory, an error's message) after the framework's own
conversion both ways. Every request body is kept in ``requests``: the tool declarations
the framework made of Stash's schemas are checked there.

Self-contained (standard library only): the interop environment holds the frameworks,
not Stash.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: what the final answer starts with, and what separates the tool results it quotes
ANSWER = "From memory:"
SEPARATOR = "\n---\n"


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any]


@dataclass
class ScriptedModel:
    script: list[Call] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------
    def __enter__(self) -> ScriptedModel:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with outer._lock:
                    outer.requests.append({"path": self.path, "body": body})
                if self.path.endswith("/chat/completions"):
                    status, answer = outer._openai(body)
                elif ":generateContent" in self.path:
                    status, answer = outer._gemini(body)
                else:
                    status, answer = 404, {"error": {"message": f"no route {self.path}"}}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def root(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- what the frameworks sent ------------------------------------------------------
    def openai_tools(self) -> list[dict[str, Any]]:
        """The function tools of the first chat request (a framework sends them all each time)."""
        chats = [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]
        assert chats, "no chat request reached the model"
        return [t["function"] for t in chats[0].get("tools", [])]

    def gemini_declarations(self) -> list[dict[str, Any]]:
        calls = [r["body"] for r in self.requests if ":generateContent" in r["path"]]
        assert calls, "no generateContent request reached the model"
        return [d for tool in calls[0].get("tools", []) for d in tool.get("functionDeclarations", [])]

    # -- the two wire formats ---------------------------------------------------------
    def _next(self, offered: set[str], results: list[str]) -> Call | str:
        """The next scripted call, or the final answer once every call has its result."""
        if len(results) < len(self.script):
            call = self.script[len(results)]
            if call.tool not in offered:
                raise LookupError(f"tool {call.tool!r} not offered; offered: {sorted(offered)}")
            return call
        return SEPARATOR.join([ANSWER, *results])

    def _openai(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        offered = {t["function"]["name"] for t in body.get("tools", [])}
        results = [_text(m.get("content")) for m in body.get("messages", []) if m.get("role") == "tool"]
        try:
            step = self._next(offered, results)
        except LookupError as e:
            return 400, {"error": {"message": str(e), "type": "invalid_request_error"}}
        if isinstance(step, Call):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{
                    "id": f"call_{len(results)}",
                    "type": "function",
                    "function": {"name": step.tool, "arguments": json.dumps(step.arguments)},
                }],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": step}, "stop"
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def _gemini(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        offered = {d["name"] for tool in body.get("tools", []) for d in tool.get("functionDeclarations", [])}
        results = [
            json.dumps(part["functionResponse"].get("response"))
            for content in body.get("contents", [])
            for part in content.get("parts", [])
            if "functionResponse" in part
        ]
        try:
            step = self._next(offered, results)
        except LookupError as e:
            return 400, {"error": {"code": 400, "message": str(e), "status": "INVALID_ARGUMENT"}}
        part = {"functionCall": {"name": step.tool, "args": step.arguments}} if isinstance(step, Call) else {"text": step}
        return 200, {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        }


def _text(content: Any) -> str:
    """A tool message's content as text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def error_code(answer: str) -> str | None:
    """The Stash error code an answer quotes (``"error": "<code>"``), if any."""
    match = re.search(r'\\?"error\\?":\s*\\?"([a-z_]+)', answer)
    return match.group(1) if match else None
