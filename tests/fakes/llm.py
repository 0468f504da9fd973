"""A fake LLM provider: a real local HTTP server speaking OpenAI's wire format.

It answers chat completions (`/v1/chat/completions`) and text completions (`/v1/completions`,
as KoboldCpp, llama.cpp's server, text-generation-webui and vLLM serve them), streamed or not;
`completions()` returns what each text-completion request sent: its prompt and its samplers.

Run on its own (`python -m tests.fakes.llm --port 5055`), it also takes replies to queue at
POST /_script ({"replies": [{"text": …, "token_delay": …}]}) and reports what arrived, with
arrival times (time.perf_counter_ns, shared by processes on one machine), at GET /_requests.

It is the only fake in the test suite. Tests script its replies and inject faults; OrbChat
reaches it through litellm exactly as it reaches a real provider (`openai/<model>` with
`api_base` set to `server.base_url`).

    with FakeLLM() as llm:
        llm.script(Reply("Hello there."), Reply(status=429))
        ...

A reply may carry tool calls (`Reply(tool_calls=[{"name": …, "arguments": {…}}])`): they come
back as OpenAI's `message.tool_calls` (streamed: `delta.tool_calls`), arguments as a JSON string,
with `finish_reason` "tool_calls".

Faults: an HTTP error status with an OpenAI-style error body, slow tokens (`token_delay`),
a slow start (`first_token_delay`), and a stream cut mid-way (`cut_after` tokens, then the
connection closes without the final chunk or `[DONE]`).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ERROR_TYPES = {
    400: ("invalid_request_error", "Bad request."),
    401: ("invalid_request_error", "Incorrect API key provided."),
    404: ("invalid_request_error", "The model does not exist."),
    429: ("rate_limit_exceeded", "Rate limit reached. Please try again in 20s."),
    500: ("server_error", "The server had an error while processing your request."),
    503: ("server_error", "The engine is currently overloaded."),
}


@dataclass
class Reply:
    """One scripted answer. With `status`, the request fails with that HTTP status instead."""

    text: str = "OK."
    status: int | None = None
    error_message: str | None = None
    token_delay: float = 0.0
    first_token_delay: float = 0.0
    cut_after: int | None = None
    finish_reason: str = "stop"
    # Benchmarks: each token is its own send time (time.perf_counter_ns) followed by a space.
    stamp_tokens: bool = False
    # Each {"name": …, "arguments": {…} or a JSON string}; sent as the message's tool calls.
    tool_calls: list[dict] | None = None

    def wire_tool_calls(self) -> list[dict]:
        """The tool calls as OpenAI sends them: an id, the type, the function and its JSON arguments."""
        calls = []
        for number, call in enumerate(self.tool_calls or ()):
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": f"call_{number}_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    },
                }
            )
        return calls

    @property
    def finish(self) -> str:
        return "tool_calls" if self.tool_calls and self.finish_reason == "stop" else self.finish_reason

    def tokens(self) -> list[str]:
        return re.findall(r"\s*\S+", self.text) or [""]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict = field(default_factory=dict)
    at_ns: int = 0  # time.perf_counter_ns() when the request's first line had arrived


class FakeLLM:
    """The server; start it with `with FakeLLM() as llm` or `start()` / `stop()`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, default: Reply | None = None) -> None:
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.default = default or Reply()
        self.requests: list[Received] = []
        # Fault injection for the other routes: an HTTP status they answer with (None: they work).
        self.embeddings_status: int | None = None
        self.rerank_status: int | None = None
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one, then the default."""
        with self._lock:
            self._script.extend(replies)

    def next_reply(self) -> Reply:
        with self._lock:
            return self._script.popleft() if self._script else self.default

    def completions(self) -> list[Received]:
        """The text-completion requests received, oldest first."""
        with self._lock:
            return [r for r in self.requests if r.path.split("?")[0].rstrip("/").endswith("/v1/completions")]

    def record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def start(self) -> FakeLLM:
        # A short poll: `shutdown()` waits up to one poll interval, and most tests stop a server.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        return Handler


class _Handler(BaseHTTPRequestHandler):
    server_fake: FakeLLM
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def parse_request(self) -> bool:
        # The request line has just been read: the request's first bytes are here.
        self.arrived_ns = time.perf_counter_ns()
        return super().parse_request()

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/_requests":
            # Control route for another process (benchmarks): what arrived, and when.
            received = [{"path": r.path, "at_ns": r.at_ns} for r in self.server_fake.requests]
            self._json(200, {"requests": received})
        elif self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"No route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._json(400, {"error": {"message": "Body is not JSON.", "type": "invalid_request_error"}})
            return
        fake = self.server_fake
        if self.path.rstrip("/") == "/_script":
            # Control route for another process (benchmarks): queue replies given as JSON.
            fake.script(*(Reply(**reply) for reply in body.get("replies", [])))
            self._json(200, {"queued": len(body.get("replies", []))})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake.record(Received(path=self.path, headers=headers, body=body, at_ns=self.arrived_ns))
        route = self.path.split("?")[0].rstrip("/")
        if route.endswith(("/rerank", "/embeddings")):
            status = fake.rerank_status if route.endswith("/rerank") else fake.embeddings_status
            if status:
                kind, message = ERROR_TYPES.get(status, ("server_error", "Error."))
                self._json(status, {"error": {"message": message, "type": kind, "code": status}})
            elif route.endswith("/rerank"):
                self._rerank(body)
            else:
                self._embeddings(body)
            return
        text = route.endswith("/v1/completions")
        if not (text or route.endswith("/chat/completions")):
            self._json(404, {"error": {"message": f"No route {self.path}", "type": "not_found"}})
            return
        reply = fake.next_reply()
        if reply.status:
            kind, message = ERROR_TYPES.get(reply.status, ("server_error", "Error."))
            error = {"message": reply.error_message or message, "type": kind, "code": reply.status}
            self._json(reply.status, {"error": error})
            return
        if reply.first_token_delay:
            time.sleep(reply.first_token_delay)
        if body.get("stream"):
            self._stream(body, reply, text=text)
        else:
            self._complete(body, reply, text=text)

    def _rerank(self, body: dict) -> None:
        """Score documents by shared words with the query (Cohere's response shape)."""
        query = set(str(body.get("query", "")).lower().split())
        results = []
        for index, document in enumerate(body.get("documents", [])):
            text = document if isinstance(document, str) else str(document.get("text", ""))
            words = set(text.lower().split())
            results.append({"index": index, "relevance_score": len(query & words) / (len(query) or 1)})
        results.sort(key=lambda r: -r["relevance_score"])
        self._json(
            200, {"id": uuid.uuid4().hex, "results": results, "meta": {"billed_units": {"search_units": 1}}}
        )

    def _embeddings(self, body: dict) -> None:
        """Return small deterministic vectors (letter counts), OpenAI's response shape."""
        inputs = body.get("input", [])
        inputs = [inputs] if isinstance(inputs, str) else inputs
        data = []
        for index, text in enumerate(inputs):
            vector = [0.0] * 26
            for char in str(text).lower():
                if "a" <= char <= "z":
                    vector[ord(char) - 97] += 1.0
            data.append({"object": "embedding", "index": index, "embedding": vector})
        usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
        self._json(200, {"object": "list", "data": data, "model": body.get("model", "fake"), "usage": usage})

    def _json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def _usage(body: dict, completion_tokens: int) -> dict:
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        prompt_tokens += len(str(body.get("prompt", "")).split())
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    def _complete(self, body: dict, reply: Reply, *, text: bool = False) -> None:
        tokens = reply.tokens()
        if reply.token_delay:
            time.sleep(reply.token_delay * len(tokens))
        if text:
            choice = {"index": 0, "text": reply.text, "logprobs": None, "finish_reason": reply.finish_reason}
            self._json(
                200,
                {
                    "id": f"cmpl-{uuid.uuid4().hex[:12]}",
                    "object": "text_completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake-model"),
                    "choices": [choice],
                    "usage": self._usage(body, len(tokens)),
                },
            )
            return
        message: dict = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = reply.wire_tool_calls()
        self._json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake-model"),
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish}],
                "usage": self._usage(body, len(tokens)),
            },
        )

    def _stream(self, body: dict, reply: Reply, *, text: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        model = body.get("model", "fake-model")

        def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> None:
            if text:
                choice = {
                    "index": 0,
                    "text": delta.get("content", ""),
                    "logprobs": None,
                    "finish_reason": finish,
                }
            else:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
            payload = {
                "id": ident,
                "object": "text_completion" if text else "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [choice],
            }
            if usage is not None:
                payload["usage"] = usage
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        tokens = reply.tokens()
        try:
            for index, token in enumerate(tokens):
                if reply.cut_after is not None and index >= reply.cut_after:
                    self.close_connection = True
                    return  # the connection drops: no final chunk, no [DONE]
                if reply.token_delay and index:
                    time.sleep(reply.token_delay)
                delta = {"content": f"{time.perf_counter_ns()} " if reply.stamp_tokens else token}
                if index == 0:
                    delta["role"] = "assistant"
                chunk(delta)
            if reply.tool_calls and not text:
                calls = [{"index": i, **call} for i, call in enumerate(reply.wire_tool_calls())]
                chunk({"role": "assistant", "tool_calls": calls})
            include_usage = (body.get("stream_options") or {}).get("include_usage")
            chunk({}, reply.finish, self._usage(body, len(tokens)) if include_usage else None)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. Stop): nothing more to send
        self.close_connection = True


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Serve the fake OpenAI-compatible provider.")
    parser.add_argument("--port", type=int, default=5055)
    parser.add_argument("--reply", default="Hello from the fake provider.")
    parser.add_argument("--token-delay", type=float, default=0.05)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    server = FakeLLM(host=args.host, port=args.port, default=Reply(args.reply, token_delay=args.token_delay))
    print(f"fake provider at {server.base_url}", flush=True)
    server.start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
