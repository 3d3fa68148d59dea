# The multi-GPU tests and the behaviour suite's collective tests.
. scripts/device/env.sh
timeout 400 "$D/tests/cubert-cuda--multi_gpu" --include-ignored --test-threads=1 > "$OUT/multi_gpu.log" 2>&1; echo "multi_gpu rc=$?"
grep -E "^test |test result" "$OUT/multi_gpu.log" | tail -15
timeout 150 "$D/tests/cubert-cuda--behaviour" --include-ignored --test-threads=2 collectives:: gather_scatter:: peer_copy:: multi_device:: > "$OUT/behaviour.log" 2>&1; echo "behaviour rc=$?"
grep -E "FAILED|failed|panicked|test result" "$OUT/behaviour.log" | tail -15
