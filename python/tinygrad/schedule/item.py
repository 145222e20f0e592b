"""ScheduleItem: one kernel (or copy) of a schedule and its buffers, and the schedule as tinygrad 0.14's LINEAR UOp of CALLs."""
from __future__ import annotations
from dataclasses import dataclass, field
from tinygrad.uop.ops import UOp, Ops
from tinygrad.dtype import dtypes
from tinygrad.device import Buffer
from tinygrad.schedule.buffers import buffer_of

@dataclass
class ScheduleItem:
  """One kernel (or one copy, ast.op is COPY): its AST and its buffers in PARAM slot order (bufs[0] is the output); buf_uops are the
  BUFFER UOps behind bufs."""
  ast: UOp
  bufs: list[Buffer]
  outputs: list[UOp] = field(default_factory=list)
  buf_uops: list[UOp] = field(default_factory=list)
  @property
  def name(self) -> str: return self.ast.arg.name
  def call(self) -> UOp:
    """This item as tinygrad 0.14's CALL UOp: src (ast, *BUFFER UOps)."""
    return UOp(Ops.CALL, dtypes.void, (self.ast, *self.buf_uops))
  @staticmethod
  def from_call(call:UOp) -> ScheduleItem:
    if call.op is not Ops.CALL or not call.src: raise ValueError(f"expected a CALL UOp of a schedule, got {call.op}")
    return ScheduleItem(call.src[0], [buffer_of(b) for b in call.src[1:]], buf_uops=list(call.src[1:]))

def schedule_to_linear(items:list[ScheduleItem]) -> UOp:
  """A schedule as tinygrad 0.14's LINEAR UOp: one CALL per item, in run order (engine.realize.run_linear runs it)."""
  return UOp(Ops.LINEAR, dtypes.void, tuple(si.call() for si in items))
