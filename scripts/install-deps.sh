#!/usr/bin/env bash
# Installs what trainsim needs from Debian packages (idempotent: only missing packages are
# installed). CUDA, cuBLAS and NCCL are optional and detected by CMake, not installed here.
set -euo pipefail
pkgs=(cmake make g++ libfmt-dev libcli11-dev doctest-dev nlohmann-json3-dev
      libgnuplot-iostream-dev gnuplot-nox libboost-iostreams-dev libboost-filesystem-dev
      libboost-system-dev libopenmpi-dev openmpi-bin python3 zlib1g-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "# installing: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
