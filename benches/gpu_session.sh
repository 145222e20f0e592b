#!/usr/bin/env bash
# Issue 15 on a lent GPU: one phase per device call (see benches/README.md, "Issue 15 on a lent GPU"). Run from the repository root.
#   install  wheels from .whl/ into /tmp/site (ours) and /tmp/site-ref (tinygrad 0.14.0), no network (pip --no-index)
#   test     pytest -m gpu (the GPU's own tests), then the device-parametrized cases on CUDA (TEST_CUDA=1 -m gpu) -> $OUT/test_*.txt
#   nccl     NCCL (runtime/support/nccl.py) as the image has it (its ~350 MB wheel can't travel in .whl/): version, the NCCL tests (one
#            GPU: a communicator on device buffers; two: the sharded all-reduce as one collective, and mpirun -n 2 where Open MPI is)
#                                                                                           -> $OUT/nccl.txt, test_nccl.txt
#   demo     the digits demo on DEV=CUDA                                                   -> $OUT/demo.txt
#   bench    bench_gpu.py with BEAM=${BEAM:-2}, then the cold compile via compare.py       -> $OUT/bench_gpu*.json
# Phases run in the order given (`install test`: a fresh machine keeps nothing). Every phase but install first checks that a GPU is usable and fails saying so when not.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: benches/gpu_session.sh PHASE... (install test nccl demo bench)" >&2; exit 2; }
OUT="${OUT:-/tmp/gpu_out}"; mkdir -p "$OUT"
PY="${PYTHON:-python3}"
SITE="${SITE:-/tmp/site}"; SITE_REF="${SITE_REF:-/tmp/site-ref}"
ours() { PYTHONPATH="$SITE" "$PY" "$@"; }
need_gpu() {
  [ -d "$SITE/tinygrad" ] || { echo "gpu_session: $SITE has no tinygrad: run the install phase first (same call)" >&2; exit 2; }
  ours -c "from tinygrad.runtime.ops_cuda import cuda_usable; import sys; sys.exit(0 if cuda_usable() else 1)" ||
    { echo "gpu_session: no usable NVIDIA GPU (cuda-python, driver and GPU needed)" >&2; exit 3; }
}
for phase in "$@"; do
echo "== gpu_session: $phase" >&2
case "$phase" in
  install)
    ls .whl/*.whl >/dev/null || { echo "gpu_session: no wheels in .whl/" >&2; exit 2; }
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/tinygrad-0.14.0+rust-*.whl
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_REF" .whl/tinygrad-0.14.0-py3-*.whl
    ours -c "import tinygrad, tinygrad._core; print('ours', tinygrad.__file__)" | tee "$OUT/install.txt"
    PYTHONPATH="$SITE_REF" "$PY" -c "import tinygrad; print('ref', tinygrad.__file__)" | tee -a "$OUT/install.txt" ;;
  test)
    need_gpu
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
    # a failing test file does not stop the next one: each rc goes to $OUT/test_rc.txt, and the phase fails at the end if any did
    rc=0
    ours -m pytest -q -p no:cacheprovider --rootdir=. -m gpu > "$OUT/test_gpu.txt" 2>&1 || rc=$?
    echo "-m gpu rc=$rc" | tee "$OUT/test_rc.txt"; tail -3 "$OUT/test_gpu.txt"
    rc2=0   # the device-parametrized tests (DEVICES), their CUDA cases only: TEST_CUDA=1 adds them, marked gpu
    TEST_CUDA=1 ours -m pytest -q -p no:cacheprovider -n 8 --rootdir=. -m gpu --ignore=tests/runtime/test_cuda.py > "$OUT/test_tensor_cuda.txt" 2>&1 || rc2=$?
    echo "TEST_CUDA=1 -m gpu rc=$rc2" | tee -a "$OUT/test_rc.txt"; tail -3 "$OUT/test_tensor_cuda.txt"
    [ "$rc" = 0 ] && [ "$rc2" = 0 ] ;;
  nccl)
    need_gpu
    ours -c "from tinygrad.runtime.support import nccl; from tinygrad.runtime.ops_cuda import device_count; print('NCCL', nccl.version(), 'GPUs', device_count())" \
      > "$OUT/nccl.txt" 2>&1 || { cat "$OUT/nccl.txt" >&2; echo "gpu_session: no NCCL here (pip install nvidia-nccl-cu12 on the image)" >&2; exit 4; }
    cat "$OUT/nccl.txt"
    rc=0
    ours -m pytest -q -p no:cacheprovider --rootdir=. -rs tests/runtime/test_nccl.py tests/distributed/test_distributed.py -k "nccl" \
      > "$OUT/test_nccl.txt" 2>&1 || rc=$?
    echo "nccl rc=$rc"; tail -6 "$OUT/test_nccl.txt"
    [ "$rc" = 0 ] ;;
  demo)
    need_gpu
    DEV=CUDA DEBUG=1 ours -m tinygrad.apps.demo 2>&1 | tee "$OUT/demo.txt" | tail -20 ;;
  bench)
    need_gpu
    DEV=CUDA BEAM="${BEAM:-2}" ours benches/bench_gpu.py > "$OUT/bench_gpu.json"
    tail -c 2000 "$OUT/bench_gpu.json"
    DEV=CUDA PYTHONPATH="$SITE" "$PY" benches/compare.py --ours "$PY" --ref "$PY" --ref-path "$SITE_REF" --script bench_gpu.py \
      --json-out "$OUT/bench_gpu_cold.json" -- --cold-compile | tail -8 ;;
  *) echo "gpu_session: unknown phase $phase (install|test|nccl|demo|bench)" >&2; exit 2 ;;
esac
done
