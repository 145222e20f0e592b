# The GGUF transformer (tinygrad.llm.model) on tiny random models of every supported architecture and weight type, written with the
# gguf package: logits of chunked prefill and of decode steps, and greedy tokens, against a float64 numpy forward pass of the same
# file (read back by gguf's own reader and dequantizer); the JITs compile nothing once warm; sampling; errors.
import numpy as np
import pytest
from tinygrad import Device, GlobalCounters
from tinygrad.llm.model import Transformer
from tests.helpers.gguf_models import write_model, NumpyModel, GGML_TYPES

pytestmark = pytest.mark.cpu

PROMPT = [5, 70, 33, 100, 2, 9, 11, 200, 47, 3, 64]      # 11 tokens: prefill chunks of 4, 4, 3
CASES = [("llama", t) for t in GGML_TYPES] + [(a, t) for a in ("qwen2", "qwen3", "qwen3moe", "olmoe") for t in ("F32", "F16", "Q8_0", "Q4_K")]

def _model(tmp_path, arch="llama", ggml_type="F32", max_context=32, **shape) -> tuple[Transformer, NumpyModel]:
  path = write_model(tmp_path / f"{arch}-{ggml_type}.gguf", arch, ggml_type, **shape)
  return Transformer.from_gguf(path, max_context, prefill_chunk=4)[0], NumpyModel(path)

def _check_logits(m:Transformer, ref:NumpyModel, tokens:list[int], steps:list[int]) -> None:
  want, pos = ref.logits(tokens), 0
  for n in steps:
    got = m.logits(tokens[pos:pos+n], pos)
    np.testing.assert_allclose(got, want[pos + n - 1], rtol=2e-4, atol=2e-4, err_msg=f"logits after positions {pos}..{pos + n - 1}")
    pos += n

@pytest.mark.slow
@pytest.mark.parametrize("arch,ggml_type", CASES)
def test_logits_and_greedy_match_numpy(tmp_path, arch, ggml_type):
  m, ref = _model(tmp_path, arch, ggml_type)
  want = ref.greedy(PROMPT, 5)
  gen = m.generate(PROMPT)
  assert [next(gen) for _ in range(5)] == want
  gen.close()
  # prefill in chunks, then one token at a time, from position 0 again
  _check_logits(m, ref, PROMPT + want, [4, 4, 3, 1, 1, 1, 1])

@pytest.mark.parametrize("shape", [dict(tied=True), dict(rope_freqs=True), dict(rope_scaling_linear=4.0), dict(n_kv_heads=4),
                                   dict(n_kv_heads=1, head_dim=32), dict(rope_theta=500000.0)],
                         ids=["tied", "rope_freqs", "rope_linear", "mha", "mqa_head_dim", "theta"])
def test_llama_variants_match_numpy(tmp_path, shape):
  m, ref = _model(tmp_path, "llama", "F32", **shape)
  _check_logits(m, ref, PROMPT + [7, 8], [4, 4, 3, 1, 1])

def test_olmoe_without_normalized_topk_and_qwen3moe_with(tmp_path):
  # the two MoE archs differ in renormalizing the top-k router weights; a model with one expert per token tells them apart
  for arch in ("olmoe", "qwen3moe"):
    m, ref = _model(tmp_path, arch, "F32", n_experts=4, n_experts_used=1)
    assert m.config.norm_topk == (arch == "qwen3moe")
    _check_logits(m, ref, PROMPT, [4, 4, 3])

def test_prefix_reuse_and_context_end(tmp_path):
  m, ref = _model(tmp_path, max_context=16)
  first = list(m.generate(PROMPT))               # runs until the context is full
  assert len(PROMPT) + len(first) == 16 and first == ref.greedy(PROMPT, len(first))
  # a prompt sharing a prefix with the cached tokens reuses it, and still matches a fresh run
  other = PROMPT[:6] + [1, 2]
  gen = m.generate(other)
  assert [next(gen), next(gen)] == ref.greedy(other, 2)
  gen.close()
  # a prompt filling all but one position gets exactly one token
  assert list(m.generate(list(range(15)))) == ref.greedy(list(range(15)), 1)

@pytest.mark.parametrize("ggml_type", ["Q8_0", "Q4_K", "Q4_1"])
def test_projections_read_blocks_where_the_type_has_block_dot(tmp_path, ggml_type):
  # every projection of a Q8_0 or Q4_K model (the tied output one too) goes through the type's block_dot; Q4_1 has none: dequantized
  # matmuls
  m, ref = _model(tmp_path, "llama", ggml_type, tied=True)
  layers = [m.output] + [getattr(b, n) for b in m.blk for n in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")]
  assert all((layer.quantized is not None) == (ggml_type != "Q4_1") for layer in layers)
  _check_logits(m, ref, PROMPT + [7], [4, 4, 3, 1])

@pytest.mark.parametrize("ggml_type", ["Q8_0", "Q4_K", "Q6_K"])
def test_decode_step_reads_each_weight_once(tmp_path, ggml_type):
  # one decode step's memory traffic is about the file's weights (the embedding table's one row aside, activations and the cache on
  # top): a projection computed in two kernels (fused into the next norm's sum and stored for the residual) would read its weight twice.
  # The activations, the cache and x's run sums (Q4_K's mins) take under 128 KiB here; a gate or up weight read twice adds 73 KiB or more
  import gguf
  path = write_model(tmp_path / "m.gguf", "llama", ggml_type, dim=256, hidden=512)
  tensors = gguf.GGUFReader(str(path)).tensors
  weight_bytes = sum(int(t.n_bytes) for t in tensors)
  # a Q4_K/Q5_K decode GEMV looks its mins up in tables made from its x (quants.py _k_min_dot): 32 bytes per element of x, written
  # once per x (q, k and v share theirs, as gate and up do) and read by each weight's kernel
  k_in = {t.name: int(t.shape[0]) for t in tensors if t.tensor_type.name in ("Q4_K", "Q5_K")}
  min_tables = 32 * sum(n * (1 + (not name.endswith(("attn_k.weight", "attn_v.weight", "ffn_up.weight")))) for name, n in k_in.items())
  m = Transformer.from_gguf(path, 32, prefill_chunk=4)[0]
  m.logits(PROMPT[:4], 0)
  for pos in range(4, 8): m.logits([7], pos)
  GlobalCounters.reset()
  m.logits([7], 8)
  assert GlobalCounters.global_mem <= weight_bytes + 128 * 1024 + min_tables, (GlobalCounters.global_mem, weight_bytes, min_tables)

def test_decode_compiles_nothing_after_warmup(tmp_path):
  m, _ = _model(tmp_path, "llama", "Q8_0")
  m.warmup()
  compiler = Device[Device.DEFAULT].compiler
  before = dict(compiler.stats)
  gen = m.generate(PROMPT)
  toks = [next(gen) for _ in range(6)]
  gen.close()
  assert dict(compiler.stats) == before, "a prefill or decode step compiled (or looked up) a kernel after warmup"
  assert m._decode_jit.captured is not None and m._prefill_jit.captured is not None
  assert len(toks) == 6

def test_sampling(tmp_path):
  m, ref = _model(tmp_path)
  take = lambda n, **kw: [t for _, t in zip(range(n), m.generate(PROMPT, **kw))]
  greedy = ref.greedy(PROMPT, 6)
  assert take(6, temperature=0.8, top_k=1) == greedy
  assert take(6, temperature=1.0, top_p=1e-6, seed=3) == greedy      # only the most likely token reaches any top_p
  a, b, c = take(8, temperature=1.5, seed=1), take(8, temperature=1.5, seed=1), take(8, temperature=1.5, seed=2)
  assert a == b and a != c
  # top_k restricts each draw to the k most likely tokens of that step
  drawn = take(8, temperature=2.0, top_k=3, seed=5)
  logits = ref.logits(PROMPT + drawn)
  for i, t in enumerate(drawn): assert t in np.argsort(-logits[len(PROMPT) - 1 + i])[:3]

def test_sampling_follows_the_distribution(tmp_path):
  # many first tokens at temperature 1: their frequencies follow softmax(logits) (a chi-square-free check on the top tokens)
  m, ref = _model(tmp_path)
  p = np.exp((z := ref.logits(PROMPT)[-1]) - z.max())
  p /= p.sum()
  counts = np.bincount([next(m.generate(PROMPT, temperature=1.0, seed=s)) for s in range(400)], minlength=len(p))
  top = np.argsort(-p)[:3]
  np.testing.assert_allclose(counts[top] / 400, p[top], atol=0.08)

def test_errors(tmp_path):
  m, _ = _model(tmp_path, max_context=16)
  for bad, msg in (([], "non-empty"), (list(range(16)), "16 tokens"), ([1, 10**6], "not an id"), ([1, -1], "not an id")):
    with pytest.raises(ValueError, match=msg): m.generate(bad)
  for kw in (dict(temperature=-1.0), dict(temperature=float("nan")), dict(top_k=-2), dict(top_p=0.0), dict(top_p=1.5)):
    with pytest.raises(ValueError): m.generate([1, 2], **kw)
  with pytest.raises(ValueError, match="max_context"): Transformer.from_gguf(write_model(tmp_path / "a.gguf"), max_context=1)

def test_unsupported_architecture_and_type(tmp_path, monkeypatch):
  import gguf
  from tinygrad.llm import gguf as tg_gguf
  path = tmp_path / "gpt2.gguf"
  w = gguf.GGUFWriter(str(path), "gpt2")
  w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
  w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
  # refused from the headers: no tensor's bytes are touched
  def no_reads(*args): raise AssertionError("a weight was read before the architecture was checked")
  with monkeypatch.context() as m:
    m.setattr(tg_gguf._Stored, "packed", no_reads)
    with pytest.raises(ValueError, match=r"architecture 'gpt2' is not supported \(supported: llama, qwen2, qwen3, qwen3moe, olmoe\)"):
      Transformer.from_gguf(path)
  path = tmp_path / "tq.gguf"
  w = gguf.GGUFWriter(str(path), "llama")
  w.add_tensor("token_embd.weight", np.zeros((4, 66), np.uint8), raw_dtype=gguf.GGMLQuantizationType.TQ2_0)
  w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
  with pytest.raises(ValueError, match="not supported"): Transformer.from_gguf(path)

def test_missing_tensor_is_named(tmp_path):
  import gguf
  src = gguf.GGUFReader(str(write_model(tmp_path / "full.gguf")))
  path = tmp_path / "cut.gguf"
  w = gguf.GGUFWriter(str(path), "llama")
  for f in src.fields.values():
    if f.name.startswith("GGUF.") or f.name == "general.architecture": continue
    v = f.contents()
    if isinstance(v, list): w.add_array(f.name, v)
    elif isinstance(v, str): w.add_string(f.name, v)
    elif isinstance(v, float): w.add_float32(f.name, v)
    else: w.add_uint32(f.name, v)
  for t in src.tensors:
    if t.name != "blk.1.ffn_up.weight": w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
  w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
  with pytest.raises(ValueError, match=r"blk\.1\.ffn_up\.weight"): Transformer.from_gguf(path)

def test_debug1_decode_steps_replay_after_warmup(tmp_path, capsys):
  from tinygrad.helpers import Context
  m, _ = _model(tmp_path)
  m.warmup()
  gen = m.generate(PROMPT)
  next(gen)
  capsys.readouterr()
  with Context(DEBUG=1): next(gen), next(gen)
  out = capsys.readouterr().out
  assert out.count("TinyJit replayed") == 2 and "schedule cache miss" not in out
  gen.close()

def test_loads_from_a_tensor_of_the_file(tmp_path):
  from tinygrad import Tensor
  path = write_model(tmp_path / "q.gguf", "qwen2", "Q8_0")
  m, kv = Transformer.from_gguf(Tensor(np.frombuffer(path.read_bytes(), np.uint8)), 32)
  assert kv["general.architecture"] == "qwen2" and m.max_context == 32
  prompt = [1, 2, 3]
  assert [t for _, t in zip(range(4), m.generate(prompt))] == NumpyModel(path).greedy(prompt, 4) and prompt == [1, 2, 3]

def test_router_top_k_ties_to_the_lower_index():
  from tinygrad import Tensor
  from tinygrad.llm.model import _top_k
  x = np.array([[[0.1, 0.7, 0.3, 0.7, 0.0, 0.3]], [[5.0, -1.0, 5.0, 5.0, 2.0, -3.0]]], np.float32)
  vals, idx = _top_k(Tensor(x), 3)
  want = np.argsort(-x, axis=-1, kind="stable")[..., :3]
  np.testing.assert_equal(idx.numpy(), want)
  np.testing.assert_allclose(vals.numpy(), np.take_along_axis(x, want, -1))

def test_prefill_rows_are_the_chunk():
  # a prefill chunk's T tokens (a bound Variable) reach the projections as the chunk's most rows, zeros after the T: their GEMMs have
  # a known row count (a register tile over the rows: each decoded weight element serves several), cut back to T after
  from tinygrad import UOp, Tensor
  from tinygrad.llm.model import _rows
  toks = UOp.variable("toks", 1, 32).bind(5)
  x = Tensor.arange(32 * 3, dtype="float32").reshape(1, 32, 3).contiguous().realize()[:, :toks]
  padded = _rows(x)
  assert padded.shape == (1, 32, 3)
  got = padded.contiguous().numpy()
  ref = np.zeros((1, 32, 3), np.float32)
  ref[:, :5] = np.arange(32 * 3, dtype=np.float32).reshape(1, 32, 3)[:, :5]
  np.testing.assert_array_equal(got, ref)
  assert _rows(Tensor.ones(1, 4, 3)).shape == (1, 4, 3)
