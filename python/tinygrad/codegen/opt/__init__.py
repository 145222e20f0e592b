"""Kernel optimizations as data: an Opt names one change of a kernel's ranges, applied by tinygrad/codegen/opt/kernel.py.

  kernel.py     the ranges of a kernel AST and apply_opt: an Opt -> the AST with that range split/retyped (KernelOptError if invalid)
  tc.py         the TC action: a matmul's reduce on a renderer's tensor cores (a warp's WMMA), called by apply_opt
  heuristic.py  hand_coded_optimizations: the Opts chosen for a kernel without a search (NOOPT=1: none)
  search.py     beam_search (BEAM=N): the Opts found by compiling and timing candidates, in worker processes, cached on disk
"""
from __future__ import annotations
from dataclasses import dataclass
from enum import Enum, auto

class OptOps(Enum):
  TC = auto(); UPCAST = auto(); UNROLL = auto(); LOCAL = auto(); THREAD = auto()  # noqa: E702
  GROUP = auto(); GROUPTOP = auto(); NOLOCALS = auto(); PADTO = auto(); SWAP = auto()  # noqa: E702
  PACK = auto()   # not in tinygrad 0.14: a load's panel copied into contiguous scratch memory (codegen/opt/kernel.py _pack)
  CHAIN = auto()  # not in tinygrad 0.14: a reduce's unrolled products accumulate as a chain of fused multiply-adds (codegen pm_fuse_mulacc)
  def __lt__(self, x:OptOps): return self.value < x.value
  def __repr__(self): return str(self)

@dataclass(frozen=True, order=True)
class Opt:
  """One optimization: `op` on the range at position `axis` by `arg` (an amount; 0: the whole range)."""
  op: OptOps
  axis: int|None = None
  arg: int|tuple|None = None
  def __repr__(self): return f"Opt(op={self.op}, axis={self.axis}, arg={self.arg})"

class KernelOptError(Exception):
  """An Opt that can't apply to this kernel on this device (a search skips it)."""

def check(cond:bool, msg:str=""):
  if not cond: raise KernelOptError(msg)
