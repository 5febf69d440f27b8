#!/usr/bin/env bash
# Installs the distribution packages IndexPool builds against, and nothing when they are all present.
# Debian/Ubuntu only; uses sudo when not root. The CUDA toolkit is optional and never installed here.
set -euo pipefail

packages=(
  build-essential cmake make pkg-config
  libeigen3-dev libhdf5-dev libfmt-dev libboost-program-options-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-h5py python3-pandas python3-venv
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-deps: missing packages (${missing[*]}) and no apt-get on this machine; install them by hand" >&2
  exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi

echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
