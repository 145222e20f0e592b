"""Datasets downloaded through helpers.fetch (cached in the download directory): MNIST and Fashion-MNIST as uint8 tensors."""
from __future__ import annotations
import os
import struct
from tinygrad.tensor import Tensor
from tinygrad.dtype import dtypes
from tinygrad.helpers import fetch, prod

__all__ = ["mnist"]

# where the gzipped IDX files are; MNIST_URL / FASHION_MNIST_URL in the environment (or these attributes) point elsewhere, e.g. a mirror
MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"

# IDX: a big-endian header (0, 0, element type, number of dimensions), one big-endian uint32 size per dimension, then the elements
_IDX_UBYTE = 0x08

def _idx_file(base_url:str, name:str, ndim:int, device:str|None) -> Tensor:
  path = fetch(base_url + name, gunzip=True)
  data = path.read_bytes()
  if len(data) < 4 + 4*ndim: raise ValueError(f"{path} ({base_url+name}): {len(data)} bytes is too short for an IDX header")
  zero, typ, nd = struct.unpack(">HBB", data[:4])
  if zero != 0 or typ != _IDX_UBYTE or nd != ndim:
    raise ValueError(f"{path} ({base_url+name}): expected an IDX file of unsigned bytes with {ndim} dimensions, got magic {data[:4].hex()}")
  shape = struct.unpack(f">{ndim}I", data[4:4+4*ndim])
  if len(data) != 4 + 4*ndim + prod(shape):
    raise ValueError(f"{path} ({base_url+name}): the header says shape {shape} ({prod(shape)} bytes) but {len(data) - 4 - 4*ndim} bytes follow")
  return Tensor(data[4+4*ndim:], dtype=dtypes.uint8, device=device).reshape(shape)

def mnist(device:str|None=None, fashion:bool=False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """(train images (60000, 1, 28, 28), train labels (60000,), test images (10000, 1, 28, 28), test labels (10000,)), all uint8.
  fashion: Fashion-MNIST instead of the digits."""
  base = os.environ.get("FASHION_MNIST_URL", FASHION_MNIST_URL) if fashion else os.environ.get("MNIST_URL", MNIST_URL)
  def images(name): return (x := _idx_file(base, name, 3, device)).reshape(x.shape[0], 1, *x.shape[1:])
  return images("train-images-idx3-ubyte.gz"), _idx_file(base, "train-labels-idx1-ubyte.gz", 1, device), \
         images("t10k-images-idx3-ubyte.gz"), _idx_file(base, "t10k-labels-idx1-ubyte.gz", 1, device)
