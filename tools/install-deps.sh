#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages that building and testing ember needs, if any are missing
# (the Vulkan ones included: libember builds and runs without them, but CI tests the Vulkan backend;
# likewise the bindings' toolchains and the server sample's libraries).
# With --minimal only what libember and the CLI need (README command 1: tools/quickstart.sh).
# With --reliability also what tools/reliability.sh needs: libabigail's abidw/abidiff (the ABI gate) and
# clang with its libFuzzer and sanitizer runtimes (clang-19 where the distribution has it, else clang).
# Uses sudo when not run as root. Safe to run repeatedly.
set -euo pipefail
# libember, its CPU backend and the CLI: a C++20 compiler, CMake and Ninja, xxHash's header.
packages=(cmake ninja-build g++ libxxhash-dev)
minimal=0
[ "${1:-}" = "--minimal" ] && minimal=1
if [ $minimal -eq 0 ]; then
# The tests: cmocka, found through pkg-config; python3 for test_bench_tables (tools/bench_tables.py).
packages+=(pkg-config libcmocka-dev python3)
# The Vulkan backend module: headers and glslc to build it; the loader, lavapipe (Mesa's CPU driver)
# and the Khronos validation layer so that its tests run (on lavapipe) in CI, which has no GPU.
packages+=(libvulkan-dev glslc libvulkan1 mesa-vulkan-drivers vulkan-validationlayers)
# The language bindings' toolchains (bindings/): Mono's C# compiler and runtime, Go. Rust's cargo comes
# with the machine (rustup, ~/.cargo/bin); its tests skip, saying so, where it is absent.
packages+=(mono-mcs mono-runtime golang-go)
# The server sample (samples/server): cpp-httplib and nlohmann-json; its test talks HTTP through curl.
packages+=(libcpp-httplib-dev nlohmann-json3-dev curl)
fi
reliability=0
[ "${1:-}" = "--reliability" ] && reliability=1

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
updated=0
update() { [ $updated -eq 1 ] || { $sudo apt-get update -qq; updated=1; }; }

if [ $reliability -eq 1 ]; then
  packages+=(abigail-tools)
  if installed clang-19 && installed libclang-rt-19-dev; then
    packages+=(clang-19 libclang-rt-19-dev)
  elif installed clang && installed libclang-rt-dev; then
    packages+=(clang libclang-rt-dev)
  else
    update
    if apt-cache policy clang-19 2>/dev/null | grep -q 'Candidate: [0-9]'; then
      packages+=(clang-19 libclang-rt-19-dev)
    else
      packages+=(clang libclang-rt-dev)
    fi
  fi
fi

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]} (apt-get; a minute or two on a fresh machine)"
update
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
