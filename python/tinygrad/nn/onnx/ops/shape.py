"""Shapes and movement: reshape, transpose, concat/split, slice/pad, gather/scatter, shape-making ops, resize."""
from __future__ import annotations
