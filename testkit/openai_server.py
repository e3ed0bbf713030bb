"""A scripted OpenAI-compatible HTTP server for tests and benchmarks (fakes over mocks).

The real ``openai`` client talks to it over HTTP, so the project's client code,
retries, timeouts and parsing are exercised for real. It serves:

* ``POST /v1/chat/completions`` — answers come from a *responder*: a function of the
  parsed request returning a ``Reply`` (or a plain string = message content).
  A ``Reply`` can carry an HTTP status (429, 500, 400 …), a delay (to trigger
  client timeouts), a truncated body, or ``ramble=True``: a model that never stops, so
  generation ends only at the request's ``max_tokens`` (``finish_reason: "length"``),
  taking ``completion_tokens / tokens_per_s`` seconds (no ``max_tokens``: 100,000 tokens).
* ``reject_formats`` + ``reject_status``: refuse those ``response_format`` types, e.g. with
  llama.cpp's old HTTP 500 ``"response_format" must be one of "text" or "json_object"``.
* ``single_slot``: one generation at a time, like a local server with one slot; a request
  whose client gave up is still generated to its end, and the next one waits for it.
  ``max_concurrent`` is the most chat requests the server held at once (queued or running).
* ``POST /v1/embeddings`` — deterministic hash embeddings of the requested dimension.
* ``POST /rerank`` (TEI's shape: ``query`` + ``texts`` → ``[{index, score}]``) and
  ``POST /v1/rerank`` (llama.cpp, vLLM, Jina, Cohere: ``query`` + ``documents`` →
  ``{"results": [{index, relevance_score}]}``, best first): each text scored by
  ``reranker(query, texts)`` (default: the share of the query's words it holds);
  ``rerank_status`` / ``rerank_delay_s`` script failures and slowness.
* ``route_prefix``: when set (e.g. ``"/v1"``), a path outside it answers 404 ``no route …``,
  like a server asked at a base URL without its ``/v1``.

Every request is recorded in ``server.requests`` (path + parsed JSON body).

    with ScriptedOpenAI(responder) as server:
        client = OpenAI(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    error_message: str = "scripted error"
    raw_body: bytes | None = None  # sent as-is (e.g. truncated JSON)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ramble: bool = False  # never stops: cut at max_tokens with finish_reason "length"


Responder = Callable[[dict[str, Any]], "Reply | str"]


def last_user_message(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def overlap(query: str, texts: list[str]) -> list[float]:
    """A stand-in cross-encoder: the share of the query's words (lower case) each text holds."""
    words = set(query.lower().split())
    return [len(words & set(t.lower().split())) / max(len(words), 1) for t in texts]


def system_prompt(request: dict[str, Any]) -> str:
    return "\n".join(m.get("content", "") for m in request.get("messages", []) if m.get("role") == "system")


@dataclass
class ScriptedOpenAI:
    responder: Responder = field(default=lambda request: Reply(content="{}"))
    #: response_format types this endpoint rejects (to exercise auto mode) ...
    reject_formats: tuple[str, ...] = ()
    #: ... with this status; the body names the format (a 500 reads like llama.cpp's)
    reject_status: int = 400
    #: generation speed of rambling replies (seconds = completion tokens / this)
    tokens_per_s: float = 2000.0
    #: one request generated at a time (later ones queue), even after the client left
    single_slot: bool = False
    #: HTTP status for every /embeddings request (non-200 = scripted error, e.g. 503)
    embeddings_status: int = 200
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: where to listen: loopback on a free port by default (docker/smoke runs it on a
    #: compose network: ("0.0.0.0", 8000))
    bind: tuple[str, int] = ("127.0.0.1", 0)
    #: only paths under this prefix are routes (None: any path ending in a route's name)
    route_prefix: str | None = None
    #: scores of texts for a query at /rerank (default: the share of the query's words held)
    reranker: Callable[[str, list[str]], list[float]] = field(default=lambda query, texts: overlap(query, texts))
    rerank_status: int = 200
    rerank_delay_s: float = 0.0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._slot = threading.Lock()
        self._held = 0
        self.max_concurrent = 0

    # -- lifecycle --------------------------------------------------------------
    def start(self) -> ScriptedOpenAI:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode(errors="replace")}
                with outer._lock:
                    outer.requests.append({"path": self.path, "body": body})
                if outer.route_prefix is not None and not self.path.startswith(outer.route_prefix + "/"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                elif self.path.endswith("/embeddings") and outer.embeddings_status != 200:
                    self._send(
                        outer.embeddings_status,
                        {"error": {"message": "scripted embeddings error", "type": "server_error"}},
                    )
                elif self.path.endswith("/embeddings"):
                    self._send(200, outer._embeddings(body))
                elif self.path.endswith("/chat/completions"):
                    outer._chat(self, body)
                elif self.path.endswith("/rerank"):
                    time.sleep(outer.rerank_delay_s)
                    if outer.rerank_status != 200:
                        self._send(outer.rerank_status, {"error": "scripted rerank error"})
                    else:
                        self._send(200, outer._rerank(body))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(self.bind, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- views --------------------------------------------------------------------
    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def embedding_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/embeddings")]

    def rerank_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["path"].endswith("/rerank")]

    # -- handlers -----------------------------------------------------------------
    def _rerank(self, body: dict[str, Any]) -> Any:
        texts = list(body.get("texts") or body.get("documents") or [])
        scores = self.reranker(str(body.get("query", "")), texts)
        if "texts" in body:  # TEI: every text, best first
            return sorted(({"index": i, "score": s} for i, s in enumerate(scores)), key=lambda r: -r["score"])
        ranked = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                        key=lambda r: -r["relevance_score"])
        return {"model": body.get("model"), "results": ranked[: int(body.get("top_n") or len(ranked))]}

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        from stash_pipeline.embedding.hashing import HashEmbedder

        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        dim = int(body.get("dimensions") or 384)
        vectors = HashEmbedder(dim).embed(list(inputs))
        return {
            "object": "list",
            "model": body.get("model", "scripted-embed"),
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs), "total_tokens": 0},
        }

    def _chat(self, handler: Any, body: dict[str, Any]) -> None:
        with self._lock:
            self._held += 1
            self.max_concurrent = max(self.max_concurrent, self._held)
        try:
            if self.single_slot:
                with self._slot:
                    self._chat_in_slot(handler, body)
            else:
                self._chat_in_slot(handler, body)
        finally:
            with self._lock:
                self._held -= 1

    def _chat_in_slot(self, handler: Any, body: dict[str, Any]) -> None:
        fmt = (body.get("response_format") or {}).get("type")
        if fmt and fmt in self.reject_formats:
            if self.reject_status == 500:  # llama.cpp's server before it learnt json_schema
                message = f'"response_format" must be one of "text" or "json_object", but got: {fmt}'
                error = {"code": 500, "message": message, "type": "server_error"}
            else:
                error = {"message": f"response_format {fmt} is not supported", "type": "invalid_request_error"}
            handler._send(self.reject_status, {"error": error})
            return
        reply = self.responder(body)
        if isinstance(reply, str):
            reply = Reply(content=reply)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.raw_body is not None:
            handler._send(reply.status, None, raw=reply.raw_body)
            return
        if reply.status != 200:
            handler._send(reply.status, {"error": {"message": reply.error_message, "type": "server_error"}})
            return
        content = reply.content or ""
        finish_reason = "stop"
        if reply.ramble:
            limit = int(body.get("max_tokens") or body.get("max_completion_tokens") or 100_000)
            time.sleep(limit / self.tokens_per_s)
            content = ('{"facts": [{"cluster": 1, "summary": "' + "and then it went on " * limit)[: limit * 4]
            reply.completion_tokens, finish_reason = limit, "length"
        prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else _count_tokens(body)
        completion_tokens = reply.completion_tokens if reply.completion_tokens is not None else max(1, len(content) // 4)
        handler._send(
            200,
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


def _count_tokens(body: dict[str, Any]) -> int:
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    return max(1, len(text) // 4)
