#!/usr/bin/env bash
# Builds the small bundle the scripts here run (bench.sh, tests.sh, allocator.sh), here on
# the development machine: the release CLI and the CUDA backend's multi_gpu, behaviour and
# gpu test binaries (stripped), with scripts/anchors/*.py, packed as .gpu-bundle/bundle.tar.xz
# (about 17 MB, git-ignored), which env.sh unpacks on the GPU machine. A few minutes with a
# warm target directory, against scripts/gpu-test's every test binary of the workspace.
# Then: copy ../shared/anchors into .anchors, and make the device call with carry
# [".gpu-bundle", ".anchors"] and command `bash scripts/device/bench.sh` (or tests.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=$(mktemp -d /tmp/cubert-bundle.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/tests" "$STAGE/anchors" .gpu-bundle
cargo build --release -p cubert-cli
cp target/release/cubert "$STAGE/cubert"
# The test binaries' paths, as cargo reports them.
cargo test --release -p cubert-cuda --test multi_gpu --test behaviour --test gpu --no-run \
  --message-format=json-render-diagnostics \
  | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["profile"]["test"]:
        print(message["executable"], message["target"]["name"])
' | while read -r exe name; do cp "$exe" "$STAGE/tests/cubert-cuda--$name"; done
strip --strip-debug "$STAGE/cubert" "$STAGE"/tests/*
cp scripts/anchors/*.py "$STAGE/anchors/"
(cd "$STAGE" && tar cJf - .) > .gpu-bundle/bundle.tar.xz
ls -la .gpu-bundle/bundle.tar.xz
echo "bundle of $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')"
