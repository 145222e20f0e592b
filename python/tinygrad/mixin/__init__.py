# Operator mixins attached to UOp and UPat (see tinygrad/uop/base.py).
