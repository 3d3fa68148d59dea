# What NCCL chooses for cubert (one process, ncclCommInitAll) and for torch (one process per
# GPU), and cubert's 64 MiB all-reduce under NCCL settings that would explain a gap.
. scripts/device/env.sh
summarize() { grep "NCCL INFO" "$1" | sed -E 's/^[^ ]+ [0-9]+:[0-9]+ \[[0-9]+\] NCCL INFO //; s/0x[0-9a-f]+/X/g; s/[0-9]+\.[0-9]+ ?ms//g' | sort | uniq -c | sort -rn | head -${2:-70}; }
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING,ENV,P2P
timeout 120 "$D/cubert" --backend cuda bench collective --quick > "$OUT/cubert_nccl.log" 2>&1
timeout 150 python3 -m torch.distributed.run --standalone --nproc_per_node="$N" "$ANCHORS/allreduce.py" --quick > "$OUT/torch_nccl.log" 2>&1
unset NCCL_DEBUG NCCL_DEBUG_SUBSYS
echo "=== cubert"; summarize "$OUT/cubert_nccl.log" > "$OUT/cubert_nccl.txt"; head -45 "$OUT/cubert_nccl.txt"
echo "=== torch"; summarize "$OUT/torch_nccl.log" > "$OUT/torch_nccl.txt"; head -45 "$OUT/torch_nccl.txt"
for knob in "" NCCL_P2P_DIRECT_DISABLE=1 NCCL_PROTO=Simple NCCL_ALGO=Ring NCCL_MIN_NCHANNELS=32; do
  echo "=== cubert with '$knob'"
  env $knob timeout 100 "$D/cubert" --backend cuda bench collective --quick 2>&1 | grep -E "allreduce_busbw_sweep@(16|64|128|256)MiB"
done
