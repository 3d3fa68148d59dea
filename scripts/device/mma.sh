# Issue 16 on one GPU: the tensor-core matmul next to cuBLAS (`bench --only mma`, every
# tiling checked against cuBLAS, the best timed in turns with it), then, unless
# MMA_TESTS=0, the CUDA behaviour suite, the GPU tests and the language codegen tests.
# Device call: carry [".gpu-bundle"], command `bash scripts/device/mma.sh`.
. scripts/device/env.sh
"$D/cubert" --backend cuda bench --only mma 2>&1 | tee "$OUT/mma.log" | grep -v "^ *$"
if [ "${MMA_TESTS:-1}" != 0 ]; then
  timeout 400 "$D/tests/cubert-cuda--behaviour" --include-ignored --test-threads=2 > "$OUT/behaviour.log" 2>&1; echo "behaviour rc=$?"
  grep -E "FAILED|failed|panicked|test result" "$OUT/behaviour.log" | tail -12
  timeout 150 "$D/tests/cubert-cuda--gpu" --include-ignored --test-threads=1 > "$OUT/gpu.log" 2>&1; echo "gpu rc=$?"
  grep -E "FAILED|failed|panicked|test result" "$OUT/gpu.log" | tail -12
  timeout 300 "$D/tests/cubert-cuda--language_codegen" --include-ignored > "$OUT/codegen.log" 2>&1; echo "language_codegen rc=$?"
  grep -E "FAILED|failed|panicked|test result" "$OUT/codegen.log" | tail -6
fi
