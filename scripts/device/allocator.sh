# The allocator figures of issue 18 in one device call, next to PyTorch on the same traces:
# cubert's trace replays with the default growable pool and with 16 MiB chunks, PyTorch's
# two allocators, alloc + free throughput (CUDA, and the CPU backend on the same host), the device-to-device copy next to torch's, and
# the driver-call costs (scripts/anchors/vmm_costs.cu). Device call: carry [".gpu-bundle",
# ".anchors"], command `bash scripts/device/allocator.sh`. Figures: docs/benchmarks.md.
set -u
R=$PWD
. scripts/device/env.sh
cd /tmp
B=("$D/cubert" --backend cuda bench)
echo "== cubert trace replays, default pools"
"${B[@]}" --only trace --trace "$ANCHORS/alloc_trace.txt" --write-traces /tmp/traces 2>&1 | grep -E '^cubert_trace[a-z_]* [0-9]|memory calls|checks'
echo "== cubert trace replays, growable_max_chunk = 16 MiB"
CUBERT_MEMORY_GROWABLE_MAX_CHUNK=16MiB "${B[@]}" --only trace --trace "$ANCHORS/alloc_trace.txt" 2>&1 | grep -E '^cubert_trace[a-z_]* [0-9]|memory calls|checks'
echo "== torch on the same traces"
python3 "$R/scripts/anchors/torch_trace.py" /tmp/traces/*.txt 2>&1 | grep -vE 'peak_reserved |device_frees'
echo "== alloc + free"
"${B[@]}" --only alloc 2>&1 | grep -E '^cubert_alloc[a-zA-Z0-9_]* [0-9]|checks'
# The CPU backend on the same host: what the host's thread hand-offs allow, apart from CUDA
# (on 2026-11-29 both ran at 1.7 M pairs/s there, against 6.2 M on the 2-core dev VM).
echo "== alloc + free, CPU backend (same host)"
"$D/cubert" --backend cpu bench --only alloc 2>&1 | grep -E '^cubert_alloc[a-zA-Z0-9_]* [0-9]|checks'
echo "== device-to-device copy"
"${B[@]}" --only bandwidth 2>&1 | grep -E '^cubert_(d2d|vadd)[a-zA-Z0-9_]* [0-9]|checks'
(cd "$R/scripts/anchors" && python3 torch_elementwise.py)
if [ "${VMM:-1}" = 1 ]; then
  echo "== driver call costs"
  /usr/local/cuda/bin/nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/vmm "$R/scripts/anchors/vmm_costs.cu" -lcuda && /tmp/vmm | head -46
fi
