# tinygrad.nn.datasets.mnist through helpers.fetch, against a local HTTP server on 127.0.0.1 serving small gzipped IDX files.
import gzip
import http.server
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
def test_mnist_rejects_bad_idx(server, body, match):
  _, files, _ = server
  files["/mnist/train-images-idx3-ubyte.gz"] = gzip.compress(body)
  with pytest.raises(ValueError, match=match): datasets.mnist()
