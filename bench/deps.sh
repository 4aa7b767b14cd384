#!/usr/bin/env bash
# Installs what the comparison benchmarks need (Debian 12): both MPIs side by
# side, Gloo, and matplotlib for the plot. Kept out of the project's build.sh
# because the library itself needs none of it.
set -euo pipefail

PACKAGES=(g++ libopenmpi-dev openmpi-bin libmpich-dev mpich libgloo-dev python3 python3-matplotlib util-linux ucx-utils)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps.sh: everything is installed"
  exit 0
fi
echo "deps.sh: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps.sh: done"
