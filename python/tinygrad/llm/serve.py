"""The OpenAI-compatible HTTP server of `python -m tinygrad.llm --serve`: POST /v1/chat/completions and /v1/completions (plain JSON or
server-sent events), GET /v1/models, and the chat page (chat.html) at /. Each request is read on a thread of its own, but generation
holds one lock: the model has one KV cache, so requests arriving together are answered one after the other."""
from __future__ import annotations
import contextlib
import json
import pathlib
import select
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Callable, Iterator
from tinygrad.helpers import stderr_log
if TYPE_CHECKING:
  from tinygrad.llm.model import Transformer
  from tinygrad.llm.tokenizer import SimpleTokenizer

CHAT_PAGE = pathlib.Path(__file__).parent / "chat.html"
MAX_BODY_BYTES = 16 << 20
ROLES = ("system", "developer", "user", "assistant", "tool")

class RequestError(Exception):
  """A request the server refuses: its HTTP status and an OpenAI-style error naming the offending parameter."""
  def __init__(self, message:str, param:str|None=None, status:int=400, code:str|None=None):
    super().__init__(message)
    self.status, self.body = status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}

class ClientGone(Exception):
  """The client closed its connection: its generation stops."""

# ***** request parsing *****

def _type_name(v:Any) -> str: return "null" if v is None else {bool: "boolean", int: "integer", float: "number", str: "string",
                                                               list: "array", dict: "object"}.get(type(v), type(v).__name__)

def _field(body:dict, name:str, kinds:tuple[type, ...], what:str, ok:Callable[[Any], bool]=lambda v: True, default:Any=None,
           param:str|None=None) -> Any:
  """body[name] checked against its JSON type and range (a JSON boolean is not a number here, unlike Python's bool); absent or null
  gives the default. param is the field's full name in the request, for the error."""
  if (v := body.get(name)) is None: return default
  if isinstance(v, bool) != (bool in kinds) or not isinstance(v, kinds) or not ok(v):
    raise RequestError(f"'{param or name}' must be {what}, got {_type_name(v)} {json.dumps(v)[:60]}", param or name)
  return v

# OpenAI fields this server can't honour, {name: whether a value asks for it}: refused rather than silently ignored (unknown fields are ignored)
UNSUPPORTED: dict[str, Callable[[Any], bool]] = {
  "tools": bool, "functions": bool, "logprobs": lambda v: v not in (None, False, 0), "top_logprobs": bool, "echo": bool, "suffix": bool,
  "best_of": lambda v: v not in (None, 1), "response_format": lambda v: v is not None and not (isinstance(v, dict) and v.get("type") == "text")}

@dataclass(frozen=True)
class Sampling:
  """What one request asks of the generation."""
  max_tokens: int|None
  temperature: float
  top_k: int
  top_p: float
  seed: int|None
  stop: tuple[str, ...]
  stream: bool
  include_usage: bool

  @staticmethod
  def from_body(body:dict, max_tokens_keys:tuple[str, ...]) -> Sampling:
    if (asked := next((k for k, asks in UNSUPPORTED.items() if asks(body.get(k))), None)) is not None:
      raise RequestError(f"'{asked}' is not supported by this server (got {json.dumps(body[asked])[:60]})", asked)
    max_tokens = None
    for k in max_tokens_keys:
      if (v := _field(body, k, (int,), "an integer >= 1", lambda v: v >= 1)) is not None: max_tokens = v
    if (n := _field(body, "n", (int,), "an integer", default=1)) != 1: raise RequestError(f"'n' must be 1 (one choice per request), got {n}", "n")
    stop = _field(body, "stop", (str, list), "a string or an array of strings",
                  lambda v: isinstance(v, str) or all(isinstance(s, str) for s in v), default=())
    stream_options = _field(body, "stream_options", (dict,), "an object", default={})
    return Sampling(max_tokens=max_tokens,
                    temperature=float(_field(body, "temperature", (int, float), "a number in [0, 2]", lambda v: 0 <= v <= 2, default=0.0)),
                    top_k=_field(body, "top_k", (int,), "an integer >= 0", lambda v: v >= 0, default=0),
                    top_p=float(_field(body, "top_p", (int, float), "a number in (0, 1]", lambda v: 0 < v <= 1, default=1.0)),
                    seed=_field(body, "seed", (int,), "an integer"),
                    stop=tuple(s for s in ([stop] if isinstance(stop, str) else stop) if s),
                    stream=_field(body, "stream", (bool,), "a boolean", default=False),
                    include_usage=_field(stream_options, "include_usage", (bool,), "a boolean", default=False,
                                          param="stream_options.include_usage"))

def _message_text(i:int, content:Any) -> str:
  """A message's content as one string: a string, or an array of text parts (the only part type a text model can read)."""
  if content is None or isinstance(content, str): return content or ""
  if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
    return "".join(p["text"] for p in content)
  raise RequestError(f"'messages[{i}].content' must be a string or an array of text parts ({{\"type\": \"text\", \"text\": ...}})",
                     f"messages[{i}].content")

def parse_messages(body:dict) -> list[dict]:
  msgs = _field(body, "messages", (list,), "a non-empty array of messages", lambda v: len(v) > 0)
  if msgs is None: raise RequestError("'messages' is required", "messages")
  out = []
  for i, m in enumerate(msgs):
    if not isinstance(m, dict): raise RequestError(f"'messages[{i}]' must be an object, got {_type_name(m)}", f"messages[{i}]")
    if (role := m.get("role")) not in ROLES:
      raise RequestError(f"'messages[{i}].role' must be one of {', '.join(ROLES)}, got {json.dumps(role)[:60]}", f"messages[{i}].role")
    # chat templates know the system role; "developer" is OpenAI's newer name for it
    out.append({"role": "system" if role == "developer" else role, "content": _message_text(i, m.get("content"))})
  return out

class StopScanner:
  """Cuts streamed text before the first stop string. Text that could be the start of a stop string is held back until the next piece
  tells whether it is one."""
  def __init__(self, stops:tuple[str, ...]): self.stops, self.held = stops, ""
  def feed(self, text:str, final:bool=False) -> tuple[str, bool]:
    """(text safe to send now, whether a stop string was found)."""
    self.held += text
    if (hits := [i for s in self.stops if (i := self.held.find(s)) >= 0]):
      out, self.held = self.held[:min(hits)], ""
      return out, True
    keep = 0 if final else max((k for s in self.stops for k in range(1, min(len(s), len(self.held) + 1)) if self.held.endswith(s[:k])), default=0)
    out, self.held = self.held[:len(self.held) - keep], self.held[len(self.held) - keep:]
    return out, False

class Reply:
  """One generation as text pieces: iterating runs the model (under the caller's lock), cuts at the end token, a stop string or
  max_tokens, and checks between tokens that the client is still there. finish_reason and completion_tokens are set as it goes."""
  def __init__(self, model:Transformer, tok:SimpleTokenizer, ids:list[int], sampling:Sampling, client_gone:Callable[[], bool], param:str):
    self.tok, self.ids, self.sampling, self.client_gone = tok, ids, sampling, client_gone
    self.finish_reason, self.completion_tokens, self.prefill_s, self.decode_s = "length", 0, 0.0, 0.0
    # the model checks the prompt and the settings here, before any compute: a ValueError is the request's fault
    try: self.gen = model.generate(ids, temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p, seed=sampling.seed)
    except ValueError as e: raise RequestError(str(e), param) from e

  def __iter__(self) -> Iterator[str]:
    s, st, gen = self.sampling, time.perf_counter(), self.gen
    dec, stops = self.tok.stream_decoder(), StopScanner(s.stop)
    try:
      for tid in gen:
        if self.completion_tokens == 0: self.prefill_s = time.perf_counter() - st
        if self.tok.is_end(tid):
          self.finish_reason = "stop"
          break
        self.completion_tokens += 1
        text, hit = stops.feed(dec(tid))
        if text: yield text
        if hit:
          self.finish_reason = "stop"
          return
        if s.max_tokens is not None and self.completion_tokens >= s.max_tokens: break
        if self.client_gone(): raise ClientGone()
      # the end token, max_tokens or a full context: what the decoder and the stop scanner hold back is the end of the reply
      text, hit = stops.feed(dec(None), final=True)
      if hit: self.finish_reason = "stop"
      if text: yield text
    finally:
      gen.close()
      self.decode_s = time.perf_counter() - st - self.prefill_s

  def usage(self) -> dict:
    return {"prompt_tokens": len(self.ids), "completion_tokens": self.completion_tokens, "total_tokens": len(self.ids) + self.completion_tokens}

# ***** the HTTP side *****

class Handler(BaseHTTPRequestHandler):
  server: LLMServer
  protocol_version = "HTTP/1.1"   # keep-alive; streams go out in chunked encoding

  def log_message(self, format:str, *args:Any) -> None: pass   # one line per generation instead (LLMServer.log)

  def send_bytes(self, data:bytes, content_type:str="application/json", status:int=200) -> None:
    self.send_response(status)
    self.send_header("Content-Type", content_type)
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)

  def send_json(self, obj:Any, status:int=200) -> None: self.send_bytes(json.dumps(obj).encode(), status=status)

  def send_error_json(self, e:RequestError) -> None:
    self.close_connection = True   # the body may be unread: don't parse it as the next request
    self.send_json(e.body, e.status)

  def do_GET(self) -> None:
    path = self.path.split("?", 1)[0]
    if path in ("/", "/index.html"): self.send_bytes(CHAT_PAGE.read_bytes(), "text/html; charset=utf-8")
    elif path == "/v1/models": self.send_json({"object": "list", "data": [self.server.model_card()]})
    elif path == f"/v1/models/{self.server.model_name}": self.send_json(self.server.model_card())
    else: self.send_error_json(RequestError(f"no such path: GET {path}", status=404, code="not_found"))

  def do_POST(self) -> None:
    path, self.streaming = self.path.split("?", 1)[0], False   # a kept-alive connection's handler answers several requests
    try:
      if path not in ("/v1/chat/completions", "/v1/completions"): raise RequestError(f"no such path: POST {path}", status=404, code="not_found")
      body = self.read_json()
      if path == "/v1/chat/completions":
        messages = parse_messages(body)
        sampling = Sampling.from_body(body, ("max_tokens", "max_completion_tokens"))
        try: prompt = self.server.template.render(messages, add_generation_prompt=True)
        except Exception as e: raise RequestError(f"the model's chat template rejected the messages: {e}", "messages") from e
        ids = self.server.tok.encode(prompt)
      else:
        prompt = _field(body, "prompt", (str,), "a string")
        if prompt is None: raise RequestError("'prompt' is required", "prompt")
        sampling = Sampling.from_body(body, ("max_tokens",))
        bos = self.server.tok.bos_id
        ids = ([] if bos is None else [bos]) + self.server.tok.encode(prompt)
      self.check_length(ids, param := "messages" if path == "/v1/chat/completions" else "prompt")
    except RequestError as e: return self.send_error_json(e)
    with self.server.generation_lock:
      try: reply = Reply(self.server.model, self.server.tok, ids, sampling, self.client_gone, param)
      except RequestError as e: return self.send_error_json(e)
      try:
        if path == "/v1/chat/completions": self.answer_chat(reply)
        else: self.answer_completion(reply)
      except (ClientGone, ConnectionError):
        self.close_connection = True
        self.server.log(f"{path}: client disconnected after {reply.completion_tokens} tokens\n")
        return
      except Exception as e:
        # a failure inside the model: the client hears of it (an error event once a stream has begun), the server goes on
        self.close_connection = True
        self.server.log(f"{path}: generation failed: {type(e).__name__}: {e}\n")
        err = {"error": {"message": f"generation failed: {type(e).__name__}: {e}", "type": "server_error", "param": None, "code": None}}
        if not self.streaming: return self.send_json(err, 500)
        with contextlib.suppress(ConnectionError):
          self.send_event(err)
          self.end_stream()
        return
      self.server.log(f"{path}: in {len(ids)} tokens ({len(ids)/max(reply.prefill_s, 1e-9):.0f} tok/s), out {reply.completion_tokens} tokens "
                      f"({reply.completion_tokens/max(reply.decode_s, 1e-9):.1f} tok/s), {reply.finish_reason}\n")

  def read_json(self) -> dict:
    if (length := self.headers.get("Content-Length")) is None or not length.isdigit():
      raise RequestError("the request needs a Content-Length header", status=411)
    if int(length) > MAX_BODY_BYTES: raise RequestError(f"the request body has {length} bytes, more than the {MAX_BODY_BYTES} allowed", status=413)
    try: body = json.loads(self.rfile.read(int(length)).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e: raise RequestError(f"the request body is not valid JSON: {e}") from e
    if not isinstance(body, dict): raise RequestError(f"the request body must be a JSON object, got {_type_name(body)}")
    _field(body, "model", (str,), "a string")   # any name is answered by the one model served
    return body

  def check_length(self, ids:list[int], param:str) -> None:
    if not ids: raise RequestError("the prompt is empty", param)
    if len(ids) >= (ctx := self.server.model.max_context):
      raise RequestError(f"the prompt has {len(ids)} tokens, but the model's context holds {ctx} (at least one must be left to answer)",
                         param, code="context_length_exceeded")

  def client_gone(self) -> bool:
    """True once the client has closed its end: its socket reads as end-of-file (a pipelined next request would read as data)."""
    try: return bool(select.select([self.connection], [], [], 0)[0]) and self.connection.recv(1, socket.MSG_PEEK) == b""
    except OSError: return True

  # a stream is server-sent events in chunked transfer encoding, so the connection stays open for the next request
  def start_stream(self) -> None:
    self.streaming = True
    self.send_response(200)
    self.send_header("Content-Type", "text/event-stream")
    self.send_header("Cache-Control", "no-cache")
    self.send_header("Transfer-Encoding", "chunked")
    self.end_headers()
  def send_event(self, obj:Any) -> None:
    data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    self.wfile.flush()
  def end_stream(self) -> None:
    self.send_event(b"[DONE]")
    self.wfile.write(b"0\r\n\r\n")
    self.wfile.flush()

  def answer_chat(self, reply:Reply) -> None:
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": self.server.model_name, "system_fingerprint": None}
    if not reply.sampling.stream:
      text = "".join(reply)
      return self.send_json({**head, "object": "chat.completion", "usage": reply.usage(), "choices": [{"index": 0, "logprobs": None,
        "message": {"role": "assistant", "content": text}, "finish_reason": reply.finish_reason}]})
    def chunk(delta:dict, finish_reason:str|None=None) -> dict:
      return {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
    self.start_stream()
    self.send_event(chunk({"role": "assistant", "content": ""}))
    for text in reply: self.send_event(chunk({"content": text}))
    self.send_event(chunk({}, reply.finish_reason))
    if reply.sampling.include_usage: self.send_event({**head, "object": "chat.completion.chunk", "choices": [], "usage": reply.usage()})
    self.end_stream()

  def answer_completion(self, reply:Reply) -> None:
    head = {"id": f"cmpl-{uuid.uuid4().hex[:24]}", "object": "text_completion", "created": int(time.time()), "model": self.server.model_name}
    def choice(text:str, finish_reason:str|None) -> dict: return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    if not reply.sampling.stream:
      text = "".join(reply)
      return self.send_json({**head, "choices": [choice(text, reply.finish_reason)], "usage": reply.usage()})
    self.start_stream()
    for text in reply: self.send_event({**head, "choices": [choice(text, None)]})
    self.send_event({**head, "choices": [choice("", reply.finish_reason)]})
    if reply.sampling.include_usage: self.send_event({**head, "choices": [], "usage": reply.usage()})
    self.end_stream()

class LLMServer(ThreadingHTTPServer):
  """Serves one model: `LLMServer((host, port), model, model_name, tok, template).serve_forever()`; port 0 picks a free one
  (server_address says which)."""
  daemon_threads = True
  allow_reuse_address = True

  def __init__(self, server_address:tuple[str, int], model:Transformer, model_name:str, tok:SimpleTokenizer, template:Any, verbose:bool=True):
    self.model, self.model_name, self.tok, self.template, self.verbose = model, model_name, tok, template, verbose
    self.generation_lock, self.created = threading.Lock(), int(time.time())
    super().__init__(server_address, Handler)

  def handle_error(self, request:Any, client_address:Any) -> None:
    if not isinstance(sys.exc_info()[1], ConnectionError): super().handle_error(request, client_address)   # not for a client gone away

  def model_card(self) -> dict: return {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "tinygrad"}
  def log(self, line:str) -> None:
    if self.verbose: stderr_log(line)
