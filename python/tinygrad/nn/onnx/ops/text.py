"""String operators on host (numpy) string tensors: StringNormalizer, StringConcat, StringSplit, RegexFullMatch."""
from __future__ import annotations
