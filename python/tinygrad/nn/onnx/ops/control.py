"""Control flow (If, Loop, Scan) and the sequence and optional types."""
from __future__ import annotations
