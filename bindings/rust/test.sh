#!/usr/bin/env bash
# The Rust binding's ctest tests (registered by CMakeLists.txt here), given CMake's binding environment
# (bindings/README.md: EMBER_LIB_DIR, EMBER_GREEDY_REF, EMBER_REPO_MODELS, EMBER_BINDING_BUILD_DIR, ...).
#   test.sh unit: cargo test --offline of both crates (layout test, API tests, doctests)
#   test.sh chat: builds examples/chat.rs and checks its greedy ids equal ember-greedy-ref's
# Exits 77 (ctest: skipped), saying why, where cargo or the model is missing.
set -euo pipefail
mode=${1:?usage: test.sh unit|chat}
here=$(cd "$(dirname "$0")" && pwd)

# cargo from CMake, PATH, or rustup's default place (rustup's cargo needs that folder on PATH for rustc)
export PATH=$PATH:$HOME/.cargo/bin
cargo=${CARGO:-$(command -v cargo || true)}
if [ -z "$cargo" ] || [ ! -x "$cargo" ]; then
  echo "skipped: cargo not found (PATH, \$HOME/.cargo/bin): install Rust to test the Rust binding"
  exit 77
fi
# offset_of! (the layout test) needs Rust 1.77; Debian 12's own rustc is 1.63.
rustc_version=$("$(dirname "$cargo")/rustc" --version 2>/dev/null || rustc --version 2>/dev/null || true)
minor=$(printf '%s\n' "$rustc_version" | sed -n 's/^rustc 1\.\([0-9]*\).*/\1/p')
if [ -z "$minor" ] || [ "$minor" -lt 77 ]; then
  echo "skipped: the Rust binding needs rustc >= 1.77, found '${rustc_version:-none}' beside $cargo"
  exit 77
fi
for v in EMBER_LIB_DIR EMBER_BINDING_BUILD_DIR EMBER_GREEDY_REF EMBER_REPO_MODELS; do
  [ -n "${!v:-}" ] || { echo "FAIL: $v is not set (run through ctest)"; exit 1; }
done
[ -x "$EMBER_GREEDY_REF" ] || { echo "FAIL: $EMBER_GREEDY_REF is not built (build the default target first)"; exit 1; }

# Build outputs stay in the build tree, not beside the sources; the loader finds libember as the linker did.
export CARGO_TARGET_DIR=$EMBER_BINDING_BUILD_DIR/rust-target
export LD_LIBRARY_PATH=$EMBER_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd "$here"

case $mode in
  unit)
    exec "$cargo" test --offline --workspace
    ;;
  chat)
    "$cargo" build --offline --example chat
    exec bash "$here/../reference/same_greedy_ids.sh" Rust \
      "$CARGO_TARGET_DIR/debug/examples/chat" -m {model} -n {n} --temp 0 --prompt {prompt} --print-ids
    ;;
  *)
    echo "usage: test.sh unit|chat"; exit 2
    ;;
esac
