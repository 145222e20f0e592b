# The OpenAI-compatible server (tinygrad.llm.serve) driven by the official openai client and raw HTTP, on a scripted model whose reply to
# a prompt is known (tests/helpers/fake_llm.py); test_serve_model.py runs it on a real Transformer.
import contextlib
import http.client
import json
import threading
import time
import pytest
from tinygrad.llm.serve import LLMServer, StopScanner
from tests.helpers.fake_llm import BOS, ByteTokenizer, LineTemplate, ScriptedModel, scripted_reply
from tests.helpers.browser import HeadlessChromium, chromium_path

openai = pytest.importorskip("openai")

@contextlib.contextmanager
def running(model:ScriptedModel, tok=None, template=None):
  server = LLMServer(("127.0.0.1", 0), model, "scripted", tok or ByteTokenizer(), template or LineTemplate(), verbose=False)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try: yield server
  finally:
    server.shutdown()
    server.server_close()
    thread.join(10)

def client(server:LLMServer, **kw) -> "openai.OpenAI":
  return openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="unused", max_retries=0, **kw)

def chat_ids(messages:list[dict]) -> list[int]: return ByteTokenizer().encode(LineTemplate().render(messages))
def expected_chat(messages:list[dict], seed=None) -> str: return scripted_reply(chat_ids(messages), seed)
def utf8_len(s:str) -> int: return len(s.encode())

USER = [{"role": "user", "content": "Hello there"}]

@pytest.fixture
def server():
  with running(ScriptedModel()) as s: yield s

def post(server:LLMServer, path:str, body:bytes|dict, timeout:float=30) -> tuple[int, dict]:
  conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=timeout)
  conn.request("POST", path, body if isinstance(body, bytes) else json.dumps(body).encode(), {"Content-Type": "application/json"})
  res = conn.getresponse()
  status, data = res.status, json.loads(res.read())
  conn.close()
  return status, data

# ***** answers *****

def test_chat_plain(server):
  r = client(server).chat.completions.create(model="scripted", messages=USER)
  want = expected_chat(USER)
  assert r.choices[0].message.content == want and r.choices[0].message.role == "assistant"
  assert r.choices[0].finish_reason == "stop" and r.model == "scripted" and r.object == "chat.completion"
  assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (len(chat_ids(USER)), utf8_len(want),
                                                                                       len(chat_ids(USER)) + utf8_len(want))

def test_chat_stream(server):
  chunks = list(client(server).chat.completions.create(model="scripted", messages=USER, stream=True, stream_options={"include_usage": True}))
  assert chunks[0].choices[0].delta.role == "assistant"
  pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
  want = expected_chat(USER)
  # one piece per character: a multi-byte character split over byte tokens arrives whole, never as a replacement character
  assert "".join(pieces) == want and len(pieces) == len(want)
  finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
  assert finishes == ["stop"] and chunks[-2].choices[0].finish_reason == "stop"
  assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == utf8_len(want)
  assert len({c.id for c in chunks}) == 1

def test_chat_stream_without_usage(server):
  chunks = list(client(server).chat.completions.create(model="scripted", messages=USER, stream=True))
  assert all(c.usage is None for c in chunks) and chunks[-1].choices[0].finish_reason == "stop"

def test_chat_content_parts_and_conversation(server):
  msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "you"}]},
          {"role": "assistant", "content": "Hello."}, {"role": "developer", "content": "Really brief."}, {"role": "user", "content": "Again"}]
  r = client(server).chat.completions.create(model="scripted", messages=msgs)
  flat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi you"}, {"role": "assistant", "content": "Hello."},
          {"role": "system", "content": "Really brief."}, {"role": "user", "content": "Again"}]
  assert server.model.calls[-1]["tokens"] == chat_ids(flat)
  assert r.choices[0].message.content == expected_chat(flat)

@pytest.mark.parametrize("stream", [False, True])
def test_completions(server, stream):
  c = client(server)
  if stream:
    chunks = list(c.completions.create(model="scripted", prompt="Once upon", stream=True, stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    usage = chunks[-1].usage
  else:
    r = c.completions.create(model="scripted", prompt="Once upon")
    text, finish, usage = r.choices[0].text, [r.choices[0].finish_reason], r.usage
  ids = [BOS] + list(b"Once upon")   # the prompt is encoded as it is, after the BOS token
  assert server.model.calls[-1]["tokens"] == ids
  assert text == scripted_reply(ids) and finish == ["stop"]
  assert (usage.prompt_tokens, usage.completion_tokens) == (len(ids), utf8_len(text))

def test_models(server):
  models = client(server).models.list().data
  assert [m.id for m in models] == ["scripted"] and models[0].owned_by == "tinygrad"
  assert client(server).models.retrieve("scripted").id == "scripted"

def test_sampling_reaches_the_model(server):
  r = client(server).chat.completions.create(model="scripted", messages=USER, temperature=0.7, top_p=0.9, seed=1234, extra_body={"top_k": 40})
  call = server.model.calls[-1]
  assert (call["temperature"], call["top_p"], call["seed"], call["top_k"]) == (0.7, 0.9, 1234, 40)
  assert r.choices[0].message.content == expected_chat(USER, seed=1234)
  client(server).chat.completions.create(model="scripted", messages=USER)
  assert {k: server.model.calls[-1][k] for k in ("temperature", "top_p", "seed", "top_k")} == {"temperature": 0.0, "top_p": 1.0, "seed": None,
                                                                                             "top_k": 0}

# ***** where a reply ends *****

@pytest.mark.parametrize("stop", ["fox", ["zzz", "lazy", "quick"], "dog. O", "日本", "é, n"])
@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings(server, stop, stream):
  want = expected_chat(USER)
  cut = min(i for s in ([stop] if isinstance(stop, str) else stop) if (i := want.find(s)) >= 0)
  kw = {"model": "scripted", "messages": USER, "stop": stop}
  if stream:
    chunks = list(client(server).chat.completions.create(stream=True, **kw))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    finish = chunks[-1].choices[0].finish_reason
  else:
    r = client(server).chat.completions.create(**kw)
    text, finish = r.choices[0].message.content, r.choices[0].finish_reason
  assert text == want[:cut] and finish == "stop"
  # generation stopped at the token that completed the stop string
  assert server.model.tokens_out < utf8_len(want)

def test_stop_string_absent_and_at_the_end(server):
  want = expected_chat(USER)
  for stop in (["never there"], [want[-3:] + "x"]):
    r = client(server).chat.completions.create(model="scripted", messages=USER, stop=stop)
    assert r.choices[0].message.content == want and r.choices[0].finish_reason == "stop"

def test_stop_scanner_holds_back_only_a_possible_start():
  s = StopScanner(("abc",))
  assert s.feed("xxa") == ("xx", False) and s.feed("b") == ("", False) and s.feed("d") == ("abd", False)
  assert s.feed("zab") == ("z", False) and s.feed("", final=True) == ("ab", False)
  assert StopScanner(("abc", "bd")).feed("xabd") == ("xa", True)

@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_is_length(server, stream):
  want = expected_chat(USER)
  if stream:
    chunks = list(client(server).chat.completions.create(model="scripted", messages=USER, max_tokens=7, stream=True,
                                                         stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish, usage = chunks[-2].choices[0].finish_reason, chunks[-1].usage
  else:
    r = client(server).chat.completions.create(model="scripted", messages=USER, max_tokens=7)
    text, finish, usage = r.choices[0].message.content, r.choices[0].finish_reason, r.usage
  assert text == want.encode()[:7].decode() and finish == "length" and usage.completion_tokens == 7
  assert server.model.tokens_out == 7
  r = client(server).chat.completions.create(model="scripted", messages=USER, max_completion_tokens=3)
  assert r.choices[0].message.content == want[:3] and r.choices[0].finish_reason == "length"

def test_full_context_is_length():
  ids = chat_ids(USER)
  with running(ScriptedModel(max_context=len(ids) + 5)) as server:
    r = client(server).chat.completions.create(model="scripted", messages=USER)
    assert r.choices[0].message.content == expected_chat(USER)[:5] and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5

# ***** refusals *****

LONG = [{"role": "user", "content": "x" * 600}]

@pytest.mark.parametrize("path,body,param", [
  ("/v1/chat/completions", b"{not json", None),
  ("/v1/chat/completions", b"\xff\xfe", None),
  ("/v1/chat/completions", [1, 2], None),
  ("/v1/chat/completions", {"model": "scripted"}, "messages"),
  ("/v1/chat/completions", {"messages": "hi"}, "messages"),
  ("/v1/chat/completions", {"messages": []}, "messages"),
  ("/v1/chat/completions", {"messages": ["hi"]}, "messages[0]"),
  ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
  ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
  ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content"),
  ("/v1/chat/completions", {"messages": USER, "model": 3}, "model"),
  ("/v1/chat/completions", {"messages": USER, "temperature": "hot"}, "temperature"),
  ("/v1/chat/completions", {"messages": USER, "temperature": True}, "temperature"),
  ("/v1/chat/completions", {"messages": USER, "temperature": 2.5}, "temperature"),
  ("/v1/chat/completions", {"messages": USER, "top_p": 0}, "top_p"),
  ("/v1/chat/completions", {"messages": USER, "top_k": -1}, "top_k"),
  ("/v1/chat/completions", {"messages": USER, "max_tokens": 0}, "max_tokens"),
  ("/v1/chat/completions", {"messages": USER, "max_tokens": "5"}, "max_tokens"),
  ("/v1/chat/completions", {"messages": USER, "max_completion_tokens": 2.5}, "max_completion_tokens"),
  ("/v1/chat/completions", {"messages": USER, "seed": 1.5}, "seed"),
  ("/v1/chat/completions", {"messages": USER, "stop": 7}, "stop"),
  ("/v1/chat/completions", {"messages": USER, "stop": ["a", 1]}, "stop"),
  ("/v1/chat/completions", {"messages": USER, "stream": "yes"}, "stream"),
  ("/v1/chat/completions", {"messages": USER, "stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
  ("/v1/chat/completions", {"messages": USER, "n": 2}, "n"),
  ("/v1/chat/completions", {"messages": LONG}, "messages"),
  ("/v1/chat/completions", {"messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
  ("/v1/chat/completions", {"messages": USER, "logprobs": True}, "logprobs"),
  ("/v1/chat/completions", {"messages": USER, "response_format": {"type": "json_object"}}, "response_format"),
  ("/v1/completions", {"prompt": "x", "echo": True}, "echo"),
  ("/v1/completions", {"model": "scripted"}, "prompt"),
  ("/v1/completions", {"prompt": ["a", "b"]}, "prompt"),
  ("/v1/completions", {"prompt": "x" * 600}, "prompt"),
])
def test_bad_request_is_400(server, path, body, param):
  status, data = post(server, path, body)
  assert status == 400, data
  assert data["error"]["param"] == param and data["error"]["type"] == "invalid_request_error"
  if param is not None: assert f"'{param}'" in data["error"]["message"] or "prompt has" in data["error"]["message"]
  assert server.model.calls == []

def test_prompt_over_context_names_lengths(server):
  with pytest.raises(openai.BadRequestError) as e: client(server).chat.completions.create(model="scripted", messages=LONG)
  assert e.value.status_code == 400 and e.value.code == "context_length_exceeded"
  assert f"{len(chat_ids(LONG))} tokens" in str(e.value) and "512" in str(e.value)
  # the server still answers afterwards
  assert client(server).chat.completions.create(model="scripted", messages=USER).choices[0].message.content == expected_chat(USER)

def test_unknown_paths_are_404(server):
  assert post(server, "/v1/embeddings", {"input": "x"})[0] == 404
  conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
  conn.request("GET", "/v1/nothing")
  res = conn.getresponse()
  assert res.status == 404 and "no such path" in json.loads(res.read())["error"]["message"]

def test_unknown_fields_are_ignored(server):
  status, data = post(server, "/v1/chat/completions", {"messages": USER, "frequency_penalty": 0.5, "user": "someone", "logit_bias": {},
                                                        "tools": [], "logprobs": False, "response_format": {"type": "text"}})
  assert status == 200 and data["choices"][0]["message"]["content"] == expected_chat(USER)

# ***** several clients *****

def test_concurrent_requests_are_answered_one_after_the_other():
  prompts = [[{"role": "user", "content": f"question number {i}"}] for i in range(4)]
  with running(ScriptedModel(delay=0.002)) as server:
    results: dict[int, str] = {}
    def ask(i:int):
      c = client(server)
      if i % 2: results[i] = c.chat.completions.create(model="scripted", messages=prompts[i]).choices[0].message.content
      else: results[i] = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(model="scripted", messages=prompts[i],
                                                                                                         stream=True))
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads: t.start()
    for t in threads: t.join(60)
    assert server.model.overlaps == 0 and len(server.model.calls) == 4
    assert results == {i: expected_chat(p) for i, p in enumerate(prompts)}
    assert len(set(results.values())) == 4

def _wait(cond, timeout=10.0) -> bool:
  deadline = time.monotonic() + timeout
  while not cond():
    if time.monotonic() > deadline: return False
    time.sleep(0.01)
  return True

@pytest.mark.parametrize("stream", [True, False])
def test_disconnect_stops_generation(stream):
  with running(ScriptedModel(max_context=100_000, delay=0.005, endless=True)) as server:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    conn.request("POST", "/v1/chat/completions", json.dumps({"messages": USER, "stream": stream}).encode(), {"Content-Type": "application/json"})
    if stream:
      res = conn.getresponse()
      assert res.status == 200 and res.fp.readline()   # the first chunk arrived: generation is under way
    else: assert _wait(lambda: server.model.tokens_out > 10)
    conn.sock.close()
    conn.close()
    assert _wait(lambda: server.model.closed_early == 1), "the generation did not stop when its client left"
    stopped_at = server.model.tokens_out
    time.sleep(0.1)
    assert server.model.tokens_out == stopped_at
    # the lock is free: the next request is answered
    r = client(server).chat.completions.create(model="scripted", messages=USER, max_tokens=5)
    assert r.choices[0].finish_reason == "length" and r.choices[0].message.content == expected_chat(USER)[:5]

# ***** the chat page *****

def test_chat_page_is_self_contained(server):
  conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
  conn.request("GET", "/")
  res = conn.getresponse()
  page = res.read().decode()
  assert res.status == 200 and res.getheader("Content-Type").startswith("text/html")
  assert "<script>" in page and "<style>" in page and "/v1/chat/completions" in page
  assert "http://" not in page and "https://" not in page and " src=" not in page and "<link" not in page

@pytest.mark.browser
def test_chat_page_in_chromium():
  if (exe := chromium_path()) is None: pytest.skip("needs chromium")
  with running(ScriptedModel(delay=0.01)) as server:
    browser = HeadlessChromium(exe)
    try:
      browser.open(f"http://127.0.0.1:{server.server_address[1]}/")
      assert browser.wait_for("document.getElementById('model').textContent") == "scripted"
      browser.eval("window.updates = 0; new MutationObserver(() => window.updates++).observe(document.getElementById('messages'),"
                   " {subtree: true, childList: true, characterData: true})")
      replies = "[...document.querySelectorAll('.msg.assistant')].map(d => [d.firstChild.textContent, d.dataset.done || null])"
      browser.eval("document.getElementById('input').focus()")
      browser.send("Input.insertText", text="Hello there")
      browser.send("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter", windowsVirtualKeyCode=13)
      browser.wait_for(f"{replies}.every(r => r[1])")
      assert browser.eval(replies) == [[expected_chat(USER), "stop"]]
      assert browser.eval("window.updates") > 10   # the reply appeared piece by piece
      assert browser.eval("document.getElementById('input').value") == ""
      # a second turn sends the whole conversation
      browser.eval("document.getElementById('input').value = 'And then?'; document.getElementById('send').click()")
      browser.wait_for(f"{replies}.length == 2 && {replies}.every(r => r[1])")
      convo = USER + [{"role": "assistant", "content": expected_chat(USER)}, {"role": "user", "content": "And then?"}]
      assert server.model.calls[-1]["tokens"] == chat_ids(convo)
      assert browser.eval(replies)[1] == [expected_chat(convo), "stop"]
    finally: browser.close()

class FailingModel(ScriptedModel):
  """Refuses top_k > 100 as the real model refuses a bad setting (ValueError at the call), and breaks after 3 tokens when asked to."""
  def generate(self, tokens, temperature=0.0, top_k=0, top_p=1.0, seed=None):
    if top_k > 100: raise ValueError(f"top_k must be at most 100, got {top_k}")
    inner = super().generate(tokens, temperature, top_k, top_p, seed)
    def broken():
      for i, t in enumerate(inner):
        if i == 3 and seed == 666: raise RuntimeError("the device fell over")
        yield t
    return broken()

def test_model_refusing_a_setting_is_400():
  with running(FailingModel()) as server:
    status, data = post(server, "/v1/chat/completions", {"messages": USER, "top_k": 1000})
    assert status == 400 and "top_k must be at most 100" in data["error"]["message"]

@pytest.mark.parametrize("stream", [False, True])
def test_model_failure_is_reported_and_the_server_goes_on(stream):
  with running(FailingModel()) as server:
    if stream:
      conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
      conn.request("POST", "/v1/chat/completions", json.dumps({"messages": USER, "stream": True, "seed": 666}).encode())
      res = conn.getresponse()
      events = [json.loads(line[6:]) for line in res.read().decode().splitlines() if line.startswith("data: {")]
      assert res.status == 200 and "the device fell over" in events[-1]["error"]["message"]
      assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]) == expected_chat(USER, 666)[:3]
    else:
      status, data = post(server, "/v1/chat/completions", {"messages": USER, "seed": 666})
      assert status == 500 and "RuntimeError: the device fell over" in data["error"]["message"]
    assert client(server).chat.completions.create(model="scripted", messages=USER).choices[0].message.content == expected_chat(USER)

@pytest.mark.browser
def test_chat_page_stop_button_and_errors():
  if (exe := chromium_path()) is None: pytest.skip("needs chromium")
  with running(ScriptedModel(max_context=400, delay=0.01, endless=True)) as server:
    browser = HeadlessChromium(exe)
    try:
      browser.open(f"http://127.0.0.1:{server.server_address[1]}/")
      browser.eval("document.getElementById('input').value = 'Hello there'; document.getElementById('send').click()")
      browser.wait_for("document.querySelector('.msg.assistant .text').textContent.length > 20")
      assert browser.eval("document.getElementById('send').disabled") is True
      browser.eval("document.getElementById('stop').click()")
      assert browser.wait_for("document.querySelector('.msg.assistant').dataset.done") == "stopped"
      assert _wait(lambda: server.model.closed_early == 1), "stopping in the page did not stop the generation"
      partial = browser.eval("document.querySelector('.msg.assistant .text').textContent")
      assert expected_chat(USER).startswith(partial[:len(expected_chat(USER))])
      # a prompt over the context: the server's message is shown, and the page still works afterwards
      browser.eval("document.getElementById('input').value = 'x'.repeat(500); document.getElementById('send').click()")
      error = browser.wait_for("document.querySelector('.msg.error') && document.querySelector('.msg.error').textContent")
      assert "the prompt has" in error and "context holds 400" in error
      assert browser.eval("document.getElementById('send').disabled") is False
      assert len(server.model.calls) == 1
    finally: browser.close()

def test_kept_alive_connection_answers_a_stream_then_a_failure_as_500():
  with running(FailingModel()) as server:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    conn.request("POST", "/v1/chat/completions", json.dumps({"messages": USER, "stream": True}).encode())
    res = conn.getresponse()
    assert res.status == 200 and res.read().decode().endswith("data: [DONE]\n\n")
    conn.request("POST", "/v1/chat/completions", json.dumps({"messages": USER, "seed": 666}).encode())   # the same connection
    res = conn.getresponse()
    assert res.status == 500 and "the device fell over" in json.loads(res.read())["error"]["message"]
