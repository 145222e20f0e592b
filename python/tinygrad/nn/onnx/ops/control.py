"""Control flow (If, Loop, Scan) and the sequence and optional types. A sequence is a Python list of Tensors, an empty optional is None.
Conditions and trip counts are read on the host: the graph that runs depends on them."""
from __future__ import annotations
from typing import Any
from tinygrad.dtype import dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op
from tinygrad.nn.onnx.ops.common import to_python

def run_subgraph(body:Any, values:list[Any]) -> list[Any]:
  out = body(dict(zip(body.graph_inputs, values)))
  return [out[name] for name in body.graph_outputs]

def _scalar(t:Any) -> Any:
  v = to_python(t)
  while isinstance(v, list): v = v[0]
  return v

def _truth(t:Any) -> bool: return bool(_scalar(t))

@onnx_op("If", 1)
def If(cond:Tensor, else_branch:Any, then_branch:Any) -> tuple[Any, ...]:
  return tuple(run_subgraph(then_branch if _truth(cond) else else_branch, []))

@onnx_op("Loop", 1)
def Loop(max_trip_count:Tensor|None, cond:Tensor|None, *carried:Any, body:Any) -> tuple[Any, ...]:
  trips = int(_scalar(max_trip_count)) if max_trip_count is not None else None
  keep_going = _truth(cond) if cond is not None else True
  state, scans, i = list(carried), [], 0
  n_carried = len(carried)
  while keep_going and (trips is None or i < trips):
    out = run_subgraph(body, [Tensor(i, dtype=dtypes.int64), Tensor(keep_going), *state])
    keep_going, state = _truth(out[0]), out[1:1 + n_carried]
    scans.append(out[1 + n_carried:])
    i += 1
  n_scan = len(body.graph_outputs) - 1 - n_carried
  stacked = [Tensor.stack(*[s[k] for s in scans]) if scans else Tensor.zeros(0) for k in range(n_scan)]
  return tuple(state) + tuple(stacked)

@onnx_op("Scan", 9)
def Scan(*inputs:Tensor, body:Any, num_scan_inputs:int, scan_input_axes:list[int]|None=None, scan_input_directions:list[int]|None=None,
         scan_output_axes:list[int]|None=None, scan_output_directions:list[int]|None=None) -> tuple[Tensor, ...]:
  n_state = len(inputs) - num_scan_inputs
  state, xs = list(inputs[:n_state]), inputs[n_state:]
  in_axes = [a + x.ndim if a < 0 else a for a, x in zip(scan_input_axes or [0] * len(xs), xs)]
  in_dirs = scan_input_directions or [0] * len(xs)
  steps = xs[0].shape[in_axes[0]]
  outs: list[list[Tensor]] = []
  for t in range(steps):
    slices = []
    for x, a, reverse in zip(xs, in_axes, in_dirs):
      k = steps - 1 - t if reverse else t
      slices.append(x.shrink(tuple((k, k + 1) if i == a else (0, n) for i, n in enumerate(x.shape))).squeeze(a))
    out = run_subgraph(body, state + slices)
    state, ys = out[:n_state], out[n_state:]
    outs.append(ys)
  n_out = len(body.graph_outputs) - n_state
  out_dirs = scan_output_directions or [0] * n_out
  results = []
  for k in range(n_out):
    ys = [o[k] for o in outs]
    if out_dirs[k]: ys = ys[::-1]
    y = Tensor.stack(*ys)
    axis = (scan_output_axes or [0] * n_out)[k]
    axis = axis + y.ndim if axis < 0 else axis
    results.append(y.permute(list(range(1, axis + 1)) + [0] + list(range(axis + 1, y.ndim))) if axis else y)
  return tuple(state) + tuple(results)

# ***** sequences *****

onnx_op("SequenceEmpty", 11)(lambda dtype=1: [])
onnx_op("SequenceConstruct", 11)(lambda *xs: list(xs))
onnx_op("SequenceLength", 11)(lambda seq: Tensor(len(seq), dtype=dtypes.int64))

def _position(pos:Tensor|None, n:int, default:int) -> int:
  p = int(_scalar(pos)) if pos is not None else default
  return p + n if p < 0 else p

onnx_op("SequenceAt", 11)(lambda seq, position: seq[_position(position, len(seq), 0)])

@onnx_op("SequenceInsert", 11)
def SequenceInsert(seq:list[Tensor], tensor:Tensor, position:Tensor|None=None) -> list[Tensor]:
  out = list(seq)
  out.insert(_position(position, len(seq), len(seq)), tensor)
  return out

@onnx_op("SequenceErase", 11)
def SequenceErase(seq:list[Tensor], position:Tensor|None=None) -> list[Tensor]:
  out = list(seq)
  del out[_position(position, len(seq), len(seq) - 1)]
  return out

@onnx_op("SplitToSequence", 11)
def SplitToSequence(x:Tensor, split:Tensor|None=None, axis:int=0, keepdims:int=1) -> list[Tensor]:
  axis = axis + x.ndim if axis < 0 else axis
  if split is None:
    parts = list(x.split(1, dim=axis))
    return parts if keepdims else [p.squeeze(axis) for p in parts]
  sizes = to_python(split)
  if isinstance(sizes, list): return list(x.split(sizes, dim=axis))
  return list(x.split(int(sizes), dim=axis))

@onnx_op("ConcatFromSequence", 11)
def ConcatFromSequence(seq:list[Tensor], axis:int, new_axis:int=0) -> Tensor:
  return Tensor.stack(*seq, dim=axis) if new_axis else Tensor.cat(*seq, dim=axis)

@onnx_op("SequenceMap", 17)
def SequenceMap(seq:list[Tensor], *more:Any, body:Any) -> tuple[list[Tensor], ...]:
  results = [run_subgraph(body, [seq[i]] + [m[i] if isinstance(m, list) else m for m in more]) for i in range(len(seq))]
  return tuple([r[k] for r in results] for k in range(len(body.graph_outputs)))

# ***** optionals *****

onnx_op("Optional", 15)(lambda input=None, type=None: input)  # noqa: A002
onnx_op("OptionalHasElement", 15)(lambda input=None: Tensor(input is not None))  # noqa: A002

@onnx_op("OptionalGetElement", 15)
def OptionalGetElement(input:Any=None) -> Any:  # noqa: A002
  if input is None: raise ValueError("OptionalGetElement: the optional is empty")
  return input


@onnx_op("Scan", 8)
def Scan_8(sequence_lens:Tensor|None, *inputs:Tensor, body:Any, num_scan_inputs:int, directions:list[int]|None=None) -> tuple[Tensor, ...]:
  # opset 8 scans every batch entry (axis 0) along axis 1: Scan 9 once per entry
  if sequence_lens is not None: raise NotImplementedError("Scan 8: sequence_lens is not supported")
  per = [Scan(*[x[b] for x in inputs], body=body, num_scan_inputs=num_scan_inputs, scan_input_directions=directions)
         for b in range(inputs[0].shape[0])]
  return tuple(Tensor.stack(*[p[k] for p in per]) for k in range(len(per[0])))
