# The CUDA behaviour suite and GPU tests on one GPU.
. scripts/device/env.sh
timeout 400 "$D/tests/cubert-cuda--behaviour" --include-ignored --test-threads=2 > "$OUT/behaviour.log" 2>&1; echo "behaviour rc=$?"
grep -E "FAILED|failed|panicked|test result" "$OUT/behaviour.log" | tail -12
timeout 150 "$D/tests/cubert-cuda--gpu" --include-ignored --test-threads=1 > "$OUT/gpu.log" 2>&1; echo "gpu rc=$?"
grep -E "stream_settings|FAILED|failed|panicked|test result" "$OUT/gpu.log" | tail -12
"$D/cubert" --backend cuda info 2>&1 | grep -E "streams|NVIDIA"
if [ -x "$D/tests/cubert-cuda--nvrtc_compile" ]; then
  timeout 150 "$D/tests/cubert-cuda--nvrtc_compile" --include-ignored > "$OUT/nvrtc.log" 2>&1; echo "nvrtc_compile rc=$?"
  grep -E "FAILED|failed|panicked|test result" "$OUT/nvrtc.log" | tail -6
fi
if [ -x "$D/tests/cubert-cuda--language_codegen" ]; then
  timeout 300 "$D/tests/cubert-cuda--language_codegen" --include-ignored > "$OUT/codegen.log" 2>&1; echo "language_codegen rc=$?"
  grep -E "FAILED|failed|panicked|test result" "$OUT/codegen.log" | tail -6
fi
