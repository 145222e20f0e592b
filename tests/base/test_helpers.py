# getenv/ContextVar/Context, DEV target parsing, the small sequence/integer/string helpers, the sqlite disk cache and fetch.
import gzip
import hashlib
import io
import math
import os
import pathlib
import pickle
import subprocess
import sys
import tarfile
import threading
import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
import pytest
from hypothesis import given, strategies as st
import tinygrad.helpers as helpers
from tinygrad.helpers import (getenv, ContextVar, Context, Target, DEV, DEBUG, BEAM, NOOPT, JIT, SPEC, CACHELEVEL, IGNORE_BEAM_CACHE, VIZ,
                              TRACK_MATCH_STATS, prod, dedup, argfix, argsort, all_same, all_int, flatten, fully_flatten, merge_dicts, partition,
                              unwrap, get_single_element, get_shape, get_child, make_tuple, to_tuple, flat_to_grouped, resolve_pool_pads,
                              strides_for_shape, colored, ansistrip, ansilen, ansipad, word_wrap, to_function_name, strip_parens, round_up,
                              round_down, ceildiv, cdiv, cmod, floordiv, floormod, next_power2, getbits, i2u, lo32, hi32, data64, data64_le,
                              to_be32, to_be64, pad_bytes, polyN, pluralize, time_to_str, size_to_str, temp, Timing, Metadata, GlobalCounters,
                              TracingKey, cpu_profile, cpu_events, diskcache_get, diskcache_put, diskcache_clear, diskcache, select_by_name,
                              select_first_inited, fetch, tqdm, trange, count, disable_gc, to_mv, from_mv, mv_address, flat_mv, OSX, WIN)

class TestGetenv:
  def setup_method(self): getenv.cache_clear()
  def teardown_method(self): getenv.cache_clear()

  def test_types(self, monkeypatch):
    monkeypatch.setenv("TG_TEST_INT", "7")
    monkeypatch.setenv("TG_TEST_FLOAT", "1.5")
    assert getenv("TG_TEST_INT") == 7 and getenv("TG_TEST_INT", 0) == 7 and getenv("TG_TEST_INT", "x") == "7"
    assert getenv("TG_TEST_FLOAT", 0.0) == 1.5 and getenv("TG_TEST_MISSING") == 0 and getenv("TG_TEST_MISSING", "d") == "d"
    assert getenv("TG_TEST_MISSING", 2.5) == 2.5

  def test_bool(self, monkeypatch):
    for raw, want in (("0", False), ("", False), ("false", False), ("1", True), ("2", True), ("yes", True)):
      monkeypatch.setenv("TG_TEST_BOOL", raw)
      getenv.cache_clear()
      assert getenv("TG_TEST_BOOL", False) is want, raw

  def test_cached(self, monkeypatch):
    monkeypatch.setenv("TG_TEST_CACHED", "1")
    assert getenv("TG_TEST_CACHED") == 1
    monkeypatch.setenv("TG_TEST_CACHED", "2")
    assert getenv("TG_TEST_CACHED") == 1
    getenv.cache_clear()
    assert getenv("TG_TEST_CACHED") == 2

  def test_bad_value(self, monkeypatch):
    monkeypatch.setenv("TG_TEST_BAD", "abc")
    with pytest.raises(ValueError, match="TG_TEST_BAD='abc'"): getenv("TG_TEST_BAD")

class TestContextVar:
  def test_defaults(self):
    # tinygrad 0.14 defaults, for the ones the environment does not override
    want = {"DEBUG": 0, "BEAM": 0, "NOOPT": 0, "JIT": 1, "SPEC": 1, "CACHELEVEL": 2, "IGNORE_BEAM_CACHE": 0, "VIZ": 0, "TC": 1, "TC_SELECT": -1,
            "DEFAULT_FLOAT": "float32", "DEFAULT_INT": "int32", "EMULATED_DTYPES": "", "IMAGE": 0, "LRU": 1, "CCACHE": 1, "SCACHE": 1}
    for k, v in want.items():
      if k not in os.environ: assert ContextVar._cache[k].value == v, k
    if "VIZ" not in os.environ and "TRACK_MATCH_STATS" not in os.environ: assert TRACK_MATCH_STATS.value == 0
    assert (DEBUG.key, BEAM.key, NOOPT.key, JIT.key, SPEC.key, CACHELEVEL.key, IGNORE_BEAM_CACHE.key, VIZ.key) == \
      ("DEBUG", "BEAM", "NOOPT", "JIT", "SPEC", "CACHELEVEL", "IGNORE_BEAM_CACHE", "VIZ")

  def test_reads_environment(self, monkeypatch):
    monkeypatch.setenv("TG_TEST_CV_ENV", "5")
    getenv.cache_clear()
    assert ContextVar("TG_TEST_CV_ENV", 0).value == 5
    assert ContextVar("TG_TEST_CV_ENV_STR", "dflt").value == "dflt"

  def test_comparisons(self):
    v = ContextVar("TG_TEST_CV_CMP", 2)
    assert v == 2 and v >= 2 and v > 1 and v < 3 and v <= 2 and bool(v) and not (v == 3)
    v.value = 0
    assert not v

  def test_recreate_fails(self):
    ContextVar("TG_TEST_CV_DUP", 0)
    with pytest.raises(RuntimeError, match="TG_TEST_CV_DUP"): ContextVar("TG_TEST_CV_DUP", 1)

  def test_tolist(self):
    assert ContextVar("TG_TEST_CV_LIST", "a,b,,c").tolist() == ["a", "b", "c"]
    assert ContextVar("TG_TEST_CV_LIST2", "sqrt,floor").tolist(math) == [math.sqrt, math.floor]
    with pytest.raises(TypeError): ContextVar("TG_TEST_CV_LIST3", 1).tolist()

class TestContext:
  def test_sets_and_restores(self):
    before = DEBUG.value
    with Context(DEBUG=4, BEAM=3):
      assert DEBUG.value == 4 and BEAM.value == 3 and DEBUG >= 4
      with Context(DEBUG=1):
        assert DEBUG.value == 1 and BEAM.value == 3
      assert DEBUG.value == 4
    assert DEBUG.value == before

  def test_restores_on_exception(self):
    before = DEBUG.value
    with pytest.raises(ZeroDivisionError):
      with Context(DEBUG=7): 1 // 0
    assert DEBUG.value == before

  def test_decorator_and_recursion(self):
    ctx = Context(BEAM=9)
    seen = []
    @ctx
    def f(n):
      seen.append(BEAM.value)
      if n: f(n - 1)
    before = BEAM.value
    f(3)
    assert seen == [9, 9, 9, 9] and BEAM.value == before

  def test_unknown_key(self):
    with pytest.raises(KeyError, match="NOT_A_CONTEXTVAR"):
      with Context(NOT_A_CONTEXTVAR=1): pass

class TestDev:
  @pytest.mark.parametrize("s, fields, rep", [
    ("", ("", "", "", "", ""), ""),
    ("cuda", ("CUDA", "", "", "", ""), "CUDA"),
    ("cpu:llvm", ("CPU", "LLVM", "", "", ""), "CPU:LLVM"),
    ("nv:ptx:sm_80", ("NV", "PTX", "sm_80", "", ""), "NV:PTX:sm_80"),
    ("pci:1+amd", ("AMD", "", "", "pci", "1"), "pci:1+AMD"),
    ("usb+amd:llvm:gfx1100", ("AMD", "LLVM", "gfx1100", "usb", ""), "usb+AMD:LLVM:gfx1100"),
    ("x:y+cuda::sm_90", ("CUDA", "", "sm_90", "x", "y"), "x:y+CUDA::sm_90"),
    ("cpu::", ("CPU", "", "", "", ""), "CPU"),
  ])
  def test_parse(self, s, fields, rep):
    t = Target.parse(s)
    assert (t.device, t.renderer, t.arch, t.interface, t.indices) == fields and repr(t) == rep
    assert Target.parse(repr(t)) == t

  def test_parse_errors(self):
    with pytest.raises(RuntimeError, match="'\\+'"): Target.parse("a+b+c")
    with pytest.raises(RuntimeError, match="':'"): Target.parse("a:b:c:d")

  def test_dev_context(self):
    with Context(DEV="CUDA:PTX;CPU:LLVM"):
      assert repr(DEV) == "CUDA:PTX;CPU:LLVM" and DEV.device == "CUDA" and DEV.renderer == "PTX"
      assert DEV.target("CPU") == Target("CPU", "LLVM") and DEV.target("NV", arch="sm_1") == Target("NV", arch="sm_1")
      assert DEV.target("CUDA", renderer="X", arch="y") == Target("CUDA", "PTX", "y")
    with Context(DEV="cpu"):
      assert DEV.target("CPU", renderer="LLVM") == Target("CPU", "LLVM") and DEV.target("CUDA") == Target("CUDA")
    with Context(DEV=Target("CUDA")): assert DEV.value == [Target("CUDA")]
    with Context(DEV=""): assert DEV.target("CPU", renderer="CLANG") == Target("CPU", "CLANG")

class TestSequences:
  def test_basic(self):
    assert prod([]) == 1 and prod([2, 3, 4]) == 24 and prod((2.0, 3)) == 6.0
    assert dedup([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert argfix(1, 2) == (1, 2) and argfix((1, 2)) == (1, 2) and argfix([1, 2]) == (1, 2) and argfix() == ()
    with pytest.raises(ValueError): argfix((1, 2), 3)
    assert argsort([3, 1, 2]) == [1, 2, 0] and argsort((3, 1, 2)) == (1, 2, 0)
    assert all_same([]) and all_same([1, 1]) and not all_same([1, 2])
    assert all_int((1, 2)) and not all_int((1, 2.0))
    assert flatten([[1, 2], [3], []]) == [1, 2, 3] and fully_flatten([[1, [2]], [3]]) == [1, 2, 3] and fully_flatten("ab") == ["ab"]
    assert partition([1, 2, 3, 4], lambda x: x % 2 == 0) == ([2, 4], [1, 3])
    assert make_tuple(3, 2) == (3, 3) and make_tuple([1, 2], 2) == (1, 2) and to_tuple(1) == (1,) and to_tuple((1, 2)) == (1, 2)
    assert unwrap(3) == 3 and get_single_element([4]) == 4
    with pytest.raises(AssertionError): unwrap(None)
    with pytest.raises(AssertionError): get_single_element([1, 2])
    assert get_child({"a": [1, {"b": 5}]}, "a.1.b") == 5
    assert pluralize("kernel", 1) == "1 kernel" and pluralize("kernel", 0) == "0 kernels"
    assert polyN(2.0, [1, 2, 3]) == 11.0

  def test_merge_dicts(self):
    assert merge_dicts([{1: 2}, {3: 4}, {1: 2}]) == {1: 2, 3: 4}
    with pytest.raises(RuntimeError): merge_dicts([{1: 2}, {1: 3}])

  def test_shapes(self):
    assert get_shape([[1, 2], [3, 4]]) == (2, 2) and get_shape(3) == () and get_shape([]) == (0,) and get_shape("ab") == ()
    with pytest.raises(ValueError, match="inhomogeneous"): get_shape([[1, 2], [3]])
    assert strides_for_shape((2, 3, 4)) == (12, 4, 1) and strides_for_shape(()) == () and strides_for_shape((1, 3, 1)) == (0, 1, 0)
    assert flat_to_grouped((1, 2, 3, 4)) == ((3, 4), (1, 2))
    assert resolve_pool_pads(1, 2) == [1, 1, 1, 1] and resolve_pool_pads((1, 2), 2) == [2, 2, 1, 1]
    assert resolve_pool_pads((1, 2, 3, 4), 2) == (1, 2, 3, 4)
    with pytest.raises(ValueError): resolve_pool_pads((1, 2, 3), 2)

class TestIntegers:
  @given(st.integers(-10**6, 10**6), st.integers(-1000, 1000))
  def test_div_mod(self, x, y):
    if y == 0:
      assert cdiv(x, y) == 0 and floordiv(x, y) == 0 and cmod(x, y) == x and floormod(x, y) == x
      return
    assert cdiv(x, y) == math.trunc(x / y) if abs(x) < 2**50 else True
    assert cdiv(x, y) * y + cmod(x, y) == x and (cmod(x, y) == 0 or (cmod(x, y) > 0) == (x > 0)) and abs(cmod(x, y)) < abs(y)
    assert floordiv(x, y) == x // y and floormod(x, y) == x % y
    assert ceildiv(x, y) == -(-x // y)

  def test_rounding(self):
    assert round_up(7, 4) == 8 and round_up(8, 4) == 8 and round_down(7, 4) == 4 and round_down(-7, 4) == -8
    assert ceildiv(7, 2) == 4 and ceildiv(-7, 2) == -3 and ceildiv(7.0, 2) == 4 and isinstance(ceildiv(7.0, 2), int)
    assert [next_power2(x) for x in range(10)] == [1, 1, 2, 4, 4, 8, 8, 8, 8, 16]

  def test_bits(self):
    assert getbits(0b101100, 2, 4) == 0b011 and i2u(8, -1) == 255 and i2u(8, 5) == 5
    assert lo32(2**40 + 5) == 5 and hi32(2**40 + 5) == 2**8 and data64(2**40 + 5) == (256, 5) and data64_le(2**40 + 5) == (5, 256)
    assert to_be32(0x12345678) == 0x78563412 and to_be64(0x0102030405060708) == 0x0807060504030201
    assert pad_bytes(b"abc", 4) == b"abc\x00" and pad_bytes(b"abcd", 4) == b"abcd" and pad_bytes(b"", 4) == b""

class TestStrings:
  def test_colored(self):
    with Context(NO_COLOR=0):
      assert colored("x", "red") == "\x1b[31mx\x1b[0m" and colored("x", "RED", True) == "\x1b[101mx\x1b[0m" and colored("x", None) == "x"
      with pytest.raises(ValueError, match="purple"): colored("x", "purple")
    with Context(NO_COLOR=1): assert colored("x", "red") == "x"

  def test_ansi(self):
    s = "\x1b[31mab\x1b[0m\x1b[K"
    assert ansistrip(s) == "ab" and ansilen(s) == 2 and ansipad("\x1b[31mab\x1b[0m", 4) == "\x1b[31mab\x1b[0m  "

  def test_word_wrap(self):
    assert word_wrap("a" * 10, 4) == "aaaa\naaaa\naa" and word_wrap("short") == "short"
    wrapped = word_wrap("\x1b[31m" + "ab" * 5 + "\x1b[0m", 3)
    assert [ansilen(line) for line in wrapped.split("\n")] == [3, 3, 3, 1]

  def test_names(self):
    assert to_function_name("a b\x1b[31m.c") == "a20b2Ec" and to_function_name("E_4_4n1") == "E_4_4n1"
    assert strip_parens("(a)+(b)") == "(a)+(b)" and strip_parens("((a))") == "(a)" and strip_parens("(a") == "(a" and strip_parens("") == ""

  def test_units(self):
    assert time_to_str(12) == "   12.00s " and time_to_str(0.5) == "  500.00ms" and time_to_str(0.00001) == "   10.00us"
    assert size_to_str(5) == "5 B" and size_to_str(1024) == "1.00 KB" and size_to_str((1 << 21) + 5) == "2.00 MB"
    assert size_to_str(1 << 30) == "1.00 GB"

class TestMisc:
  def test_temp(self):
    assert temp("foo").endswith("/foo") and temp("foo", append_user=True).startswith(temp("foo") + ".")

  def test_platform_flags(self):
    assert OSX == (sys.platform == "darwin") and WIN == (sys.platform == "win32")

  def test_timing(self, capsys):
    with Timing("took "): pass
    assert capsys.readouterr().out.startswith("took ")
    with Timing("x", enabled=False): pass
    assert capsys.readouterr().out == ""

  def test_metadata_counters(self):
    assert str(Metadata("add")) == "add" and str(Metadata("add", True)) == "add bw" and hash(Metadata("x")) == hash("x")
    GlobalCounters.global_ops, GlobalCounters.kernel_count = 5, 2
    GlobalCounters.reset()
    assert GlobalCounters.global_ops == 0 and GlobalCounters.kernel_count == 0

  def test_profile(self):
    assert TracingKey("x").keys == () and TracingKey("x").tb is None or VIZ
    n = len(cpu_events)
    with Context(PROFILE=1):
      with cpu_profile("work") as ev: pass
    assert ev.en is not None and ev.en >= ev.st and len(cpu_events) == n + 1
    with Context(PROFILE=0):
      with cpu_profile("work"): pass
    assert len(cpu_events) == n + 1
    cpu_events.pop()

  def test_select(self):
    assert select_by_name([1, 2, 3], str, "2", "err") == [2] and select_by_name([1, 2], str, "", "err") == [1, 2]
    with pytest.raises(RuntimeError, match="did you mean: 'abc'"): select_by_name(["abc", "xyz"], str, "abd", "no match")
    assert select_first_inited([int, float], "x", None, "3.5") == 3.5
    with pytest.raises(ValueError): select_first_inited([int], "x", None, "a")
    with pytest.raises(ExceptionGroup): select_first_inited([int, int], "x", None, "a")

  def test_count_and_code_pickle(self):
    c = count(3, 2)
    assert next(c) == 3 and next(c) == 5 and next(pickle.loads(pickle.dumps(c))) == 7
    def g(x): return x + 1
    code = pickle.loads(pickle.dumps(g.__code__))
    assert code.co_name == "g" and code.co_code == g.__code__.co_code
    assert pickle.loads(pickle.dumps(math)) is math

  def test_disable_gc(self):
    import gc
    assert gc.isenabled()
    with disable_gc():
      assert not gc.isenabled()
      with disable_gc(): assert not gc.isenabled()
      assert not gc.isenabled()
    assert gc.isenabled()

  def test_tqdm(self, capsys):
    assert list(tqdm(range(5), desc="x")) == list(range(5)) and list(trange(3, disable=True)) == [0, 1, 2]
    with tqdm(total=10, unit_scale=True, unit="B") as t: t.update(5)
    assert "5.00/10.0" in capsys.readouterr().err

  def test_memory(self):
    buf = bytearray(b"abcd")
    arr = from_mv(memoryview(buf))
    arr[0] = b"z"
    assert buf == bytearray(b"zbcd") and bytes(to_mv(mv_address(buf), 4)) == b"zbcd"
    assert flat_mv(memoryview(bytearray(8)).cast("I")).format == "B" and len(flat_mv(memoryview(bytearray(8)).cast("I"))) == 8

@pytest.fixture
def tmp_cachedb(tmp_path, monkeypatch):
  monkeypatch.setattr(helpers, "CACHEDB", str(tmp_path / "sub" / "cache.db"))
  monkeypatch.setattr(helpers, "_db_connection", None)
  monkeypatch.setattr(helpers, "_db_tables", set())
  yield tmp_path / "sub" / "cache.db"
  if helpers._db_connection is not None: helpers._db_connection.close()

class TestDiskcache:
  def test_put_get(self, tmp_cachedb):
    assert diskcache_get("t", "k") is None
    assert diskcache_put("t", "k", {"a": 1}) == {"a": 1} and diskcache_get("t", "k") == {"a": 1}
    assert diskcache_put("t", 5, [1]) == [1] and diskcache_get("t", 5) == [1]
    assert diskcache_put("t2", {"x": 1, "y": "b"}, (1, 2)) == (1, 2) and diskcache_get("t2", {"x": 1, "y": "b"}) == (1, 2)
    assert diskcache_get("t2", {"x": 2, "y": "b"}) is None
    assert tmp_cachedb.exists()
    diskcache_put("t", "k", "overwritten")
    assert diskcache_get("t", "k") == "overwritten"
    val = {"s": "x", "i": -(2**70), "f": 1.5, "b": b"\x00\xff", "n": None, "t": (1, [2, (3,)]), 7: True, (1, "a"): False}
    assert diskcache_put("t", "plain", val) == val and diskcache_get("t", "plain") == val
    assert type(diskcache_get("t", "plain")["t"]) is tuple and diskcache_get("t", 5) == [1]
    assert diskcache_put("t", "raw", b"\x7fELF") == b"\x7fELF" and diskcache_get("t", "raw") == b"\x7fELF"

  def test_cachelevel_zero(self, tmp_cachedb):
    with Context(CACHELEVEL=0):
      assert diskcache_put("t", "k", 1) == 1 and diskcache_get("t", "k") is None
      assert not tmp_cachedb.exists()  # the database is not even opened
    assert diskcache_get("t", "k") is None

  def test_clear(self, tmp_cachedb):
    diskcache_put("t", "k", 1)
    diskcache_clear()
    assert diskcache_get("t", "k") is None
    diskcache_put("t", "k", 2)
    assert diskcache_get("t", "k") == 2

  def test_decorator(self, tmp_cachedb):
    calls = []
    @diskcache
    def sq(x):
      calls.append(x)
      return x * x
    assert sq(4) == 16 and sq(4) == 16 and calls == [4]

  def test_bad_key(self, tmp_cachedb):
    with pytest.raises(TypeError): diskcache_put("t", 1.5, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError): diskcache_put("t", {"a b": 1}, 1)
    with pytest.raises(ValueError): diskcache_put("t'; DROP TABLE x; --", "k", 1)

  def test_values_must_be_plain_data(self, tmp_cachedb):
    # anything that would need pickle to come back is refused when it is stored, never silently lost
    with pytest.raises(TypeError, match="plain data"): diskcache_put("t", "k", {1, 2})
    with pytest.raises(TypeError, match="plain data"): diskcache_put("t", "k", [object()])
    assert diskcache_get("t", "k") is None

  def test_default_path(self):
    # a bare package module stands in for tinygrad/__init__ so only helpers is imported
    code = ("import sys, types; pkg = types.ModuleType('tinygrad'); pkg.__path__ = [sys.argv[1]]; sys.modules['tinygrad'] = pkg; "
            "import tinygrad.helpers as h; print(h.CACHEDB)")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(helpers.__file__)], capture_output=True, text=True, check=True,
                         env={**os.environ, "XDG_CACHE_HOME": "/tmp/xdg_test_dir"}).stdout.strip()
    if "CACHEDB" not in os.environ: assert out.startswith("/tmp/xdg_test_dir/tinygrad/")

@pytest.fixture
def http_dir(tmp_path, monkeypatch):
  serve = tmp_path / "serve"
  serve.mkdir()
  monkeypatch.setattr(helpers, "cache_dir", str(tmp_path / "cache"))
  class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args): pass
  server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(serve)))
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  yield serve, f"http://127.0.0.1:{server.server_address[1]}"
  server.shutdown()
  server.server_close()

class TestFetch:
  def test_local_path(self):
    assert fetch("/some/abs/path") == pathlib.Path("/some/abs/path")

  def test_download_and_cache(self, http_dir):
    serve, base = http_dir
    (serve / "a.bin").write_bytes(b"hello" * 1000)
    p = fetch(f"{base}/a.bin")
    assert p.read_bytes() == b"hello" * 1000 and p.is_relative_to(helpers.cache_dir)
    (serve / "a.bin").write_bytes(b"changed")
    assert fetch(f"{base}/a.bin").read_bytes() == b"hello" * 1000  # served from the cache
    assert fetch(f"{base}/a.bin", allow_caching=False).read_bytes() == b"changed"
    assert fetch(f"{base}/a.bin", name="named.bin", subdir="sd").parent.name == "sd"

  def test_sha256(self, http_dir):
    serve, base = http_dir
    (serve / "b.bin").write_bytes(b"data")
    good = hashlib.sha256(b"data").hexdigest()
    assert fetch(f"{base}/b.bin", sha256=good).read_bytes() == b"data"
    with pytest.raises(RuntimeError, match="sha mismatch"): fetch(f"{base}/b.bin", name="other.bin", sha256="0" * 64)

  def test_gunzip_and_extract(self, http_dir):
    serve, base = http_dir
    (serve / "c.gz").write_bytes(gzip.compress(b"unzipped"))
    assert fetch(f"{base}/c.gz", gunzip=True).read_bytes() == b"unzipped"
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w") as t:
      info = tarfile.TarInfo("inner.txt")
      info.size = 5
      t.addfile(info, io.BytesIO(b"inner"))
    (serve / "d.tar").write_bytes(tar_bytes.getvalue())
    d = fetch(f"{base}/d.tar", extract=True)
    assert d.is_dir() and (d / "inner.txt").read_bytes() == b"inner"

def test_map_on_threads_keeps_order_and_raises_after_all_threads_end():
  import threading
  import time
  from tinygrad.helpers import map_on_threads
  names: list[str] = []
  def work(x):
    names.append(threading.current_thread().name)
    return x * x
  assert map_on_threads(work, [1, 2, 3, 4], "t") == [1, 4, 9, 16]
  assert names.count(threading.current_thread().name) == 1 and sorted(n for n in names if n.startswith("t-")) == ["t-1", "t-2", "t-3"]
  finished: list[int] = []
  def fail_first(x):
    if x == 0: raise ValueError("item 0")
    time.sleep(0.05)
    finished.append(x)
  with pytest.raises(ValueError, match="item 0"): map_on_threads(fail_first, [0, 1, 2], "t")
  assert sorted(finished) == [1, 2]   # the others ran to the end before the error was raised

def test_nvrtc_compile_many_returns_each_source_its_binary(monkeypatch):
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler
  cc = CUDACompiler.__new__(CUDACompiler)
  monkeypatch.setattr(cc, "compile", lambda src: src.encode() + b"!", raising=False)
  srcs = [f"k{i}" for i in range(7)]
  assert cc.compile_many(srcs, jobs=3) == [s.encode() + b"!" for s in srcs]
