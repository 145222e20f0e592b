"""Whole ONNX models built with onnx.helper and random weights, for tests (checked against onnxruntime) and benches/bench_onnx.py:
a ResNet-style CNN, a BERT-style encoder and a small YOLO-style detector. Each builder returns an onnx.ModelProto whose graph input
has a symbolic batch dimension."""
from __future__ import annotations
from typing import Any
import numpy as np

OPSET = 17

class GraphBuilder:
  """Nodes and initializers of one graph, with fresh value names (so a builder reads as the model's forward pass)."""
  def __init__(self, seed:int):
    from onnx import helper, numpy_helper
    self.helper, self.numpy_helper = helper, numpy_helper
    self.rng = np.random.default_rng(seed)
    self.nodes: list[Any] = []
    self.inits: list[Any] = []
    self.count = 0

  def name(self, prefix:str) -> str:
    self.count += 1
    return f"{prefix}_{self.count}"

  def const(self, arr:np.ndarray, prefix:str="c") -> str:
    name = self.name(prefix)
    self.inits.append(self.numpy_helper.from_array(np.asarray(arr), name))
    return name

  def weight(self, *shape:int, scale:float|None=None) -> str:
    # fan-in scaled, so activations keep their size through deep stacks
    scale = scale if scale is not None else 1 / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else shape[0])
    return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), "w")

  def op(self, op_type:str, *inputs:str, n_out:int=1, **attrs) -> Any:
    outs = [self.name(op_type.lower()) for _ in range(n_out)]
    self.nodes.append(self.helper.make_node(op_type, list(inputs), outs, **attrs))
    return outs[0] if n_out == 1 else outs

  def model(self, name:str, inputs:list[Any], outputs:list[tuple[str, list]], out_names:list[str]) -> Any:
    from onnx import TensorProto
    # the last producers of the outputs get the outputs' names
    renames = dict(zip([o for o, _ in outputs], out_names))
    for n in self.nodes:
      n.output[:] = [renames.get(o, o) for o in n.output]
      n.input[:] = [renames.get(i, i) for i in n.input]
    outs = [self.helper.make_tensor_value_info(renames[o], TensorProto.FLOAT, shape) for o, shape in outputs]
    graph = self.helper.make_graph(self.nodes, name, inputs, outs, self.inits)
    model = self.helper.make_model(graph, opset_imports=[self.helper.make_opsetid("", OPSET)])
    import onnx
    onnx.checker.check_model(model)
    return model

# ***** ResNet-style CNN *****

def _conv_bn(g:GraphBuilder, x:str, cin:int, cout:int, k:int, stride:int, relu:bool=True) -> str:
  y = g.op("Conv", x, g.weight(cout, cin, k, k), kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
  gamma, beta = g.const(g.rng.uniform(0.5, 1.5, cout).astype(np.float32)), g.const(g.rng.uniform(-0.2, 0.2, cout).astype(np.float32))
  mean, var = g.const(g.rng.uniform(-0.2, 0.2, cout).astype(np.float32)), g.const(g.rng.uniform(0.5, 1.5, cout).astype(np.float32))
  y = g.op("BatchNormalization", y, gamma, beta, mean, var, epsilon=1e-5)
  return g.op("Relu", y) if relu else y

def _basic_block(g:GraphBuilder, x:str, cin:int, cout:int, stride:int) -> str:
  y = _conv_bn(g, _conv_bn(g, x, cin, cout, 3, stride), cout, cout, 3, 1, relu=False)
  skip = x if stride == 1 and cin == cout else _conv_bn(g, x, cin, cout, 1, stride, relu=False)
  return g.op("Relu", g.op("Add", y, skip))

def resnet(widths:tuple[int, ...]=(16, 32), blocks:int=1, classes:int=10, size:int=32, seed:int=0) -> Any:
  """conv-bn-relu stem and max pool, `blocks` basic residual blocks per width (the first of each later width strided, with a 1x1
  projection), global average pool, flatten and a Gemm classifier. widths (64, 128, 256, 512) with blocks 2 and size 224 is ResNet-18."""
  from onnx import TensorProto
  g = GraphBuilder(seed)
  x = g.op("MaxPool", _conv_bn(g, "image", 3, widths[0], 7 if size >= 64 else 3, 2 if size >= 64 else 1),
           kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
  cin = widths[0]
  for i, w in enumerate(widths):
    for b in range(blocks):
      x = _basic_block(g, x, cin, w, 2 if i > 0 and b == 0 else 1)
      cin = w
  x = g.op("Flatten", g.op("GlobalAveragePool", x), axis=1)
  logits = g.op("Gemm", x, g.weight(classes, cin), g.const(np.zeros(classes, np.float32)), transB=1)
  image = g.helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, size, size])
  return g.model("resnet", [image], [(logits, ["batch", classes])], ["logits"])

# ***** BERT-style encoder *****

def _layer_norm(g:GraphBuilder, x:str, dim:int) -> str:
  return g.op("LayerNormalization", x, g.const(g.rng.uniform(0.8, 1.2, dim).astype(np.float32)),
              g.const(g.rng.uniform(-0.1, 0.1, dim).astype(np.float32)), axis=-1, epsilon=1e-12)

def _linear(g:GraphBuilder, x:str, din:int, dout:int) -> str:
  return g.op("Add", g.op("MatMul", x, g.weight(din, dout, scale=1 / np.sqrt(din))), g.const((g.rng.standard_normal(dout) * 0.02).astype(np.float32)))

def _gelu_erf(g:GraphBuilder, x:str) -> str:
  # BERT's exact GELU as exporters write it: x * 0.5 * (1 + erf(x / sqrt(2)))
  erf = g.op("Erf", g.op("Div", x, g.const(np.array(np.sqrt(2), np.float32))))
  return g.op("Mul", g.op("Mul", x, g.const(np.array(0.5, np.float32))), g.op("Add", erf, g.const(np.array(1.0, np.float32))))

def bert(layers:int=2, dim:int=64, heads:int=4, ffn:int=128, vocab:int=1000, max_seq:int=64, seed:int=0) -> Any:
  """Token and position embeddings (Gather), LayerNormalization, then `layers` encoder layers: multi-head attention written as
  MatMul/Reshape/Transpose/Softmax with a padding mask, residual adds, LayerNormalization and an Erf-GELU feed-forward.
  layers 12, dim 768, heads 12, ffn 3072, vocab 30522, max_seq 512 is BERT-base."""
  from onnx import TensorProto
  g = GraphBuilder(seed)
  head_dim = dim // heads
  tok = g.op("Gather", g.weight(vocab, dim, scale=0.5), "input_ids", axis=0)
  # positions 0..seq-1: Shape -> Gather the seq dim -> Range
  seq = g.op("Gather", g.op("Shape", "input_ids"), g.const(np.array(1, np.int64)), axis=0)
  positions = g.op("Range", g.const(np.array(0, np.int64)), seq, g.const(np.array(1, np.int64)))
  x = _layer_norm(g, g.op("Add", tok, g.op("Gather", g.weight(max_seq, dim, scale=0.5), positions, axis=0)), dim)
  # mask (batch, seq) of 1/0 -> additive (batch, 1, 1, seq) of 0/-10000
  mask = g.op("Unsqueeze", g.op("Cast", "attention_mask", to=TensorProto.FLOAT), g.const(np.array([1, 2], np.int64)))
  bias = g.op("Mul", g.op("Sub", g.const(np.array(1.0, np.float32)), mask), g.const(np.array(-10000.0, np.float32)))
  split_heads, merge_heads = g.const(np.array([0, 0, heads, head_dim], np.int64)), g.const(np.array([0, 0, dim], np.int64))
  for _ in range(layers):
    q, k, v = (g.op("Transpose", g.op("Reshape", _linear(g, x, dim, dim), split_heads), perm=[0, 2, 1, 3]) for _ in range(3))
    scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), g.const(np.array(1 / np.sqrt(head_dim), np.float32)))
    probs = g.op("Softmax", g.op("Add", scores, bias), axis=-1)
    attn = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3]), merge_heads)
    x = _layer_norm(g, g.op("Add", x, _linear(g, attn, dim, dim)), dim)
    x = _layer_norm(g, g.op("Add", x, _linear(g, _gelu_erf(g, _linear(g, x, dim, ffn)), ffn, dim)), dim)
  ids = g.helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
  am = g.helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
  return g.model("bert", [ids, am], [(x, ["batch", "seq", dim])], ["hidden_states"])

# ***** YOLO-style detector *****

def _conv_leaky(g:GraphBuilder, x:str, cin:int, cout:int, k:int, stride:int) -> str:
  y = g.op("Conv", x, g.weight(cout, cin, k, k), g.const((g.rng.standard_normal(cout) * 0.1).astype(np.float32)),
           kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
  return g.op("LeakyRelu", y, alpha=0.1)

def _head(g:GraphBuilder, x:str, cin:int, anchors:int, classes:int, grid:int) -> str:
  # (batch, anchors*(5+classes), grid, grid) -> (batch, anchors, grid, grid, 5+classes) of probabilities
  y = g.op("Conv", x, g.weight(anchors * (5 + classes), cin, 1, 1), kernel_shape=[1, 1])
  y = g.op("Reshape", y, g.const(np.array([0, anchors, 5 + classes, grid, grid], np.int64)))
  return g.op("Sigmoid", g.op("Transpose", y, perm=[0, 1, 3, 4, 2]))

def yolo(size:int=32, anchors:int=3, classes:int=2, seed:int=0) -> Any:
  """A backbone of strided convs with LeakyRelu, a coarse head, and a fine head on the coarse features upsampled 2x (Resize, nearest)
  and concatenated with the earlier features; each head's output reshaped, transposed and squashed by Sigmoid."""
  from onnx import TensorProto
  g = GraphBuilder(seed)
  x = _conv_leaky(g, "image", 3, 8, 3, 1)
  fine = _conv_leaky(g, x, 8, 16, 3, 2)
  coarse = _conv_leaky(g, _conv_leaky(g, fine, 16, 32, 3, 2), 32, 16, 1, 1)
  up = g.op("Resize", coarse, "", g.const(np.array([1, 1, 2, 2], np.float32)), mode="nearest")
  merged = _conv_leaky(g, g.op("Concat", up, fine, axis=1), 32, 16, 3, 1)
  n = 5 + classes
  out_coarse, out_fine = _head(g, coarse, 16, anchors, classes, size // 4), _head(g, merged, 16, anchors, classes, size // 2)
  image = g.helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, size, size])
  outputs = [(out_coarse, ["batch", anchors, size // 4, size // 4, n]), (out_fine, ["batch", anchors, size // 2, size // 2, n])]
  return g.model("yolo", [image], outputs, ["boxes_coarse", "boxes_fine"])
