"""Helpers shared by test files (import them as `from tests.helpers.kernels import ast_of`); test modules never import each other.

  devices.py        DEVICES (the devices a numerics test runs on) and HAVE_CC
  kernels.py        one Tensor's kernel AST, running a lowered AST on its buffers, typed-range kinds, seeded random arrays
  linear_kernels.py hand-built linear kernels (Linear), running them on a device, and small sample kernels
  gradcheck.py      finite-difference gradient checks
  memory.py         the memory planner's no-live-overlap check
  programs.py       one random Tensor op with its numpy twin (random programs, hypothesis)
  numpy_ref.py      numpy references for sliding windows and convolution
  torch_compare.py  the torch group's compare() (skips the importing module without torch)
  bpe.py            tokenizer vocabularies trained in the test on a paragraph (byte-level BPE, SentencePiece) as GGUF tokenizer.ggml.* metadata
"""
