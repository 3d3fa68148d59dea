# The interop and cuBLAS tests, then cubert's tuned f32 matmul next to cuBLAS sgemm (same
# run, same buffers) and torch's matmul (TF32 off) on the shapes.
. scripts/device/env.sh
timeout 120 "$D/tests/cubert-cuda--gpu" --include-ignored --test-threads=1 lent_device_memory cublas_products > "$OUT/gpu.log" 2>&1; echo "gpu rc=$?"
grep -E "^test |test result|panicked|skipped" "$OUT/gpu.log" | tail -8
S=1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x1024x4096,4096x4096x64
timeout 400 "$D/cubert" --backend cuda bench tune --kernel matmul --shapes $S --level balanced --budget-ms 4000 --reps 10 --json "$OUT/tune.json" > "$OUT/tune.log" 2>&1; echo "tune rc=$?"
cat "$OUT/tune.log"
cd "$D/anchors" && timeout 120 python3 torch_matmul.py 1024x1024x1024 2048x2048x2048 4096x4096x4096 8192x1024x4096 4096x4096x64 2>&1 | tee "$OUT/torch_matmul.log"
