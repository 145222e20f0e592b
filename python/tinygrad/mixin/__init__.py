# Operator mixins attached to UOp and UPat (see tinygrad/uop/ops.py).
