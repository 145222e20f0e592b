"""schedule/multi.py's lowering of sharded graphs to per-device graphs: what it costs when a training loop lowers graph after graph
built on the same sharded values."""
from tinygrad import Tensor
import tinygrad.schedule.multi as multi

D2 = ("NULL:0", "NULL:1")

def test_lowering_again_does_not_walk_what_was_lowered(monkeypatch):
  # a sharded value whose shards are long graphs the lowering leaves as they are (a parameter's shards after many updates)
  a = Tensor.empty(4, 4, device=D2[0])
  for _ in range(200): a = a + 1
  s = a.shard(D2, 0)
  multi.lower_uop((s * 2).uop)
  visited: list = []
  def counting(x):
    visited.append(x)
    return "_multi_lowered" not in x.__dict__
  monkeypatch.setattr(multi, "_not_lowered", counting)
  low = multi.lower_uop((s * 3).uop)
  assert low.device == tuple(multi.lower_uop(s.uop).device)
  # the new multiply, its constant and the constant's movement ops; not the 200 adds below the shards again
  assert 0 < len(visited) < 20, len(visited)
