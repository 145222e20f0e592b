"""OnnxRunner: a model's graph run node by node as Tensor operations (so it fuses, runs on every device and differentiates)."""
from __future__ import annotations
import collections
import dataclasses
import inspect
import pathlib
from typing import Any, Callable
import numpy as np
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import getenv, prod
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import Domain, OpSetId, select_op
from tinygrad.nn.onnx.model import load_model, dtype_from_onnx, tensor_from_proto, array_to_value, import_onnx
from tinygrad.nn.onnx.ops.common import known_host_values
from tinygrad.engine.realize import capturing
import tinygrad.nn.onnx.ops  # noqa: F401  (registers the operators)

@dataclasses.dataclass(frozen=True)
class OnnxValue:
  """A graph input's or output's type: shape (ints, or strings for symbolic dim_params, None where unknown), dtype (None for
  strings), and whether it is a sequence or an optional."""
  shape: tuple[int|str|None, ...]|None
  dtype: DType|None
  is_optional: bool = False
  is_sequence: bool = False

@dataclasses.dataclass(frozen=True)
class OnnxNode:
  num: int
  name: str
  op: str
  opset_id: OpSetId
  inputs: tuple[str, ...]
  outputs: tuple[str, ...]
  opts: dict[str, Any]
  def __str__(self): return f"node {self.num} {self.name!r} ({self.op})" if self.name else f"node {self.num} ({self.op})"

def _value_type(type_proto:Any) -> OnnxValue:
  kind = type_proto.WhichOneof("value")
  if kind == "tensor_type":
    tt = type_proto.tensor_type
    shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim) if tt.HasField("shape") else None
    return OnnxValue(shape, dtype_from_onnx(tt.elem_type))
  if kind == "sequence_type": return dataclasses.replace(_value_type(type_proto.sequence_type.elem_type), is_sequence=True)
  if kind == "optional_type": return dataclasses.replace(_value_type(type_proto.optional_type.elem_type), is_optional=True)
  if kind is None: return OnnxValue(None, None)   # left unspecified (allowed for subgraph inputs)
  raise NotImplementedError(f"ONNX value type {kind} is not supported")

_KNOWN_DOMAINS = {"", *(d.value for d in Domain)}

# Static values are those fixed by the graph's constants and its inputs' shapes (a Reshape's target shape, a Range's limit from
# Shape/Gather): the small ones are read to the host once per input signature and reused, so later calls (and a TinyJit capture)
# run no kernel and read no data for them.
_SHAPE_OPS = {"Shape", "Size"}
_NONDETERMINISTIC_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
_HOST_MAX = 64        # elements: shapes, axes, pads and scalars, not weights
_SIGNATURES_KEPT = 16

# keyword parameters an operator may declare to be told about its node, rather than attributes
_NODE_PARAMS = {"_n_outputs", "_node"}

def _call_op(fn:Callable, node:OnnxNode, inputs:list, opts:dict) -> Any:
  params = inspect.signature(fn).parameters
  if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
    if unknown := [k for k in opts if k not in params or k in _NODE_PARAMS]:
      raise NotImplementedError(f"ONNX {node}: attribute {', '.join(map(repr, unknown))} of {node.op} is not supported")
  extra = {k: v for k, v in (("_n_outputs", len(node.outputs)), ("_node", node)) if k in params}
  return fn(*inputs, **opts, **extra)

class OnnxRunner:
  """Runs an ONNX model (a path, the file's bytes, a uint8 Tensor of them, or an onnx.ModelProto) with tinygrad:
  `OnnxRunner(path)({name: Tensor | ndarray | scalar})` returns {output name: Tensor} (a list for sequence outputs, None for an empty
  optional, a numpy array for strings)."""
  def __init__(self, model_path:Any):
    model = load_model(model_path)
    # external data is found beside the model's file
    self.base_dir = pathlib.Path(model_path).parent if isinstance(model_path, (str, pathlib.Path)) else None
    # a domain we have no operators of is an error only where a node uses it
    opsets = {Domain(o.domain or Domain.ONNX.value): o.version for o in model.opset_import if o.domain in _KNOWN_DOMAINS}
    self._init_from_graph(model.graph, opsets, None)

  def _init_from_graph(self, graph:Any, opsets:dict[Domain, int], parent:OnnxRunner|None):
    self.parent, self.opsets, self.graph_name = parent, opsets, graph.name if parent is not None else ""
    if parent is not None: self.base_dir = parent.base_dir
    self.device: str|None = None
    initializers = {i.name: tensor_from_proto(i, base_dir=self.base_dir) for i in graph.initializer}
    # sparse initializers become dense: every operator takes dense tensors
    for s in graph.sparse_initializer: initializers[s.values.name] = _sparse_to_dense(s)
    self.graph_values: dict[str, Any] = {"": None, **initializers}
    self.graph_inputs: dict[str, OnnxValue] = {i.name: _value_type(i.type) for i in graph.input if i.name not in initializers}
    self.graph_outputs: tuple[str, ...] = tuple(o.name for o in graph.output)
    self.graph_nodes: tuple[OnnxNode, ...] = tuple(self._node(num, n) for num, n in enumerate(graph.node))
    self.variable_dims: dict[str, int] = {}
    self._static_nodes = self._find_static_nodes(set(initializers))
    self._static_cache: dict[tuple, dict[str, np.ndarray]] = {}
    self._bn_folds = self._find_bn_folds(set(initializers))
    self._folded: dict[int, tuple[tuple[Tensor, ...], tuple[Tensor, Tensor]]] = {}
    onnx = import_onnx()
    small = [i for i in graph.initializer if i.data_location != onnx.TensorProto.EXTERNAL and prod(i.dims) <= _HOST_MAX]
    self._initializer_host = {i.name: v.tolist() for i in small if (v := onnx.numpy_helper.to_array(i)).dtype.kind in "biuf"}

  def _find_static_nodes(self, static:set[str]) -> set[int]:
    nodes = set()
    static = static | {""}
    for node in self.graph_nodes:
      if node.op in _NONDETERMINISTIC_OPS or any(isinstance(v, OnnxRunner) for v in node.opts.values()): continue
      if node.op in _SHAPE_OPS or all(name in static for name in node.inputs):
        nodes.add(node.num)
        static.update(node.outputs)
    return nodes

  def _find_bn_folds(self, initializers:set[str]) -> dict[int, OnnxNode]:
    """{BatchNormalization node: the Conv it folds into}: an inference BatchNormalization whose input is a Conv's output that nothing
    else reads, and whose parameters and the Conv's weight and bias are fixed by the graph (initializers, or static nodes of them).
    The Conv then runs with its weight scaled per output channel and its bias shifted (see _folded_conv), as onnxruntime's graph
    optimizer does: no normalization arithmetic after the conv's sums, which let a conv's channel tile keep its lanes."""
    static = initializers | {out for node in self.graph_nodes if node.num in self._static_nodes for out in node.outputs}
    producer = {out: node for node in self.graph_nodes for out in node.outputs if out}
    readers = collections.Counter(name for node in self.graph_nodes for name in node.inputs)
    folds = {}
    for bn in self.graph_nodes:
      if bn.op != "BatchNormalization" or bn.opts.get("training_mode", 0) or len([o for o in bn.outputs if o]) != 1 or len(bn.inputs) != 5: continue
      if (conv := producer.get(bn.inputs[0])) is None or conv.op != "Conv" or len(conv.outputs) != 1: continue
      if readers[conv.outputs[0]] != 1 or conv.outputs[0] in self.graph_outputs: continue
      if all(name in static for name in (*bn.inputs[1:], *[n for n in conv.inputs[1:] if n])): folds[bn.num] = conv
    return folds

  def _folded_conv(self, bn:OnnxNode, scope:collections.ChainMap) -> Tensor|None:
    """The Conv under bn with the normalization folded in: weight * s per output channel, bias (b - mean) * s + beta, s = scale /
    sqrt(var + eps). Computed and kept once (outside a TinyJit capture, which must not realize); None where the dtypes differ (the
    folded weight would round differently than the normalization does)."""
    conv = self._bn_folds[bn.num]
    w, b = scope[conv.inputs[1]], scope[conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else None
    params = [scope[name] for name in bn.inputs[1:]]
    sources = (w, *params, *([b] if b is not None else []))
    if not dtypes.is_float(w.dtype) or any(not isinstance(t, Tensor) or t.dtype != w.dtype for t in sources[1:]): return None
    # a parameter that wants its gradient gets it through the unfolded ops (a kept fold is realized: no graph back to them)
    if any(t.requires_grad for t in sources): return None
    # the fold is kept for these very tensors: one replaced in graph_values (or moved by to()) is folded again
    if (kept := self._folded.get(bn.num)) is not None and len(kept[0]) == len(sources) and all(a is b for a, b in zip(kept[0], sources)):
      folded = kept[1]
    else:
      scale, beta, mean, var = params
      s = scale * (var + bn.opts.get("epsilon", 1e-5)).rsqrt()
      folded = (w * s.reshape(-1, *[1] * (w.ndim - 1)), ((b if b is not None else 0) - mean) * s + beta)
      if not capturing: self._folded[bn.num] = (sources, folded := (folded[0].realize(), folded[1].realize()))
    fn = select_op(conv.op, conv.opset_id.domain, conv.opset_id.version)
    return _call_op(fn, conv, [scope[conv.inputs[0]], *folded], dict(conv.opts))

  def _node(self, num:int, n:Any) -> OnnxNode:
    if n.domain not in _KNOWN_DOMAINS: raise NotImplementedError(f"ONNX node {num} ({n.op_type}): operator domain {n.domain!r} is not supported")
    domain = Domain.from_onnx(n.domain)
    if domain not in self.opsets: raise ValueError(f"ONNX node {num} ({n.op_type}) is in domain {domain.value}, which the model does not import")
    onnx = import_onnx()
    opts = {a.name: self._attribute(onnx.helper.get_attribute_value(a)) for a in n.attribute}
    node = OnnxNode(num, n.name, n.op_type, OpSetId(domain, self.opsets[domain]), tuple(n.input), tuple(n.output), opts)
    try: select_op(node.op, domain, node.opset_id.version)
    except NotImplementedError as e: raise NotImplementedError(f"ONNX {node}: {e}") from None
    return node

  def _attribute(self, v:Any) -> Any:
    onnx = import_onnx()
    if isinstance(v, bytes): return v.decode("utf-8")
    if isinstance(v, onnx.TensorProto): return tensor_from_proto(v, base_dir=self.base_dir)
    if isinstance(v, onnx.GraphProto):
      sub = OnnxRunner.__new__(OnnxRunner)
      sub._init_from_graph(v, self.opsets, self)
      return sub
    if isinstance(v, onnx.SparseTensorProto): return _sparse_to_dense(v)
    if isinstance(v, list): return [self._attribute(x) for x in v]
    return v

  def to(self, device:str|None) -> OnnxRunner:
    self.device = device
    self.graph_values = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in self.graph_values.items()}
    for node in self.graph_nodes:
      for k, v in node.opts.items():
        if isinstance(v, (Tensor, OnnxRunner)): node.opts[k] = v.to(device)
    return self

  def _parse_input(self, name:str, value:Any, spec:OnnxValue) -> Any:
    if value is None:
      if spec.is_optional: return None
      raise ValueError(f"ONNX input {name!r} is not optional, got None")
    if spec.is_sequence:
      if not isinstance(value, (list, tuple)): raise TypeError(f"ONNX input {name!r} is a sequence, got {type(value).__name__}")
      return [self._parse_tensor(f"{name}[{i}]", v, dataclasses.replace(spec, shape=None)) for i, v in enumerate(value)]
    return self._parse_tensor(name, value, spec)

  def _parse_tensor(self, name:str, value:Any, spec:OnnxValue) -> Any:
    if spec.dtype is None: return np.asarray(value, dtype=object)
    if isinstance(value, Tensor): t = value if self.device is None else value.to(self.device)
    elif isinstance(value, np.ndarray):
      t = array_to_value(value, device=self.device)
    else: t = Tensor(value, dtype=spec.dtype, device=self.device)
    if t.dtype != spec.dtype: raise TypeError(f"ONNX input {name!r} must have dtype {spec.dtype.name}, got {t.dtype.name}")
    if spec.shape is None: return t
    if len(spec.shape) != t.ndim: raise ValueError(f"ONNX input {name!r} must have shape {spec.shape}, got {t.shape}")
    for dim, (want, got) in enumerate(zip(spec.shape, t.shape)):
      if isinstance(want, str): want = self.variable_dims.setdefault(want, got)
      if want is not None and want != got:
        raise ValueError(f"ONNX input {name!r} must have shape {spec.shape} (with {self.variable_dims}), got {t.shape}: dim {dim} differs")
    return t

  def __call__(self, inputs:dict[str, Any], debug:int|None=None) -> dict[str, Any]:
    debug = getenv("DEBUGONNX", 0) if debug is None else debug
    if unknown := [k for k in inputs if k not in self.graph_inputs and self.parent is None]:
      raise ValueError(f"ONNX model has no input named {', '.join(map(repr, unknown))}; its inputs are {list(self.graph_inputs)}")
    self.variable_dims = {}
    values: dict[str, Any] = dict(self.graph_values)
    for name, spec in self.graph_inputs.items():
      # a subgraph's inputs come from its operator (Loop, Scan), which passes them already made
      if self.parent is not None: values[name] = inputs.get(name); continue
      if name not in inputs:
        if spec.is_optional: values[name] = None; continue
        raise ValueError(f"ONNX input {name!r} is missing; the model's inputs are {list(self.graph_inputs)}")
      values[name] = self._parse_input(name, inputs[name], spec)
    known = {id(values[name]): (values[name], v) for name, v in self._initializer_host.items() if isinstance(values.get(name), Tensor)}
    signature = tuple(_signature(values[name]) for name in self.graph_inputs)
    if signature not in self._static_cache and len(self._static_cache) >= _SIGNATURES_KEPT: self._static_cache.pop(next(iter(self._static_cache)))
    static_values = self._static_cache.setdefault(signature, {})
    # a subgraph (If/Loop/Scan body) sees the values of the graphs around it
    scope = collections.ChainMap(values, *([self.parent._scope] if self.parent is not None and hasattr(self.parent, "_scope") else []))
    self._scope = scope
    try:
      with known_host_values(known): self._run_nodes(values, scope, static_values, known, debug)
      return {name: scope[name] for name in self.graph_outputs}
    finally: del self._scope

  def _run_nodes(self, values:dict, scope:collections.ChainMap, static_values:dict[str, np.ndarray], known:dict, debug:int) -> None:
    for node in self.graph_nodes:
      if debug >= 1: print((f"[{self.graph_name}] " if self.graph_name else "") + f"{node.num}: {node.op} {node.opts}")
      static = node.num in self._static_nodes
      if static and node.outputs and all(out in static_values for out in node.outputs if out):
        for out in filter(None, node.outputs):
          values[out] = t = array_to_value(static_values[out], device=self.device)
          known[id(t)] = (t, static_values[out].tolist())
        continue
      args = [scope[name] if name in scope else _missing(node, name) for name in node.inputs]
      try:
        # (the Conv a BatchNormalization folds into ran before it: its unfolded output is never realized)
        if node.num in self._bn_folds and (folded := self._folded_conv(node, scope)) is not None: ret = folded
        else: ret = _call_op(select_op(node.op, node.opset_id.domain, node.opset_id.version), node, args, dict(node.opts))
      except Exception as e:
        e.add_note(f"in ONNX {node}")
        raise
      ret = ret if isinstance(ret, tuple) else (ret,)
      produced = [(out, v) for out, v in zip(node.outputs, ret) if out]
      for out, v in produced: values[out] = v
      # reading data inside a TinyJit capture is an error: the capture uses what an earlier call read
      if static and not capturing and len(ret) >= len(node.outputs) and all(_host_cacheable(v) for _, v in produced):
        for out, v in produced:
          static_values[out] = v.numpy()
          known[id(v)] = (v, static_values[out].tolist())

def _host_cacheable(v:Any) -> bool:
  # small, and of a dtype that numpy holds exactly (so the value made again from the array is the same)
  return isinstance(v, Tensor) and all(isinstance(d, int) for d in v.shape) and v.numel() <= _HOST_MAX and \
    (dtypes.is_int(v.dtype) or v.dtype in (dtypes.bool, dtypes.float32, dtypes.float64))

def _signature(v:Any) -> Any:
  if isinstance(v, Tensor): return (v.shape, v.dtype)
  if isinstance(v, list): return tuple(_signature(x) for x in v)
  return None if v is None else ("host", getattr(v, "shape", None))

def _missing(node:OnnxNode, name:str) -> Any:
  raise ValueError(f"ONNX {node}: input {name!r} is neither a graph input, an initializer nor the output of an earlier node")

def _sparse_to_dense(sparse:Any) -> Tensor:
  onnx = import_onnx()
  values, indices = onnx.numpy_helper.to_array(sparse.values), onnx.numpy_helper.to_array(sparse.indices)
  dense = np.zeros(int(np.prod(sparse.dims)), dtype=values.dtype)
  # indices are either flat positions (rank 1) or one coordinate row per value
  flat = indices if indices.ndim == 1 else np.ravel_multi_index(tuple(indices.T), tuple(sparse.dims))
  dense[flat] = values
  return array_to_value(dense.reshape(tuple(sparse.dims)))
