#!/usr/bin/env bash
# The Go binding's ctest entry (bindings/go/CMakeLists.txt); runnable by hand from any directory.
#   run_tests.sh test   go test ./... (the package's tests, the layout test included)
#   run_tests.sh chat   builds examples/chat into the build tree, runs it in test mode and compares
#                       its greedy token ids with ember-greedy-ref's
# Needs the environment ctest gives (bindings/README.md): EMBER_INCLUDE_DIR, EMBER_LIB_DIR,
# EMBER_GREEDY_REF, EMBER_REPO_MODELS, EMBER_BINDING_BUILD_DIR. Exits 77 (skip) without go or the model.
# EMBER_GO (default: go on PATH) is the go command; EMBER_GO_RACE=1 adds -race to go test.
set -euo pipefail
mode=${1:?usage: run_tests.sh test|chat}
here=$(cd "$(dirname "$0")" && pwd)

go=${EMBER_GO:-go}
if ! command -v "$go" >/dev/null 2>&1; then
  echo "skip: go is not installed (apt install golang-go)"
  exit 77
fi
: "${EMBER_INCLUDE_DIR:?set EMBER_INCLUDE_DIR (the folder holding ember/ember.h)}"
: "${EMBER_LIB_DIR:?set EMBER_LIB_DIR (the folder holding libember.so)}"
: "${EMBER_BINDING_BUILD_DIR:?set EMBER_BINDING_BUILD_DIR (a scratch folder)}"

# No module downloads, caches inside the build tree, cgo pointed at this build's header and library.
export CGO_ENABLED=1
export CGO_CFLAGS="-O2 -g -I$EMBER_INCLUDE_DIR"
export CGO_LDFLAGS="-L$EMBER_LIB_DIR -Wl,-rpath,$EMBER_LIB_DIR"
export LD_LIBRARY_PATH="$EMBER_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GOCACHE=${GOCACHE:-$EMBER_BINDING_BUILD_DIR/go-cache}
export GOPATH=${GOPATH:-$EMBER_BINDING_BUILD_DIR/gopath}
export GOPROXY=off GOFLAGS="-mod=readonly -buildvcs=false" GOTELEMETRY=off GO111MODULE=on GOWORK=off
mkdir -p "$GOCACHE" "$GOPATH"
cd "$here"

case $mode in
  test)
    race=()
    if [ "${EMBER_GO_RACE:-0}" = 1 ]; then race=(-race); fi
    exec "$go" test "${race[@]}" -count=1 ./...
    ;;
  chat)
    exe=$EMBER_BINDING_BUILD_DIR/go-chat
    "$go" build -o "$exe" ./examples/chat
    exec bash "$here/../reference/same_greedy_ids.sh" Go "$exe" -m {model} -n {n} -prompt {prompt} -print-ids
    ;;
  *)
    echo "usage: run_tests.sh test|chat" >&2
    exit 2
    ;;
esac
