# Sourced by the other scripts here, on the GPU machine, from the repository root: unpacks
# the bundle of scripts/device/bundle.sh (or scripts/gpu-test) into $D, makes NCCL (and
# cuBLAS) loadable, switches NVLink multicast off. $ANCHORS holds the shared anchors these
# scripts run (allreduce.py): copy ../shared/anchors into .anchors (git-ignored here) and
# carry it, since ../shared doesn't travel to the device. Device call: carry
# [".gpu-bundle", ".anchors"], command `bash scripts/device/<script>.sh`.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export ANCHORS=${ANCHORS:-$PWD/.anchors}
D=$(mktemp -d /tmp/bundle.XXXXXX); xz -dc .gpu-bundle/bundle.tar.xz | tar xf - -C "$D"
L=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib'))")
T=$(mktemp -d /tmp/nccl.XXXXXX); ln -s "$L/libnccl.so.2" "$T/libnccl.so"
export LD_LIBRARY_PATH="$T:$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TEST_CUBERT_BIN="$D/cubert" CUBERT_COLLECTIVE_TIMEOUT=120
N=$(nvidia-smi -L | grep -c '^GPU')
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1; echo "GPUs: $N, NCCL: $L"
C=$(python3 -c 'import nvidia.cublas, os; d = os.path.join(list(nvidia.cublas.__path__)[0], "lib"); print(os.path.join(d, sorted(f for f in os.listdir(d) if f.startswith("libcublas.so."))[0]))' 2>/dev/null)
if [ -n "$C" ]; then ln -sf "$C" "$T/libcublas.so"; export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$C")"; echo "cuBLAS: $C"; else echo "cuBLAS: no pip wheel (cudarc looks on the system library path)"; fi
