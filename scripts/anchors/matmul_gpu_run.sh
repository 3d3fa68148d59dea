#!/usr/bin/env bash
# Matmul on a GPU machine, as docs/benchmarks.md records it (2026-11-26, H200): the CUDA
# test binaries of the bundle and the demo, then `cubert bench tune --kernel matmul` of this
# commit alternated twice with an older CLI (OLD, default .gpu-xz/cubert-old: the CLI built
# from 4392375, the hand-written kernels, by
#   git worktree add /tmp/old 4392375 && (cd /tmp/old && cargo build --release -p cubert-cli)
# then copied and stripped into the git-ignored .gpu-xz/), then cuBLAS through torch.
#
#   scripts/gpu-test        # here
#   device run, carry [".gpu-bundle", ".gpu-xz"]:  bash scripts/anchors/matmul_gpu_run.sh
set -u
export NCCL_NVLS_ENABLE=0
OLD=${OLD:-.gpu-xz/cubert-old}
SHAPES=${SHAPES:-1024x1024x1024,4096x4096x4096,8192x1024x4096}
mkdir -p /tmp/b && xz -dc .gpu-bundle/bundle.tar.xz | tar xf - -C /tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in behaviour tune gpu cubert_cuda language_codegen nvrtc_compile; do
  echo "== cubert-cuda--$t"
  timeout 300 "/tmp/b/tests/cubert-cuda--$t" --include-ignored --test-threads=4 2>&1 \
    | grep -E "test result|FAILED|panicked|failures:" | head -20
done
timeout 120 /tmp/b/cubert --backend cuda demo 2>&1 | tail -5
for round in 1 2; do
  for cli in /tmp/b/cubert "$OLD"; do
    echo "== $cli, round $round"
    timeout 240 "$cli" --backend cuda bench tune --kernel matmul --shapes "$SHAPES" \
      --budget-ms 8000 --verbose 2>&1 | tail -60
  done
done
cd "$(dirname "$0")" && timeout 120 python3 torch_matmul.py ${SHAPES//,/ }
