"""The ai.onnx.ml domain: LabelEncoder, ArrayFeatureExtractor, Binarizer."""
from __future__ import annotations
from typing import Any
import math
import numpy as np
from tinygrad.dtype import dtypes, to_np_dtype
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op, Domain
from tinygrad.nn.onnx.model import array_to_value

@onnx_op("Binarizer", 1, Domain.ML)
def Binarizer(x:Tensor, threshold:float=0.0) -> Tensor: return (x > threshold).cast(x.dtype)

@onnx_op("ArrayFeatureExtractor", 1, Domain.ML)
def ArrayFeatureExtractor(x:Any, y:Tensor) -> Any:
  idx = y.flatten().tolist()
  if isinstance(x, np.ndarray): return x[..., idx]
  return x[..., Tensor(idx, dtype=dtypes.int64, device=x.device)] if len(idx) else x[..., :0]

@onnx_op("LabelEncoder", 2, Domain.ML)
def LabelEncoder(x:Any, default_float:float=-0.0, default_int64:int=-1, default_string:str="_Unused", default_tensor:Any=None,
                 keys_floats:list[float]|None=None, keys_int64s:list[int]|None=None, keys_strings:list[str]|None=None, keys_tensor:Any=None,
                 values_floats:list[float]|None=None, values_int64s:list[int]|None=None, values_strings:list[str]|None=None,
                 values_tensor:Any=None) -> Any:
  def listed(t:Any) -> list|None:
    if t is None: return None
    return list(t.reshape(-1)) if isinstance(t, np.ndarray) else t.flatten().tolist()
  keys = next(k for k in (keys_floats, keys_int64s, keys_strings, listed(keys_tensor)) if k is not None)
  values = next(v for v in (values_floats, values_int64s, values_strings, listed(values_tensor)) if v is not None)
  if default_tensor is not None: default = listed(default_tensor)[0]
  elif values_strings is not None or isinstance(values_tensor, np.ndarray): default = default_string
  elif values_int64s is not None: default = default_int64
  else: default = default_float
  # a lookup table over every element, on the host: keys may be strings, and floats match NaN to NaN
  data = x.numpy() if isinstance(x, Tensor) else x
  table = {(_nan_key(k)): v for k, v in zip(keys, values)}
  out = np.array([table.get(_nan_key(v), default) for v in data.reshape(-1)]).reshape(data.shape)
  if values_strings is not None or isinstance(values_tensor, np.ndarray): return out.astype(object)
  if isinstance(values_tensor, Tensor): return Tensor(out).cast(values_tensor.dtype)
  return array_to_value(out.astype(np.int64 if values_int64s is not None else np.float32))

def _nan_key(v:Any) -> Any: return "nan" if isinstance(v, float) and v != v else v

# ***** tree ensembles: every node's test is evaluated for all samples at once, and a root-to-leaf path is taken where all its tests
# agree, so a whole ensemble is a few elementwise ops and two matmuls (no per-sample branching) *****

_TREE_COMPARE = {0: lambda v, s: v <= s, 1: lambda v, s: v < s, 2: lambda v, s: v >= s, 3: lambda v, s: v > s, 4: lambda v, s: v == s,
                 5: lambda v, s: v != s}
_TREE_MEMBER = 6

def _tree_tests(x:Tensor, features:list[int], modes:list[int], splits:list[float], members:list[list[float]], missing_true:list[int],
                nan_is_missing:bool=False) -> Tensor:
  """(batch, nodes) 0/1 in x's dtype: whether each branch node's test holds for each sample. A NaN feature takes the true branch where
  missing_true says so; otherwise it follows the comparison (TreeEnsemble, where NaN != s holds), or with nan_is_missing the false
  branch (TreeEnsembleRegressor/Classifier)."""
  if unknown := sorted({m for m in modes if m not in _TREE_COMPARE and m != _TREE_MEMBER}):
    raise NotImplementedError(f"tree ensemble: node mode(s) {unknown} are not supported (0-6: LEQ, LT, GTE, GT, EQ, NEQ, MEMBER)")
  if features and max(features) >= x.shape[1]:
    raise ValueError(f"tree ensemble: a node tests feature {max(features)}, but the input {x.shape} has {x.shape[1]} features")
  v = x[:, Tensor(features, dtype=dtypes.int64, device=x.device)] if features else x[:, :0]
  split = Tensor(splits, dtype=x.dtype, device=x.device) if splits else Tensor.zeros(0, dtype=x.dtype, device=x.device)
  mode = Tensor(modes, dtype=dtypes.int32, device=x.device)
  held = Tensor.zeros(*v.shape, dtype=dtypes.bool, device=x.device)
  for m, compare in _TREE_COMPARE.items():
    if m in modes: held = held | ((mode == m) & compare(v, split))
  if _TREE_MEMBER in modes:
    # each node's set padded with NaN, which equals nothing
    width = max(len(s) for s in members)
    table = Tensor([s + [math.nan] * (width - len(s)) for s in members], dtype=x.dtype, device=x.device)
    held = held | ((mode == _TREE_MEMBER) & (v.unsqueeze(-1) == table).any(-1))
  tracks = Tensor([bool(t) for t in missing_true] if missing_true else [False] * len(modes), dtype=dtypes.bool, device=x.device)
  if nan_is_missing: held = v.isnan().where(tracks, held)
  elif any(missing_true): held = held | (tracks & v.isnan())
  return held.cast(x.dtype)

def _paths_reached(tests:Tensor, paths:list[list[tuple[int, bool]]], n_nodes:int) -> Tensor:
  """(batch, paths) 0/1: a path (its branch nodes and the outcome it needs at each) is reached where every test agrees."""
  need_true, need_false = np.zeros((n_nodes, len(paths))), np.zeros((n_nodes, len(paths)))
  for p, path in enumerate(paths):
    for node, outcome in path: (need_true if outcome else need_false)[node, p] = 1
  agree = tests @ Tensor(need_true, device=tests.device).cast(tests.dtype) + (1 - tests) @ Tensor(need_false, device=tests.device).cast(tests.dtype)
  return (agree == Tensor([len(p) for p in paths], device=tests.device).cast(tests.dtype)).cast(tests.dtype)

def _aggregate(reached:Tensor, weights:list[float], targets:list[int], n_targets:int, how:str, n_trees:int) -> Tensor:
  """(batch, n_targets): each reached path adds (SUM, AVERAGE over the trees) or competes (MIN, MAX) its weight on its target."""
  if targets and (min(targets) < 0 or max(targets) >= n_targets):
    raise ValueError(f"tree ensemble: a leaf's target id is outside [0, {n_targets})")
  onehot = np.zeros((len(weights), n_targets))
  onehot[np.arange(len(weights)), targets] = 1
  if how in ("SUM", "AVERAGE"):
    out = reached @ Tensor(onehot * np.array(weights).reshape(-1, 1), device=reached.device).cast(reached.dtype)
    return out / n_trees if how == "AVERAGE" else out
  if how not in ("MIN", "MAX"): raise NotImplementedError(f"tree ensemble: aggregate function {how!r} is not supported (SUM, AVERAGE, MIN, MAX)")
  # a target no reached leaf names keeps the dtype's largest finite value (MIN) or its negation (MAX), as onnx's reference does
  largest = float(np.finfo(to_np_dtype(reached.dtype)).max)
  bound = largest if how == "MIN" else -largest
  hit = reached.unsqueeze(-1).cast(dtypes.bool) & Tensor(onehot, device=reached.device).cast(dtypes.bool)   # (batch, paths, targets)
  w = Tensor(weights, device=reached.device).cast(reached.dtype).reshape(1, -1, 1)
  picked = hit.where(w, bound)
  return picked.min(1) if how == "MIN" else picked.max(1)

def _post_transform(scores:Tensor, how:str) -> Tensor:
  if how == "NONE": return scores
  if how == "LOGISTIC": return scores.sigmoid()
  if how == "SOFTMAX": return scores.softmax(-1)
  if how == "SOFTMAX_ZERO":
    # a softmax over the nonzero scores; zeros stay zero
    nonzero = scores != 0
    e = nonzero.where((scores - nonzero.where(scores, -math.inf).max(-1, keepdim=True)).exp(), 0)
    total = e.sum(-1, keepdim=True)
    return e / (total == 0).where(1, total)
  raise NotImplementedError(f"tree ensemble: post_transform {how!r} is not supported (NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO)")

def _listed(v:Any) -> list:
  if v is None: return []
  if isinstance(v, Tensor): return v.flatten().tolist()
  return list(v.reshape(-1)) if isinstance(v, np.ndarray) else list(v)

@onnx_op("TreeEnsemble", 5, Domain.ML)
def TreeEnsemble(x:Tensor, nodes_splits:Tensor, nodes_featureids:list[int], nodes_modes:Tensor, nodes_truenodeids:list[int],
                 nodes_falsenodeids:list[int], nodes_trueleafs:list[int], nodes_falseleafs:list[int], leaf_targetids:list[int],
                 leaf_weights:Tensor, tree_roots:list[int], aggregate_function:int=1, post_transform:int=0, n_targets:int|None=None,
                 nodes_hitrates:Any=None, nodes_missing_value_tracks_true:list[int]|None=None, membership_values:Any=None) -> Tensor:
  modes, splits, weights = [int(m) for m in _listed(nodes_modes)], _listed(nodes_splits), _listed(leaf_weights)
  n_nodes = len(modes)
  # MEMBER nodes take their sets, in node order, from membership_values, each ended by a NaN
  members: list[list[float]] = [[] for _ in modes]
  values, pos = _listed(membership_values), 0
  for i, m in enumerate(modes):
    if m != _TREE_MEMBER: continue
    while pos < len(values) and not math.isnan(values[pos]):
      members[i].append(values[pos])
      pos += 1
    if pos >= len(values): raise ValueError(f"TreeEnsemble: membership_values has no NaN-ended set for MEMBER node {i}")
    pos += 1
  paths: list[list[tuple[int, bool]]] = []
  leaves: list[int] = []
  def walk(node:int, path:list[tuple[int, bool]]):
    if len(path) > n_nodes: raise ValueError("TreeEnsemble: the nodes' true/false ids form a cycle")
    branches = ((True, nodes_truenodeids[node], nodes_trueleafs[node]), (False, nodes_falsenodeids[node], nodes_falseleafs[node]))
    for outcome, child, is_leaf in branches:
      if not is_leaf: walk(child, path + [(node, outcome)])
      else:
        paths.append(path + [(node, outcome)])
        leaves.append(child)
  for root in tree_roots:
    # a tree that is a single leaf: both branches of its root name the same leaf
    if nodes_trueleafs[root] and nodes_falseleafs[root] and nodes_truenodeids[root] == nodes_falsenodeids[root]:
      paths.append([])
      leaves.append(nodes_truenodeids[root])
    else: walk(root, [])
  tests = _tree_tests(x, list(nodes_featureids), modes, splits, members, list(nodes_missing_value_tracks_true or []))
  reached = _paths_reached(tests, paths, n_nodes)
  how = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}.get(aggregate_function)
  if how is None: raise NotImplementedError(f"TreeEnsemble: aggregate_function={aggregate_function} is not supported (0-3)")
  targets = n_targets if n_targets is not None else max(leaf_targetids) + 1
  scores = _aggregate(reached, [weights[lf] for lf in leaves], [leaf_targetids[lf] for lf in leaves], targets, how, len(tree_roots))
  transform = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO"}.get(post_transform)
  if transform is None: raise NotImplementedError(f"TreeEnsemble: post_transform={post_transform} is not supported (0-3)")
  return _post_transform(scores, transform)

# ***** TreeEnsembleRegressor / TreeEnsembleClassifier (ai.onnx.ml 1, 3): nodes named by (tree id, node id), modes as strings, and a
# leaf's weights listed apart (target_* / class_*), several per leaf *****

_LEGACY_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5}

def _legacy_trees(x:Tensor, op:str, treeids:list[int], nodeids:list[int], modes:list[str], featureids:list[int], values:list[float],
                  truenodeids:list[int], falsenodeids:list[int], missing_true:list[int]|None, leaf_trees:list[int], leaf_nodes:list[int],
                  ) -> tuple[Tensor, int]:
  """(batch, entries) 0/1: whether the leaf of each weight entry (leaf_trees[i], leaf_nodes[i]) is reached; and the number of trees."""
  if unknown := sorted({m for m in modes if m != "LEAF" and m not in _LEGACY_MODES}):
    raise NotImplementedError(f"{op}: nodes_modes {unknown} are not supported ({', '.join(_LEGACY_MODES)}, LEAF)")
  index = {(t, n): i for i, (t, n) in enumerate(zip(treeids, nodeids))}
  roots: dict[int, int] = {}
  for i, t in enumerate(treeids): roots.setdefault(t, i)
  paths_to: dict[int, list[list[tuple[int, bool]]]] = {}    # leaf node index -> the paths reaching it
  def walk(node:int, path:list[tuple[int, bool]]):
    if len(path) > len(modes): raise ValueError(f"{op}: the nodes' true/false ids form a cycle")
    if modes[node] == "LEAF":
      paths_to.setdefault(node, []).append(path)
      return
    for outcome, child in ((True, truenodeids[node]), (False, falsenodeids[node])):
      if (treeids[node], child) not in index: raise ValueError(f"{op}: node {nodeids[node]} of tree {treeids[node]} names a missing node {child}")
      walk(index[treeids[node], child], path + [(node, outcome)])
  for root in roots.values(): walk(root, [])
  paths, entry_of_path = [], []
  for e, key in enumerate(zip(leaf_trees, leaf_nodes)):
    if key not in index: raise ValueError(f"{op}: a weight names node {key[1]} of tree {key[0]}, which does not exist")
    for path in paths_to.get(index[key], []):
      paths.append(path)
      entry_of_path.append(e)
  tests = _tree_tests(x, list(featureids), [_LEGACY_MODES.get(m, 0) for m in modes], list(values), [[] for _ in modes],
                      list(missing_true or []), nan_is_missing=True)
  reached = _paths_reached(tests, paths, len(modes))
  # a leaf is reached by at most one of its paths per sample: summing a leaf's paths gives its entries' reach
  gather = np.zeros((len(paths), len(leaf_trees)))
  gather[np.arange(len(paths)), entry_of_path] = 1
  return reached @ Tensor(gather, device=x.device).cast(reached.dtype), len(roots)

def _float_input(x:Tensor) -> Tensor: return x if dtypes.is_float(x.dtype) else x.cast(dtypes.float32)

@onnx_op("TreeEnsembleRegressor", 1, Domain.ML)
def TreeEnsembleRegressor(x:Tensor, aggregate_function:str="SUM", base_values:list[float]|None=None, base_values_as_tensor:Any=None,
                          n_targets:int|None=None, nodes_falsenodeids:list[int]|None=None, nodes_featureids:list[int]|None=None,
                          nodes_hitrates:Any=None, nodes_hitrates_as_tensor:Any=None, nodes_missing_value_tracks_true:list[int]|None=None,
                          nodes_modes:list[str]|None=None, nodes_nodeids:list[int]|None=None, nodes_treeids:list[int]|None=None,
                          nodes_truenodeids:list[int]|None=None, nodes_values:list[float]|None=None, nodes_values_as_tensor:Any=None,
                          post_transform:str="NONE", target_ids:list[int]|None=None, target_nodeids:list[int]|None=None,
                          target_treeids:list[int]|None=None, target_weights:list[float]|None=None, target_weights_as_tensor:Any=None) -> Tensor:
  x = _float_input(x)
  values = _listed(nodes_values_as_tensor) or list(nodes_values or [])
  weights = _listed(target_weights_as_tensor) or list(target_weights or [])
  reached, n_trees = _legacy_trees(x, "TreeEnsembleRegressor", list(nodes_treeids or []), list(nodes_nodeids or []), list(nodes_modes or []),
                                   list(nodes_featureids or []), values, list(nodes_truenodeids or []), list(nodes_falsenodeids or []),
                                   nodes_missing_value_tracks_true, list(target_treeids or []), list(target_nodeids or []))
  targets = n_targets if n_targets is not None else max(target_ids or [0]) + 1
  scores = _aggregate(reached, weights, list(target_ids or []), targets, aggregate_function, n_trees)
  if base := (_listed(base_values_as_tensor) or list(base_values or [])): scores = scores + Tensor(base, device=x.device).cast(scores.dtype)
  return _post_transform(scores, post_transform)

@onnx_op("TreeEnsembleClassifier", 1, Domain.ML)
def TreeEnsembleClassifier(x:Tensor, base_values:list[float]|None=None, base_values_as_tensor:Any=None, class_ids:list[int]|None=None,
                           class_nodeids:list[int]|None=None, class_treeids:list[int]|None=None, class_weights:list[float]|None=None,
                           class_weights_as_tensor:Any=None, classlabels_int64s:list[int]|None=None, classlabels_strings:list[str]|None=None,
                           nodes_falsenodeids:list[int]|None=None, nodes_featureids:list[int]|None=None, nodes_hitrates:Any=None,
                           nodes_hitrates_as_tensor:Any=None, nodes_missing_value_tracks_true:list[int]|None=None,
                           nodes_modes:list[str]|None=None, nodes_nodeids:list[int]|None=None, nodes_treeids:list[int]|None=None,
                           nodes_truenodeids:list[int]|None=None, nodes_values:list[float]|None=None, nodes_values_as_tensor:Any=None,
                           post_transform:str="NONE"):
  x = _float_input(x)
  labels = classlabels_int64s if classlabels_int64s is not None else classlabels_strings
  if not labels: raise ValueError("TreeEnsembleClassifier: classlabels_int64s or classlabels_strings is required")
  values = _listed(nodes_values_as_tensor) or list(nodes_values or [])
  weights = _listed(class_weights_as_tensor) or list(class_weights or [])
  ids = list(class_ids or [])
  reached, _ = _legacy_trees(x, "TreeEnsembleClassifier", list(nodes_treeids or []), list(nodes_nodeids or []), list(nodes_modes or []),
                             list(nodes_featureids or []), values, list(nodes_truenodeids or []), list(nodes_falsenodeids or []),
                             nodes_missing_value_tracks_true, list(class_treeids or []), list(class_nodeids or []))
  scores = _aggregate(reached.cast(dtypes.float32), weights, ids, len(labels), "SUM", 1)
  if base := (_listed(base_values_as_tensor) or list(base_values or [])): scores = scores + Tensor(base, dtype=dtypes.float32, device=x.device)
  if len(set(ids)) == 1:
    # binary: the first column's score is the positive class's (column 1); column 0 becomes its complement (NONE) or its negation
    # (before a transform), as onnx's reference does
    positive = scores[:, 0:1]
    scores = (1 - positive if post_transform == "NONE" else -positive).cat(positive, scores[:, 2:], dim=1)
  scores = _post_transform(scores, post_transform)
  best = scores.argmax(axis=1)
  if len(labels) == 1:
    # a single label names the positive class: column 1 means it, column 0 means 0 (the reference's convention)
    if classlabels_int64s is None or labels[0] != 1:
      raise NotImplementedError(f"TreeEnsembleClassifier: a single class label {labels[0]!r} is not supported (only the int64 label 1)")
    return best.cast(dtypes.int64), scores
  if classlabels_strings is not None: return np.array(labels, dtype=object)[best.numpy()], scores
  return Tensor(list(labels), dtype=dtypes.int64, device=x.device)[best], scores
