"""The ai.onnx.ml domain: LabelEncoder, ArrayFeatureExtractor, Binarizer, TreeEnsemble, ..."""
from __future__ import annotations
