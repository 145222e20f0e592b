# The scheduler's buffer-placement rules (schedule/rangeify.py BUFFER_RULES): each fires on a program built for it, and every root of a
# plan names the rule that made it. Schedules only, on the NULL device.
import pytest
from tinygrad import Tensor, Context, dtypes
from tinygrad import schedule
from tinygrad.uop.ops import Ops, GroupOp
from tinygrad.schedule.rangeify import BUFFER_RULES, Decision

E = Tensor.empty

def _plans(monkeypatch, *targets:Tensor) -> list:
  plans = []
  plan_buffers = schedule.plan_buffers
  def record(todo, is_realized):
    plans.append(plan := plan_buffers(todo, is_realized))
    return plan
  monkeypatch.setattr(schedule, "plan_buffers", record)
  with Context(SCACHE=0): Tensor.schedule(*targets)
  return plans

def _adamw_moments():
  a, b, m, v = E(64, 32), E(32, 48), E(64, 48).realize(), E(64, 48).realize()
  g = a @ b
  return m.assign(m * 0.9 + g), v.assign(v * 0.99 + g * g)

def _two_sums_joined():
  x, y = E(16, 32), E(16, 32)
  return (E(16, 32) * (x.sum(1, keepdim=True) + y.sum(1, keepdim=True)).expand(16, 32).sum(0, keepdim=True),)

def _rotated(x:Tensor) -> Tensor:
  """x's halves swapped, one negated, added to x: a rotary embedding's two reads of each element."""
  a, b = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
  return (-b).cat(a, dim=-1) + x

# rule -> (a program it decides, the op kinds of the nodes it decides there)
PROGRAMS = {
  "inline_gather": (lambda: (E(8, 100).sparse_categorical_crossentropy(E(8, dtype=dtypes.int32)),), {Ops.REDUCE}),
  "explicit_buffer": (lambda: ((E(16) + 1).contiguous() * 2,), {Ops.CONTIGUOUS}),
  "nested_reduce": (lambda: (E(16, 16).sum(1, keepdim=True) + E(16, 16),), {Ops.REDUCE}),
  "shared_big_reduce": (_adamw_moments, {Ops.REDUCE}),
  "big_reduce_read_twice": (lambda: (_rotated(E(1, 64) @ E(32, 64).T),), {Ops.REDUCE}),
  "recomputed_many_reads": (lambda: ((E(64, 64) * E(64, 64) + E(64, 64) * E(64, 64) + E(64, 64)) @ E(64, 64),), GroupOp.Elementwise),
  "recomputed_many_ops": (lambda: (E(64, 64).gelu() @ E(64, 64),), GroupOp.Elementwise),
  "recomputed_often": (lambda: ((((E(128, 128) * 2 + 1) * 3) + 4) @ E(128, 256),), GroupOp.Elementwise),
  "owns_reduce_in_loop": (lambda: (((E(32, 32) @ E(32, 32)) * E(32, 32) + E(32, 32)) @ E(32, 32),), GroupOp.Elementwise),
  "reduces_joined": (_two_sums_joined, GroupOp.Elementwise),
}

def test_rule_names_list_the_table_in_order():
  assert [r.name for r in BUFFER_RULES] == ["inline_gather", "explicit_buffer", "nested_reduce", "shared_big_reduce", "big_reduce_read_twice",
                                            "recomputed_many_reads",
                                            "recomputed_many_ops", "recomputed_often", "owns_reduce_in_loop", "reduces_joined"]
  assert all(r.holds.__doc__ for r in BUFFER_RULES), "each rule says why"
  assert [r.name for r in BUFFER_RULES if r.decision is Decision.INLINE] == ["inline_gather"]

@pytest.mark.parametrize("rule", list(PROGRAMS))
def test_each_rule_fires_on_its_program(monkeypatch, rule):
  build, kinds = PROGRAMS[rule]
  with Context(DEV="NULL"): plans = _plans(monkeypatch, *build())
  decided = [u for p in plans for u, why in p.why.items() if why == rule]
  assert decided, f"{rule} placed nothing: {[sorted(set(p.why.values())) for p in plans]}"
  assert all(u.op in kinds for u in decided), [u.op for u in decided]
  for p in plans:
    inline_rule = next(r for r in BUFFER_RULES if r.name == rule).decision is Decision.INLINE
    assert all((u in p.inline) == inline_rule for u, why in p.why.items() if why == rule)

def test_every_root_says_why(monkeypatch):
  with Context(DEV="NULL"):
    x, w = E(8, 3, 16, 16), E(4, 3, 3, 3)
    w.requires_grad = True
    loss = x.conv2d(w, padding=1).relu().mean()
    loss.backward()
    plans = _plans(monkeypatch, loss, w.grad, (E(16) + 1).to("PYTHON"))
  names = {r.name for r in BUFFER_RULES} | {"target", "copy_source"}
  for p in plans:
    assert set(p.why) == set(p.roots) | p.inline
    assert set(p.why.values()) <= names
  assert "copy_source" in {why for p in plans for why in p.why.values()}

@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16])
def test_rows_gathered_under_a_matmul_are_inlined(monkeypatch, dtype):
  # experts' weights picked per token (w[idx]) inside the matmul that uses them: the one-hot mask is broadcast over each row's elements
  # (and a half tensor's selection is summed in float), and the gather still folds into loads there: no copy of the picked rows
  with Context(DEV="NULL"):
    x, w, idx = E(2, 1, 64, dtype=dtype), E(8, 32, 64, dtype=dtype), E(2, dtype=dtypes.int32)
    plans = _plans(monkeypatch, x @ w[idx].transpose(-1, -2))
  assert [sorted(p.why.values()) for p in plans] == [["inline_gather", "target"]]

def test_index_computed_from_bytes_stays_with_its_gather(monkeypatch):
  # a quantized weight's packed 6-bit scales looked up in a small float table and broadcast over 16 lanes: the index (loaded bytes,
  # masked) is computed once per looked-up scale, since the one-hot folds into one load, not once per table entry: no buffer of indices
  with Context(DEV="NULL"):
    codes, table, lanes = E(4096, 8, dtype=dtypes.uint8), E(64), E(4096, 8, 16)
    plans = _plans(monkeypatch, (table[(codes & 63).cast(dtypes.int32)].unsqueeze(-1) * lanes).sum((-2, -1)))
  assert [sorted(p.why.values()) for p in plans] == [["inline_gather", "target"]]

def test_embedding_feeding_a_matmul_is_gathered_once(monkeypatch):
  # a token's embedding row feeding a matmul (recomputed for each of its 1024 outputs): the lookup is a kernel of its own (one row,
  # its sum folded into loads) rather than its one-hot summand over the whole table getting a buffer (vocab x dim written per step)
  from tinygrad import nn
  with Context(DEV="NULL"):
    emb, w = nn.Embedding(4096, 256), E(1024, 256)
    emb.weight = (E(4096, 256, dtype=dtypes.int8).cast(dtypes.float32) * 0.5)
    plans = _plans(monkeypatch, emb(Tensor([[5]], dtype=dtypes.int32)) @ w.T)
  roots = {u: why for p in plans for u, why in p.why.items() if u in p.roots}
  assert sorted(roots.values()) == ["nested_reduce", "target"]
  assert all(u.op is not Ops.REDUCE or u.shape == (1, 1, 1, 256) for u in roots)

def test_reshaped_targets_take_their_sources_buffer():
  # a reshape keeps the elements in order: realizing one is no kernel of its own (tinygrad 0.14's counts)
  with Context(DEV="NULL"):
    a = E(4, 4).contiguous().realize()
    assert len(a.reshape(16).schedule()[0]) == 0
    assert len((a + 1).reshape(2, 8).schedule()[0]) == 1
    assert [si.ast.op for si in a.to("NULL:1").reshape(16).schedule()[0]] == [Ops.COPY]
    b = a + 2
    c = b.reshape(16)
    assert len(Tensor.schedule(b, c)[0]) == 1
    Tensor.realize(b, c)
    assert c.uop.base.op is Ops.BUFFER and c.uop.base is b.uop.base
    # reshapes of an assign's result: its storage, written by the assign's kernel alone
    d = E(2, 4).contiguous().realize()
    d.assign(d + 1)
    assert len(d.reshape(8).reshape(4, 2).schedule()[0]) == 1
