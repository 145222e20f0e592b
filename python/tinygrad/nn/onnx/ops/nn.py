"""Neural-network operators: convolutions, pooling, normalizations, dropout, recurrent layers, attention, losses, detection."""
from __future__ import annotations
