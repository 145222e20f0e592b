"""Operators in configurations the onnx node suite leaves out (adaptive RoiAlign sampling, grouped and strided DeformConv, asymmetric
Col2Im pads, every TreeEnsemble comparison and aggregate, string TfIdfVectorizer with weights, LinearAttention with a past state and
grouped heads), each one-node model checked against onnx's reference evaluator; and their errors for bad attributes and shapes."""
import math
import numpy as np
import pytest
pytestmark = pytest.mark.cpu
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from tinygrad.nn.onnx import OnnxRunner  # noqa: E402

_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.int32): TensorProto.INT32, np.dtype(object): TensorProto.STRING}

def one_node(op:str, inputs:dict[str, np.ndarray|None], n_out:int=1, opset:int=22, domain:str="", **attrs) -> onnx.ModelProto:
  """A model of one `op` node; an input given as None is an omitted optional input. Its outputs are untyped (onnx's checker refuses
  that, its reference evaluator does not): declared() types them."""
  names = [n if v is not None else "" for n, v in inputs.items()]
  outs = [f"out{i}" for i in range(n_out)]
  node = helper.make_node(op, names, outs, domain=domain, **attrs)
  graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, _ELEM[v.dtype], v.shape) for n, v in inputs.items() if v is not None],
                            [helper.make_empty_tensor_value_info(o) for o in outs])
  opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 5 if domain == "ai.onnx.ml" else 1)] if domain else [])
  return helper.make_model(graph, opset_imports=opsets)

def declared(model:onnx.ModelProto, outputs:list[tuple[np.dtype, tuple]]) -> onnx.ModelProto:
  typed = onnx.ModelProto()
  typed.CopyFrom(model)
  for o, (dtype, shape) in zip(typed.graph.output, outputs): o.CopyFrom(helper.make_tensor_value_info(o.name, _ELEM[np.dtype(dtype)], shape))
  return typed

def ours(model:onnx.ModelProto, inputs:dict[str, np.ndarray|None], outputs:list[tuple[np.dtype, tuple]]|None=None) -> list[np.ndarray]:
  """Our outputs; outputs (dtype, shape) types the model's outputs, float32 of unknown size where not given."""
  if not model.graph.output[0].type.HasField("tensor_type"):
    model = declared(model, outputs or [(np.float32, ["n"])] * len(model.graph.output))
  got = OnnxRunner(model)({k: v for k, v in inputs.items() if v is not None})
  return [got[o.name].numpy() for o in model.graph.output]

def check(model:onnx.ModelProto, inputs:dict[str, np.ndarray|None], rtol:float=1e-5, atol:float=1e-6) -> None:
  want = ReferenceEvaluator(model).run(None, {k: v for k, v in inputs.items() if v is not None})
  for name, w, g in zip([o.name for o in model.graph.output], want, ours(model, inputs, [(w.dtype, w.shape) for w in want])):
    assert w.shape == g.shape and w.dtype == g.dtype, f"{name}: expected {w.shape} {w.dtype}, got {g.shape} {g.dtype}"
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)

rng = np.random.default_rng(0)

# ---- RoiAlign: adaptive sampling (sampling_ratio=0) varies the samples per roi; rois reach past the image and pick other batches

ROI_INPUTS = {"x": rng.standard_normal((2, 3, 9, 11)).astype(np.float32),
              "rois": np.array([[0, 0, 10, 8], [2.5, 1.2, 6.1, 7.9], [-3, -2, 4, 5], [5, 4, 14, 12], [3, 3, 3.2, 3.1]], dtype=np.float32),
              "batch_indices": np.array([1, 0, 1, 0, 1], dtype=np.int64)}

@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 3])
def test_roialign(mode, ctm, sampling_ratio):
  check(one_node("RoiAlign", ROI_INPUTS, coordinate_transformation_mode=ctm, mode=mode, output_height=3, output_width=4,
                 sampling_ratio=sampling_ratio, spatial_scale=0.8), ROI_INPUTS)

def test_roialign_opset10_is_output_half_pixel():
  # opset 16 added coordinate_transformation_mode, calling output_half_pixel the earlier behaviour (onnx's reference evaluator applies
  # the new default, half_pixel, at opset 10 too)
  want = ReferenceEvaluator(one_node("RoiAlign", ROI_INPUTS, coordinate_transformation_mode="output_half_pixel", output_height=2,
                                     output_width=2)).run(None, ROI_INPUTS)[0]
  got = ours(one_node("RoiAlign", ROI_INPUTS, opset=10, output_height=2, output_width=2), ROI_INPUTS, [(np.float32, want.shape)])[0]
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

# ---- DeformConv: groups, offset groups, stride, dilation, pads, mask and bias; offsets large enough to sample outside the image

def test_deform_conv_grouped_strided():
  n, c, h, w, kh, kw, out_h, out_w = 2, 4, 7, 8, 3, 2, 3, 4
  inputs = {"x": rng.standard_normal((n, c, h, w)).astype(np.float32), "w": rng.standard_normal((6, c // 2, kh, kw)).astype(np.float32),
            "offset": (rng.standard_normal((n, 2 * kh * kw * 2, out_h, out_w)) * 2).astype(np.float32),
            "b": rng.standard_normal(6).astype(np.float32), "mask": rng.random((n, 2 * kh * kw, out_h, out_w)).astype(np.float32)}
  check(one_node("DeformConv", inputs, group=2, offset_group=2, kernel_shape=[kh, kw], strides=[2, 2], dilations=[2, 1], pads=[1, 0, 1, 1]),
        inputs, rtol=1e-4, atol=1e-5)

# ---- Col2Im: asymmetric pads with strides and dilations, more than one channel

def test_col2im_asymmetric():
  image, block, strides, dilations, pads = [7, 9], [2, 3], [2, 1], [2, 2], [1, 0, 0, 2]
  blocks = [(i + pads[d] + pads[d + 2] - dl * (b - 1) - 1) // s + 1 for d, (i, b, dl, s) in enumerate(zip(image, block, dilations, strides))]
  inputs = {"x": rng.standard_normal((2, 3 * 6, math.prod(blocks))).astype(np.float32),
            "image_shape": np.array(image, dtype=np.int64), "block_shape": np.array(block, dtype=np.int64)}
  check(one_node("Col2Im", inputs, strides=strides, dilations=dilations, pads=pads), inputs)

def test_col2im_rejects_a_wrong_column_count():
  inputs = {"x": np.zeros((1, 4, 7), dtype=np.float32), "image_shape": np.array([4, 4], dtype=np.int64),
            "block_shape": np.array([2, 2], dtype=np.int64)}
  with pytest.raises(ValueError, match=r"Col2Im: input of shape \(1, 4, 7\) does not fit block_shape \[2, 2\]"):
    ours(one_node("Col2Im", inputs), inputs)

# ---- TreeEnsemble: two trees over every comparison mode, NaN routed by missing_value_tracks_true, each aggregate

def tree_ensemble(aggregate:int, post_transform:int=0) -> onnx.ModelProto:
  # tree 0: node 0 (x0 <= 0.5) -> node 1 (x1 < 1) | node 2 (x0 >= 2); node 1 -> leaf 0 | node 3 (x1 == 3); node 2 -> leaf 1 | leaf 2;
  # node 3 -> leaf 3 | leaf 4.  tree 1: node 4 (x1 > 0) -> node 5 (x0 != 1) | leaf 5; node 5 -> leaf 6 | leaf 7
  f32 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)   # noqa: E731
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])
  node = helper.make_node("TreeEnsemble", ["x"], ["out0"], domain="ai.onnx.ml", aggregate_function=aggregate, post_transform=post_transform,
                          n_targets=3, tree_roots=[0, 4], nodes_featureids=[0, 1, 0, 1, 1, 0],
                          nodes_modes=numpy_helper.from_array(np.array([0, 1, 2, 4, 3, 5], dtype=np.uint8), "modes"),
                          nodes_splits=f32("splits", [0.5, 1, 2, 3, 0, 1]), nodes_truenodeids=[1, 0, 1, 3, 5, 6],
                          nodes_trueleafs=[0, 1, 1, 1, 0, 1], nodes_falsenodeids=[2, 3, 2, 4, 5, 7], nodes_falseleafs=[0, 0, 1, 1, 1, 1],
                          nodes_missing_value_tracks_true=[1, 0, 0, 0, 1, 0], leaf_targetids=[0, 1, 2, 0, 1, 2, 0, 1],
                          leaf_weights=f32("weights", [1.5, -2, 3, 0.25, 4, -1, 2.5, 0.5]))
  graph = helper.make_graph([node], "trees", [x], [helper.make_tensor_value_info("out0", TensorProto.FLOAT, [None, 3])])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])

TREE_X = np.array([[0, 0], [0, 3], [0, 2], [1, 5], [3, -1], [2.5, 0.5], [np.nan, 1], [0.2, np.nan], [1, 1]], dtype=np.float32)

@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_aggregates(aggregate):
  check(tree_ensemble(aggregate), {"x": TREE_X})

def test_tree_ensemble_post_transforms():
  # onnx's reference leaves post_transform out: the transforms are checked against numpy on the untransformed sums
  raw = ours(tree_ensemble(1), {"x": TREE_X})[0].astype(np.float64)
  e = np.exp(raw - raw.max(-1, keepdims=True))
  np.testing.assert_allclose(ours(tree_ensemble(1, 1), {"x": TREE_X})[0], e / e.sum(-1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(ours(tree_ensemble(1, 2), {"x": TREE_X})[0], 1 / (1 + np.exp(-raw)), rtol=1e-5)
  with pytest.raises(NotImplementedError, match="TreeEnsemble: post_transform=4 is not supported"): ours(tree_ensemble(1, 4), {"x": TREE_X})

# ---- TfIdfVectorizer: string pools, uni- to trigrams, IDF and TFIDF weights

@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_strings(mode):
  words = np.array([["a", "b", "c", "a", "b", "x", "c"], ["b", "c", "a", "b", "c", "a", "a"]], dtype=object)
  pool = ["a", "c", "x", "a", "b", "b", "c", "c", "a", "a", "b", "c"]   # unigrams a c x; bigrams ab bc ca; trigram abc
  check(one_node("TfIdfVectorizer", {"x": words}, opset=9, mode=mode, min_gram_length=1, max_gram_length=3, max_skip_count=1,
                 ngram_counts=[0, 3, 9], ngram_indexes=[6, 0, 1, 2, 3, 4, 5], pool_strings=pool,
                 weights=[0.5, 1, 2, 3, 4, 5, 6]), {"x": words})

def test_tfidf_int_skips_and_ranges():
  ids = np.array([1, 2, 3, 1, 2, 2, 3, 1, 3, 2], dtype=np.int64)
  check(one_node("TfIdfVectorizer", {"x": ids}, opset=9, mode="TF", min_gram_length=2, max_gram_length=3, max_skip_count=2,
                 ngram_counts=[0, 2, 8], ngram_indexes=[0, 1, 2, 3, 2, 4], pool_int64s=[1, 2, 1, 2, 2, 3, 3, 1, 1, 2, 3]), {"x": ids})

# ---- LinearAttention: a past state and grouped query heads in every update rule (the closed form and the step recurrence)

@pytest.mark.parametrize("rule,decay", [("linear", None), ("gated", "head"), ("gated", "key"), ("delta", None), ("gated_delta", "head")])
def test_linear_attention_past_and_gqa(rule, decay):
  b, t, hq, hkv, dk, dv = 2, 5, 4, 2, 3, 4
  key = rng.standard_normal((b, t, hkv, dk)).astype(np.float32)
  inputs = {"query": rng.standard_normal((b, t, hq * dk)).astype(np.float32),
            "key": (key / np.linalg.norm(key, axis=-1, keepdims=True)).reshape(b, t, hkv * dk),
            "value": rng.standard_normal((b, t, hkv * dv)).astype(np.float32),
            "past_state": rng.standard_normal((b, hkv, dk, dv)).astype(np.float32),
            "decay": -rng.random((b, t, hkv if decay == "head" else hkv * dk)).astype(np.float32) if decay else None,
            "beta": rng.random((b, t, hkv)).astype(np.float32) if "delta" in rule else None}
  check(one_node("LinearAttention", inputs, n_out=2, opset=27, q_num_heads=hq, kv_num_heads=hkv, update_rule=rule), inputs, rtol=1e-4, atol=1e-5)

# ---- errors name the operator and the bad attribute or shape

def test_errors():
  with pytest.raises(NotImplementedError, match="RoiAlign: mode='median' is not supported"):
    ours(one_node("RoiAlign", ROI_INPUTS, mode="median"), ROI_INPUTS)
  conv = {"x": np.zeros((1, 2, 5), dtype=np.float32), "weight": np.zeros((2, 1, 3), dtype=np.float32)}
  with pytest.raises(NotImplementedError, match="CausalConvWithState: activation='gelu' is not supported"):
    ours(one_node("CausalConvWithState", conv, n_out=2, opset=27, activation="gelu"), conv)
  qkv = {n: np.zeros((1, 2, 8), dtype=np.float32) for n in ("query", "key", "value")}
  with pytest.raises(ValueError, match="LinearAttention: update_rule='gated' needs decay input"):
    ours(one_node("LinearAttention", qkv, n_out=2, opset=27, q_num_heads=2, kv_num_heads=2, update_rule="gated"), qkv)
  with pytest.raises(NotImplementedError, match="TfIdfVectorizer: mode='BM25' is not supported"):
    ids = {"x": np.array([1, 2], dtype=np.int64)}
    ours(one_node("TfIdfVectorizer", ids, opset=9, mode="BM25", min_gram_length=1, max_gram_length=1, max_skip_count=0, ngram_counts=[0],
                  ngram_indexes=[0], pool_int64s=[1]), ids)

# ---- TreeEnsembleRegressor / TreeEnsembleClassifier (ai.onnx.ml 3): two trees, string modes, a leaf with weights on two targets

LEGACY_NODES = dict(nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
                    nodes_modes=["BRANCH_LEQ", "BRANCH_GT", "LEAF", "LEAF", "LEAF", "BRANCH_NEQ", "LEAF", "LEAF"],
                    nodes_featureids=[0, 1, 0, 0, 0, 1, 0, 0], nodes_values=[0.5, 1.0, 0, 0, 0, 2.0, 0, 0],
                    nodes_truenodeids=[1, 2, 0, 0, 0, 1, 0, 0], nodes_falsenodeids=[4, 3, 0, 0, 0, 2, 0, 0],
                    nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0, 0])
LEGACY_X = np.array([[0, 0], [0, 3], [1, 2], [1, 5], [np.nan, 1], [0.2, np.nan], [-1, 2]], dtype=np.float32)

@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor(aggregate):
  model = one_node("TreeEnsembleRegressor", {"x": LEGACY_X}, opset=21, domain="ai.onnx.ml", **LEGACY_NODES, aggregate_function=aggregate,
                   n_targets=2, base_values=[0.5, -1], target_treeids=[0, 0, 0, 0, 1, 1], target_nodeids=[2, 2, 3, 4, 1, 2],
                   target_ids=[0, 1, 0, 1, 0, 1], target_weights=[1.5, 2, -3, 4, 0.25, 5])
  model.opset_import[1].version = 3
  check(model, {"x": LEGACY_X})

@pytest.mark.parametrize("post_transform", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("classes", [[10, 20, 30], [1]])
def test_tree_ensemble_classifier(post_transform, classes):
  ids = [0, 1, 2, 0, 1, 2] if len(classes) == 3 else [0] * 6
  model = one_node("TreeEnsembleClassifier", {"x": LEGACY_X}, n_out=2, opset=21, domain="ai.onnx.ml", **LEGACY_NODES, post_transform=post_transform,
                   classlabels_int64s=classes, class_treeids=[0, 0, 0, 0, 1, 1], class_nodeids=[2, 2, 3, 4, 1, 2], class_ids=ids,
                   class_weights=[0.5, 0.2, 0.3, 0.9, 0.4, 0.1])
  model.opset_import[1].version = 3
  check(model, {"x": LEGACY_X})

def test_deform_conv_rejects_an_offset_of_the_wrong_size():
  inputs = {"x": np.zeros((1, 1, 5, 5), dtype=np.float32), "w": np.zeros((1, 1, 2, 2), dtype=np.float32),
            "offset": np.zeros((1, 8, 3, 3), dtype=np.float32)}
  with pytest.raises(ValueError, match=r"DeformConv: offset \(1, 8, 3, 3\) .* must cover the output \[4, 4\]"):
    ours(one_node("DeformConv", inputs, kernel_shape=[2, 2]), inputs)
