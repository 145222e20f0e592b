"""Signal processing: DFT, STFT, window functions, MelWeightMatrix."""
from __future__ import annotations
