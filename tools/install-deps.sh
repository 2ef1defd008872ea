#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages that building and testing ember needs, if any are missing.
# Uses sudo when not run as root. Safe to run repeatedly.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libcmocka-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
