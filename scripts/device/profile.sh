# Where the CLI's threads spend a benchmark on the GPU machine: perf (packed here by
# scripts/pack-perf) samples `cubert --backend cuda bench --only $WHAT --quick` (WHAT=launch
# by default) with DWARF call graphs, and writes, for the caller's thread (`cubert`) and the
# runner of device 0 (`cubert-1-0`), the functions by inclusive and by own time to $OUT.
# Device call: carry [".gpu-bundle", ".anchors"], command `WHAT=alloc bash scripts/device/profile.sh`.
. scripts/device/env.sh
P=$(mktemp -d /tmp/perf.XXXXXX); xz -dc .gpu-bundle/perf.tar.xz | tar xf - -C "$P"
PERF="env LD_LIBRARY_PATH=$P/lib $P/perf"
WHAT=${WHAT:-launch}
$PERF record -e cpu-clock -F 4000 --call-graph dwarf,16384 -o /tmp/perf.data \
  "$D/cubert" --backend cuda bench --only "$WHAT" --quick
for thread in cubert cubert-1-0; do
  for view in children no-children; do
    timeout 200 $PERF report -i /tmp/perf.data --comms "$thread" --"$view" --sort dso,symbol \
      --percent-limit 0.15 -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' \
      | cut -c1-200 > "$OUT/perf-$WHAT-$thread-$view.txt"
  done
done
ls -la "$OUT"
