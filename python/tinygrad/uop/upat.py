"""UPat's sugar: the helper constructors (UPat.var, UPat.cvar, UPat.const, UPat.any, ...), the node-building methods (x.cast(),
x.load(), x.store(), ...) and the operators of tinygrad/mixin (UPat.var("x") + 1), attached to the core's UPat. The rule tables are
written with them, so a module that builds one imports UPat from here (or from uop/ops.py, above everything).

The core gives a UPat the location of the first frame outside this file and tinygrad/mixin/ (crates/uop-core/src/upat.rs): a rule
built with the sugar is located where it is written."""
from __future__ import annotations
import functools
from typing import Any
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.base import UPat, _attach
from tinygrad.dtype import DType, dtypes, ConstType
from tinygrad.mixin.mathtraits import OperatorMixin, MathTrait, UPatMathTrait

__all__ = ["UPat"]

class _UPatMethods:
  @property
  def dtype(self:UPat) -> DType: return self.match_dtype[0] if self.match_dtype is not None else dtypes.void
  @staticmethod
  def any(*src:UPat) -> UPat: return UPat(src=src, is_any=True)
  @staticmethod
  @functools.cache
  def var(name:str|None=None, dtype:DType|tuple[DType, ...]|None=None) -> UPat: return UPat(dtype=dtype, name=name)
  @staticmethod
  @functools.cache
  def cvar(name:str|None=None, dtype:DType|tuple[DType, ...]|None=None, arg:Any=None) -> UPat: return UPat(Ops.CONST, dtype, name=name, arg=arg)
  @staticmethod
  def const(b:ConstType, dtype:DType|tuple[DType, ...]|None=None) -> UPat: return UPat(Ops.CONST, dtype=dtype, arg=b)
  def named(self:UPat, name:str) -> UPat:
    return UPat(self.op, self.match_dtype, self._in_src, self.arg, name, self.allow_any_len, self.custom_early_reject,
                is_any=self.is_any, tag=self.match_tag)
  def or_casted(self:UPat, name:str|None=None) -> UPat:
    return UPat.any(self if name is None else self.named(name), UPat(Ops.CAST, name=name, src=(self,)))
  def or_after(self:UPat, name:str|None=None) -> UPat:
    me = self if name is None else self.named(name)
    return UPat.any(me, UPat(Ops.AFTER, name=name, src=(self,), allow_any_len=True))
  def f(self:UPat, op:Ops, **kwargs) -> UPat: return UPat(op, src=(self,), **kwargs)
  def sink(*srcs:UPat|None, **kwargs) -> UPat: return UPat(Ops.SINK, src=tuple(x for x in srcs if x is not None), **kwargs)
  def index(self:UPat, *srcs:UPat|None, **kwargs) -> UPat: return UPat(Ops.INDEX, src=(self,)+tuple(x for x in srcs if x is not None), **kwargs)
  def cast(self:UPat, dtype:DType|None=None, **kwargs) -> UPat:
    if dtype is not None and self.match_dtype == (dtype,): return self
    return UPat(Ops.CAST, dtype, (self,), **kwargs)
  def bitcast(self:UPat, dtype:DType|None=None) -> UPat: return UPat(Ops.BITCAST, dtype, (self,))
  def load(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.LOAD, src=(self,)+src, **kwargs)
  def store(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.STORE, src=(self,)+src, **kwargs)
  def after(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.AFTER, self.match_dtype, (self,)+src, **kwargs)
  def end(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.END, src=(self,)+src, **kwargs)
  def broadcast(self:UPat, **kwargs) -> UPat: return UPat(Ops.STACK, self.match_dtype, src=self, **kwargs)
  def reduce(self:UPat, *src:UPat, **kwargs) -> UPat:
    if isinstance(arg:=kwargs.pop("arg", None), Ops): arg = (arg, 0)
    return UPat(Ops.REDUCE, self.match_dtype, src=(self,)+src, arg=arg, **kwargs)
  def alu(self:UPat, op:Ops, *src:UPat) -> UPat:
    asrc = (self,)+src
    return UPat(op, dtypes.bool if op in GroupOp.Comparison else asrc[-1].match_dtype, list(asrc) if op in GroupOp.Commutative else asrc)
_attach(UPat, _UPatMethods)
for _m in (OperatorMixin, MathTrait, UPatMathTrait): _attach(UPat, _m)
