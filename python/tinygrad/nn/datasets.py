"""Datasets downloaded through helpers.fetch (cached in the download directory): MNIST and Fashion-MNIST as uint8 tensors. Each
downloaded file is checked against the published checksum of the real dataset file before it is parsed; local files (the URL a
local directory) are the user's own and are used as they are."""
from __future__ import annotations
import gzip
import hashlib
import os
import pathlib
import struct
import urllib.parse
import urllib.request
from tinygrad.tensor import Tensor
from tinygrad.dtype import dtypes
from tinygrad.helpers import fetch, prod

__all__ = ["mnist"]

# where the gzipped IDX files are; MNIST_URL / FASHION_MNIST_URL in the environment (or these attributes) point elsewhere, e.g. a mirror
MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"

# the checksums of the real gzipped files (the same on every mirror): sha256 for MNIST; Fashion-MNIST publishes md5
CHECKSUMS: dict[str, dict[str, tuple[str, str]]] = {
  "mnist": {"train-images-idx3-ubyte.gz": ("sha256", "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
            "train-labels-idx1-ubyte.gz": ("sha256", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
            "t10k-images-idx3-ubyte.gz": ("sha256", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
            "t10k-labels-idx1-ubyte.gz": ("sha256", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6")},
  "fashion": {"train-images-idx3-ubyte.gz": ("md5", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
              "train-labels-idx1-ubyte.gz": ("md5", "25c81989df183df01b3e8a0aad5dffbe"),
              "t10k-images-idx3-ubyte.gz": ("md5", "bef4ecab320f06d8554ea6380940ec79"),
              "t10k-labels-idx1-ubyte.gz": ("md5", "bb300cfdad3c16e7a12a480ee83cd310")},
}

# IDX: a big-endian header (0, 0, element type, number of dimensions), one big-endian uint32 size per dimension, then the elements
_IDX_UBYTE = 0x08

def _local_path(url:str) -> pathlib.Path|None:
  """The file a local url names (a path, or a file:// URL), None for a url to download."""
  if url.startswith(("/", ".")): return pathlib.Path(url)
  if url.startswith("file://"): return pathlib.Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
  return None

def _download(base_url:str, name:str, dataset:str) -> bytes:
  """The gzipped file `name`, decompressed: a local file (MNIST_URL=/dir/) is the user's and is read as it is; a download (or its cached
  copy) must match the dataset's known checksum, else it is moved aside to `<file>.bad` (the next call downloads again) and rejected."""
  url = base_url + name
  if (local := _local_path(url)) is not None:
    try: raw = local.read_bytes()
    except OSError as e: raise FileNotFoundError(f"{name}: can't read the local file {local} (MNIST_URL={base_url}): {e}") from e
  else:
    path = fetch(url)
    raw = path.read_bytes()
    algo, want = CHECKSUMS[dataset][name]
    if (got := hashlib.new(algo, raw).hexdigest()) != want:
      path.replace(bad := path.with_name(path.name + ".bad"))
      raise ValueError(f"{name} from {url}: {algo} {got} is not the {dataset} file's {want} (a corrupted or different file; "
                       f"kept as {bad})")
  try: return gzip.decompress(raw)
  except (OSError, EOFError) as e: raise ValueError(f"{name} from {url}: not a gzip file ({e})") from e

def _idx_file(base_url:str, name:str, ndim:int, device:str|None, dataset:str) -> Tensor:
  where = f"{name} from {base_url + name}"
  data = _download(base_url, name, dataset)
  if len(data) < 4 + 4*ndim: raise ValueError(f"{where}: {len(data)} bytes is too short for an IDX header")
  zero, typ, nd = struct.unpack(">HBB", data[:4])
  if zero != 0 or typ != _IDX_UBYTE or nd != ndim:
    raise ValueError(f"{where}: expected an IDX file of unsigned bytes with {ndim} dimensions, got magic {data[:4].hex()}")
  shape = struct.unpack(f">{ndim}I", data[4:4+4*ndim])
  if len(data) != 4 + 4*ndim + prod(shape):
    raise ValueError(f"{where}: the header says shape {shape} ({prod(shape)} bytes) but {len(data) - 4 - 4*ndim} bytes follow")
  return Tensor(data[4+4*ndim:], dtype=dtypes.uint8, device=device).reshape(shape)

def mnist(device:str|None=None, fashion:bool=False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """(train images (60000, 1, 28, 28), train labels (60000,), test images (10000, 1, 28, 28), test labels (10000,)), all uint8.
  fashion: Fashion-MNIST instead of the digits."""
  base = os.environ.get("FASHION_MNIST_URL", FASHION_MNIST_URL) if fashion else os.environ.get("MNIST_URL", MNIST_URL)
  ds = "fashion" if fashion else "mnist"
  def images(name): return (x := _idx_file(base, name, 3, device, ds)).reshape(x.shape[0], 1, *x.shape[1:])
  return images("train-images-idx3-ubyte.gz"), _idx_file(base, "train-labels-idx1-ubyte.gz", 1, device, ds), \
         images("t10k-images-idx3-ubyte.gz"), _idx_file(base, "t10k-labels-idx1-ubyte.gz", 1, device, ds)
