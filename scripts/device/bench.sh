# cubert bench collective, then torch's all-reduce, all-gather/reduce-scatter/broadcast and
# peer copy, in one call.
. scripts/device/env.sh
timeout 240 "$D/cubert" --backend cuda bench collective --json "$OUT/collective.json" > "$OUT/collective.log" 2>&1; echo "cubert rc=$?"
grep -vE "sweep" "$OUT/collective.log"
timeout 200 python3 -m torch.distributed.run --standalone --nproc_per_node="$N" "$ANCHORS/allreduce.py" > "$OUT/allreduce.log" 2>&1; echo "torch allreduce rc=$?"
grep -E "^ +[0-9]+ |allreduce_" "$OUT/allreduce.log"
timeout 150 python3 -m torch.distributed.run --standalone --nproc_per_node="$N" "$D/anchors/torch_collectives.py" > "$OUT/torch_collectives.log" 2>&1; echo "torch collectives rc=$?"
grep -E "torch_|FAIL" "$OUT/torch_collectives.log"
timeout 100 python3 "$D/anchors/torch_peer_copy.py" > "$OUT/torch_peer_copy.log" 2>&1; echo "torch peer copy rc=$?"
grep -E "torch_peer" "$OUT/torch_peer_copy.log"
