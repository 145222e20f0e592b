"""Tensor cores: the matrix instructions a renderer declares in Renderer.tensor_cores, for the optimizer's TC action (codegen/opt/tc.py).

A TensorCore is one warp-wide instruction D(M x N) = A(M x K) @ B(K x N) + C(M x N), dims = (N, M, K) as in tinygrad 0.14: each of
the warp's `threads` threads holds elements_per_thread = (A, B, C) of the matrices' elements (its fragments) and gets as many D
elements as C ones back. Which element a thread holds is the layout: `layout(lane, bits)` -> for A (m, k), for B (k, n), for C/D
(m, n), where `bits` are the bits of the element's index (least significant first). The layouts are written once, on plain ints or
on UOps: the TC lowering builds its index math with them (lane: the warp's range) and the PYTHON device's emulation (emulate_wmma)
uses them to gather and scatter the fragments, so a kernel made for tensor cores runs without a GPU. The CUDA layouts are those of
the PTX ISA's mma.m16n8k16 (floating point types): lane = 4*groupID + threadID_in_group.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable
from tinygrad.dtype import DType, dtypes

def _m16n8k16_a(lane, e) -> tuple[Any, Any]:
  # a0..a7: rows groupID (+8 for index bit 1), columns 2*threadID_in_group + bit 0 (+8 for index bit 2)
  return lane // 4 + 8 * e[1], (lane % 4) * 2 + e[0] + 8 * e[2]
def _m16n8k16_b(lane, e) -> tuple[Any, Any]:
  # b0..b3: rows 2*threadID_in_group + bit 0 (+8 for index bit 1), column groupID
  return (lane % 4) * 2 + e[0] + 8 * e[1], lane // 4
def _m16n8k16_c(lane, e) -> tuple[Any, Any]:
  # c0..c3 (and d0..d3): row groupID (+8 for index bit 1), column 2*threadID_in_group + bit 0
  return lane // 4 + 8 * e[1], (lane % 4) * 2 + e[0]

@dataclass(frozen=True)
class TensorCore:
  name: str                             # the instruction, for CUDA its PTX name
  dims: tuple[int, int, int]            # (N, M, K), tinygrad 0.14's order
  threads: int                          # the warp
  elements_per_thread: tuple[int, int, int]  # of A, B and C (D has C's)
  dtype_in: DType                       # A and B
  dtype_out: DType                      # C and D: the accumulation
  a_layout: Callable
  b_layout: Callable
  c_layout: Callable
  def __repr__(self): return f"TensorCore({self.name})"
  def bits(self, i:int, which:int) -> list[int]:
    """The bits of element index i of fragment `which` (0: A, 1: B, 2: C), least significant first."""
    return [(i >> b) & 1 for b in range(self.elements_per_thread[which].bit_length() - 1)]
  def coords(self, which:int, lane:int, i:int) -> tuple[int, int]:
    """The matrix coordinates of element i of lane's fragment `which` (0: A (m, k), 1: B (k, n), 2: C (m, n))."""
    return (self.a_layout, self.b_layout, self.c_layout)[which](lane, self.bits(i, which))

def _cuda_m16n8k16(dtype_in:DType) -> TensorCore:
  ptx = {dtypes.half: "f16", dtypes.bfloat16: "bf16"}[dtype_in]
  return TensorCore(f"mma.sync.aligned.m16n8k16.row.col.f32.{ptx}.{ptx}.f32", (8, 16, 16), 32, (8, 4, 4), dtype_in, dtypes.float32,
                    _m16n8k16_a, _m16n8k16_b, _m16n8k16_c)

CUDA_SM80 = [_cuda_m16n8k16(dtypes.half), _cuda_m16n8k16(dtypes.bfloat16)]

TENSOR_CORES = {tc.name: tc for tc in CUDA_SM80}   # by name: how an emulated kernel names its instruction

def cuda_tensor_cores(arch:str) -> list[TensorCore]:
  """The tensor cores of an NVIDIA arch ("sm_80"): mma.sync m16n8k16 with fp16/bf16 inputs and fp32 accumulation from sm_80 on."""
  try: ver = int(arch.removeprefix("sm_").rstrip("a"))
  except ValueError: return []
  return list(CUDA_SM80) if ver >= 80 else []

def emulate_wmma(tc:TensorCore, frags:list) -> list[list[float]]:
  """What each lane of a warp gets from the instruction: frags[lane] = (A elements, B elements, C elements), the result per lane its D
  elements. The products are exact in float32 (fp16/bf16 inputs); they are summed in float64 and rounded to float32 once per
  element, a model of the hardware's wide accumulation."""
  import struct
  r32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]  # noqa: E731
  N, M, K = tc.dims
  A = [[0.0] * K for _ in range(M)]
  B = [[0.0] * N for _ in range(K)]
  for lane, (a, b, _) in enumerate(frags):
    for i, v in enumerate(a):
      m, k = tc.coords(0, lane, i)
      A[m][k] = v
    for i, v in enumerate(b):
      k, n = tc.coords(1, lane, i)
      B[k][n] = v
  ret = []
  for lane, (_, _, c) in enumerate(frags):
    out = []
    for i, v in enumerate(c):
      m, n = tc.coords(2, lane, i)
      out.append(r32(v + sum(A[m][k] * B[k][n] for k in range(K))))
    ret.append(out)
  return ret
