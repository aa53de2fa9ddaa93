#!/usr/bin/env bash
# Build the ns-3 side of netloop's benchmarks.
#   bench/ns3/build.sh            -> bench/ns3/build/dumbbell  (simulation-speed peer)
#                                    bench/ns3/build/wan       (simulation-speed peer, wan scenario)
#                                    bench/ns3/build/emu       (real-time emulation peer)
# Installs Debian's ns-3 (3.37) and friends only if missing, then compiles
# each program with -O2 against pkg-config's ns3-* flags. Idempotent and quiet
# for a binary that is newer than its source and this script.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

pkgs=(libns3-dev ns3 libgsl-dev pkg-config g++)
missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    echo "build.sh: installing ${missing[*]}" >&2
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

mods=(ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control)

# build NAME [EXTRA-MODULE...]: compiles $here/NAME.cc -> $here/build/NAME
# against $mods plus the extra ns-3 modules, unless the binary is up to date.
build() {
    local name=$1
    shift
    local src="$here/$name.cc" out="$here/build/$name"
    local -a m=("${mods[@]}" "$@")
    if [[ -x "$out" && "$out" -nt "$src" && "$out" -nt "$here/common.h" && "$out" -nt "${BASH_SOURCE[0]}" ]]; then
        return 0
    fi
    # Debian's ns3 .pc files carry a bogus "-I/usr;" entry; drop anything with ';'.
    local cflags libs
    cflags=$(pkg-config --cflags "${m[@]}" | tr ' ' '\n' | grep -v ';' | tr '\n' ' ')
    libs=$(pkg-config --libs "${m[@]}")
    mkdir -p "$here/build"
    echo "build.sh: compiling $out" >&2
    # Debian builds ns-3 3.37 with the "release" profile but with NS_LOG compiled
    # in (NS3_LOG_ENABLE), which changes some class layouts (e.g. UdpClient):
    # define it here too so this program sees the same ABI as the libraries.
    # No log component is enabled at run time.
    # shellcheck disable=SC2086
    g++ -std=c++17 -O2 -DNS3_LOG_ENABLE $cflags -o "$out.tmp" "$src" $libs -lpthread
    mv -f "$out.tmp" "$out"
}

build dumbbell
build wan
build emu ns3-fd-net-device
