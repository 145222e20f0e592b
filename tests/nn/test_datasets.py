# tinygrad.nn.datasets.mnist through helpers.fetch, against a local HTTP server on 127.0.0.1 serving small gzipped IDX files (their
# checksums stand in for the real files' ones), and the checksum check that rejects any other file.
import gzip
import hashlib
import http.server
import pathlib
import struct
import threading
import numpy as np
import pytest
import tinygrad.helpers as helpers
from tinygrad import dtypes
from tinygrad.nn import datasets

pytestmark = pytest.mark.cpu

def _idx(arr:np.ndarray) -> bytes:
  return struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.astype(np.uint8).tobytes()

@pytest.fixture
def server(tmp_path, monkeypatch):
  rng = np.random.default_rng(0)
  arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (5, 28, 28)), "train-labels-idx1-ubyte.gz": rng.integers(0, 10, 5),
            "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (3, 28, 28)), "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 3)}
  files = {"/mnist/" + k: gzip.compress(_idx(v)) for k, v in arrays.items()}
  requests = []
  class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
      requests.append(self.path)
      if (body := files.get(self.path)) is None: return self.send_error(404)
      self.send_response(200)
      self.send_header("Content-Length", str(len(body)))
      self.end_headers()
      self.wfile.write(body)
    def log_message(self, *args): pass
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
  threading.Thread(target=httpd.serve_forever, daemon=True).start()
  # downloads go to a fresh cache directory
  monkeypatch.setattr(helpers, "cache_dir", str(tmp_path / "cache"))
  monkeypatch.setattr(datasets, "MNIST_URL", f"http://127.0.0.1:{httpd.server_address[1]}/mnist/")
  monkeypatch.delenv("MNIST_URL", raising=False)
  # the test files' checksums as the known ones (mnist() checks every download against them)
  monkeypatch.setitem(datasets.CHECKSUMS, "mnist", {k.split("/")[-1]: ("sha256", hashlib.sha256(v).hexdigest()) for k, v in files.items()})
  yield arrays, files, requests
  httpd.shutdown()
  httpd.server_close()

def test_mnist_downloads_parses_and_caches(server):
  arrays, files, requests = server
  X_train, Y_train, X_test, Y_test = datasets.mnist()
  assert X_train.shape == (5, 1, 28, 28) and Y_train.shape == (5,) and X_test.shape == (3, 1, 28, 28) and Y_test.shape == (3,)
  assert all(t.dtype == dtypes.uint8 for t in (X_train, Y_train, X_test, Y_test))
  np.testing.assert_array_equal(X_train.numpy()[:, 0], arrays["train-images-idx3-ubyte.gz"])
  np.testing.assert_array_equal(Y_test.numpy(), arrays["t10k-labels-idx1-ubyte.gz"])
  assert sorted(requests) == sorted(files)
  # a second load comes from the download cache
  X2 = datasets.mnist()[0]
  assert len(requests) == 4
  np.testing.assert_array_equal(X2.numpy(), X_train.numpy())

@pytest.mark.parametrize("body,match", [
  (struct.pack(">HBB3I", 0, 8, 3, 9, 28, 28) + bytes(5 * 28 * 28), r"train-images.*shape \(9, 28, 28\)"),   # claims more than it holds
  (b"\x00\x00\x0d\x03" + bytes(20), "IDX file of unsigned bytes"),                                        # float elements
  (b"\x00\x00", "too short"),
])
def test_mnist_rejects_bad_idx(server, body, match, monkeypatch):
  _, files, _ = server
  files["/mnist/train-images-idx3-ubyte.gz"] = bad = gzip.compress(body)
  monkeypatch.setitem(datasets.CHECKSUMS["mnist"], "train-images-idx3-ubyte.gz", ("sha256", hashlib.sha256(bad).hexdigest()))
  with pytest.raises(ValueError, match=match): datasets.mnist()

def test_mnist_rejects_a_file_with_the_wrong_checksum(server):
  arrays, files, requests = server
  good = files["/mnist/t10k-labels-idx1-ubyte.gz"]
  # another file where the test labels should be: a valid IDX file, but not the known one
  files["/mnist/t10k-labels-idx1-ubyte.gz"] = gzip.compress(_idx(np.array([1, 2, 3])))
  with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte\.gz from http://127\.0\.0\.1:\d+/mnist/t10k-labels-idx1-ubyte\.gz: "
                     r"sha256 [0-9a-f]{64} is not the mnist file's [0-9a-f]{64}"):
    datasets.mnist()
  # the bad download is not cached: once the server has the right file, it is downloaded again and loads
  files["/mnist/t10k-labels-idx1-ubyte.gz"] = good
  n = len(requests)
  np.testing.assert_array_equal(datasets.mnist()[3].numpy(), arrays["t10k-labels-idx1-ubyte.gz"])
  assert requests[n:] == ["/mnist/t10k-labels-idx1-ubyte.gz"]

def test_every_file_has_a_known_checksum():
  # a checksum (sha256 for MNIST, Zalando's published md5 for Fashion-MNIST) for each of the four files of each dataset
  names = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}
  assert set(datasets.CHECKSUMS) == {"mnist", "fashion"} and all(set(v) == names for v in datasets.CHECKSUMS.values())
  for algo, h in (x for v in datasets.CHECKSUMS.values() for x in v.values()):
    assert len(h) == hashlib.new(algo).digest_size * 2 and int(h, 16) >= 0

def test_mnist_keeps_a_bad_download_aside_naming_both_hashes(server):
  _, files, _ = server
  files["/mnist/train-labels-idx1-ubyte.gz"] = other = gzip.compress(_idx(np.array([7, 7])))
  want = datasets.CHECKSUMS["mnist"]["train-labels-idx1-ubyte.gz"][1]
  with pytest.raises(ValueError) as e: datasets.mnist()
  got = hashlib.sha256(other).hexdigest()
  assert got in str(e.value) and want in str(e.value)
  # the download is kept under <file>.bad (named in the error), with the content that was served
  bad = [p for p in (pathlib.Path(helpers.cache_dir) / "downloads").iterdir() if p.name.endswith(".bad")]
  assert len(bad) == 1 and bad[0].read_bytes() == other and str(bad[0]) in str(e.value)

def _write_local_mnist(d, arrays):
  d.mkdir()
  for name, arr in arrays.items(): (d / name).write_bytes(gzip.compress(_idx(arr)))
  return {name: (d / name).read_bytes() for name in arrays}

@pytest.mark.parametrize("as_url", [False, True])
def test_mnist_uses_a_local_copy_as_given_and_never_deletes_it(tmp_path, monkeypatch, as_url):
  # a user's own copy (here: not the official files, so no official checksum matches) given as MNIST_URL=/dir/ or file:///dir/
  rng = np.random.default_rng(1)
  arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (4, 28, 28)), "train-labels-idx1-ubyte.gz": rng.integers(0, 10, 4),
            "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (2, 28, 28)), "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 2)}
  before = _write_local_mnist(d := tmp_path / "mine", arrays)
  monkeypatch.setattr(helpers, "cache_dir", str(tmp_path / "cache"))
  monkeypatch.setenv("MNIST_URL", d.as_uri() + "/" if as_url else str(d) + "/")
  X_train, Y_train, X_test, Y_test = datasets.mnist()
  np.testing.assert_array_equal(X_train.numpy()[:, 0], arrays["train-images-idx3-ubyte.gz"])
  np.testing.assert_array_equal(Y_train.numpy(), arrays["train-labels-idx1-ubyte.gz"])
  np.testing.assert_array_equal(X_test.numpy()[:, 0], arrays["t10k-images-idx3-ubyte.gz"])
  np.testing.assert_array_equal(Y_test.numpy(), arrays["t10k-labels-idx1-ubyte.gz"])
  assert {p.name: p.read_bytes() for p in d.iterdir()} == before

def test_mnist_local_copy_missing_file_is_a_clear_error(tmp_path, monkeypatch):
  monkeypatch.setenv("MNIST_URL", str(tmp_path) + "/")
  with pytest.raises(FileNotFoundError, match=r"train-images-idx3-ubyte\.gz.*local file"): datasets.mnist()
