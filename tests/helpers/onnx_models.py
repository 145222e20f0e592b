"""Small whole models built with onnx.helper and random weights (a ResNet-style CNN, a BERT-style encoder, a YOLO-style detector), for
checking OnnxRunner against onnxruntime. Each builder returns (ModelProto, {input name: ndarray})."""
from __future__ import annotations
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

class _Graph:
  def __init__(self, seed:int):
    self.rng, self.nodes, self.inits, self.n = np.random.default_rng(seed), [], [], 0
  def name(self, base:str) -> str:
    self.n += 1
    return f"{base}{self.n}"
  def weight(self, *shape:int, scale:float=0.2, value:np.ndarray|None=None) -> str:
    arr = value if value is not None else (self.rng.standard_normal(shape) * scale).astype(np.float32)
    self.inits.append(numpy_helper.from_array(arr, name := self.name("w")))
    return name
  def op(self, op_type:str, *inputs:str, n_out:int=1, **attrs) -> str:
    outs = [self.name(op_type.lower()) for _ in range(n_out)]
    self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
    return outs[0]
  def model(self, inputs, outputs, opset:int=17) -> onnx.ModelProto:
    graph = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

def _conv_bn_relu(g:_Graph, x:str, cin:int, cout:int, stride:int=1, relu:bool=True) -> str:
  y = g.op("Conv", x, g.weight(cout, cin, 3, 3), g.weight(cout), pads=[1, 1, 1, 1], strides=[stride, stride])
  y = g.op("BatchNormalization", y, g.weight(cout, value=(1 + 0.1 * g.rng.standard_normal(cout)).astype(np.float32)), g.weight(cout),
           g.weight(cout), g.weight(cout, value=(1 + 0.1 * g.rng.random(cout)).astype(np.float32)), epsilon=1e-5)
  return g.op("Relu", y) if relu else y

def resnet_style(batch:int=2) -> tuple[onnx.ModelProto, dict]:
  g = _Graph(0)
  x = _conv_bn_relu(g, "image", 3, 8)
  x = g.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2])
  y = _conv_bn_relu(g, x, 8, 8)
  y = _conv_bn_relu(g, y, 8, 8, relu=False)
  x = g.op("Relu", g.op("Add", x, y))
  x = _conv_bn_relu(g, x, 8, 16, stride=2)
  x = g.op("Flatten", g.op("GlobalAveragePool", x))
  g.op("Gemm", x, g.weight(10, 16), g.weight(10), transB=1)
  g.nodes[-1].output[0] = "logits"
  model = g.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 32, 32])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])])
  return model, {"image": np.random.default_rng(1).standard_normal((batch, 3, 32, 32)).astype(np.float32)}

def bert_style(seq:int=16, dim:int=32, heads:int=4, vocab:int=50) -> tuple[onnx.ModelProto, dict]:
  g = _Graph(2)
  hd = dim // heads
  def layernorm(x:str) -> str: return g.op("LayerNormalization", x, g.weight(dim, value=np.ones(dim, np.float32)), g.weight(dim), axis=-1)
  def shape(*dims:int) -> str: return g.weight(len(dims), value=np.array(dims, dtype=np.int64))
  x = g.op("Add", g.op("Gather", g.weight(vocab, dim, scale=1.0), "input_ids"), g.weight(1, seq, dim, scale=0.5))
  x = layernorm(x)
  def split_heads(t:str) -> str: return g.op("Transpose", g.op("Reshape", t, shape(1, seq, heads, hd)), perm=[0, 2, 1, 3])
  q, k, v = (split_heads(g.op("Add", g.op("MatMul", x, g.weight(dim, dim)), g.weight(dim))) for _ in range(3))
  scores = g.op("Div", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), g.weight(value=np.array(np.sqrt(hd), np.float32)))
  mask = g.op("Mul", g.op("Sub", g.weight(value=np.array(1, np.float32)), g.op("Cast", "attention_mask", to=TensorProto.FLOAT)),
              g.weight(value=np.array(-1e4, np.float32)))
  probs = g.op("Softmax", g.op("Add", scores, g.op("Reshape", mask, shape(1, 1, 1, seq))), axis=-1)
  ctx = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3]), shape(1, seq, dim))
  x = layernorm(g.op("Add", x, g.op("MatMul", ctx, g.weight(dim, dim))))
  h = g.op("Add", g.op("MatMul", x, g.weight(dim, 4 * dim)), g.weight(4 * dim))
  # gelu written out with Erf, as exporters emit it
  gelu = g.op("Mul", g.op("Mul", h, g.op("Add", g.op("Erf", g.op("Div", h, g.weight(value=np.array(np.sqrt(2), np.float32)))),
                                          g.weight(value=np.array(1, np.float32)))), g.weight(value=np.array(0.5, np.float32)))
  x = layernorm(g.op("Add", x, g.op("MatMul", gelu, g.weight(4 * dim, dim))))
  g.nodes[-1].output[0] = "hidden"
  model = g.model([helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq]),
                   helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, seq])],
                  [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, seq, dim])])
  rng = np.random.default_rng(3)
  mask = np.ones((1, seq), np.int64)
  mask[0, seq - 3:] = 0
  return model, {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64), "attention_mask": mask}

def yolo_style(size:int=32) -> tuple[onnx.ModelProto, dict]:
  g = _Graph(4)
  def conv(x:str, cin:int, cout:int, k:int=3, stride:int=1) -> str:
    y = g.op("Conv", x, g.weight(cout, cin, k, k), g.weight(cout), pads=[k // 2] * 4, strides=[stride, stride])
    return g.op("LeakyRelu", y, alpha=0.1)
  c1 = conv("image", 3, 8, stride=2)            # size/2
  c2 = conv(c1, 8, 16, stride=2)                # size/4
  up = g.op("Resize", conv(c2, 16, 8, k=1), "", g.weight(4, value=np.array([1, 1, 2, 2], np.float32)), mode="nearest")
  merged = g.op("Concat", up, c1, axis=1)       # size/2, 16 channels
  head = g.op("Conv", merged, g.weight(18, 16, 1, 1), g.weight(18))
  s = size // 2
  g.op("Transpose", g.op("Reshape", g.op("Sigmoid", head), g.weight(5, value=np.array([1, 3, 6, s, s], np.int64))), perm=[0, 1, 3, 4, 2])
  g.nodes[-1].output[0] = "boxes"
  model = g.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
                  [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 3, s, s, 6])])
  return model, {"image": np.random.default_rng(5).standard_normal((1, 3, size, size)).astype(np.float32)}
