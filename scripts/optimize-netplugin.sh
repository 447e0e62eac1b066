#!/usr/bin/env bash
# Build the daemons for shipping: release builds, with netplugin's machine code laid out by a
# profile of a host's own work (LLVM BOLT), so that the code a running host executes sits
# together and the rest is never mapped. netplugin's resident code is the larger part of its
# memory otherwise (docs/performance.md, "Memory"): the kernel maps code in 64 KiB runs around
# every page executed, and rustc scatters the functions a host runs over the whole text.
#
#   sudo bash scripts/optimize-netplugin.sh [OUT_DIR]    # default: target/optimized
#
# OUT_DIR then holds netmaster, netctl, contivk8s, testbed (plain release builds) and the laid
# out netplugin: `TESTBED_BINARIES=OUT_DIR target/release/testbed bench memory` measures it.
# Needs what the benchmarks need (root, Open vSwitch, etcd, cnirun: scripts/install-deps.sh)
# and Debian's bolt-19 (installed here if missing). Takes about 5 minutes after the release
# build. The laid out binary carries no line tables (BOLT drops them; panics still name the
# function).
#
# How: netplugin is linked once more with its relocations kept (BOLT moves functions only
# then), an instrumented copy of it runs the training workloads below (real pods through
# libcni, services, policy rules: each a `testbed bench` run against real OVS and etcd), and
# BOLT lays the code out by the counts: the functions run, hottest first with their cold
# blocks split off, then everything that never ran.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/optimized}"
bolt=/usr/lib/llvm-19/bin
cnirun="${CNIRUN:-$root/target/cnirun/cnirun}"

if [ "$(id -u)" != 0 ]; then
  echo "optimize-netplugin: the training runs start network namespaces and OVS: run it as root" >&2
  exit 1
fi
if [ ! -x "$bolt/llvm-bolt" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q bolt-19 >/dev/null
fi
if [ ! -x "$cnirun" ]; then
  echo "optimize-netplugin: no cnirun at $cnirun: run scripts/install-deps.sh or set CNIRUN" >&2
  exit 1
fi

cd "$root"
cargo build --release -p master -p plugin -p cni -p testbed --bins
# netplugin's release build, linked again with its relocations in the file (they are not
# loaded at run time). A later `cargo build --release` links it again without them.
relink() { cargo rustc --release -p plugin --bin netplugin -- -C link-arg=-Wl,--emit-relocs; }
relink
if ! readelf -SW target/release/netplugin | grep -q '\.rela\.text'; then
  # cargo took the plain link for the same build: make it link again.
  touch plugin/src/bin/netplugin.rs
  relink
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/train"
for b in netmaster netctl contivk8s testbed; do
  cp target/release/$b "$out/$b"
  cp target/release/$b "$work/train/$b"
done
cp target/release/netplugin "$work/netplugin.relocs"

# The instrumented netplugin writes its counts every second (it is stopped by a signal, not by
# exiting), to one file per training run.
"$bolt/llvm-bolt" "$work/netplugin.relocs" -o "$work/train/netplugin" -instrument \
  --instrumentation-file="$work/counts.fdata" --instrumentation-sleep-time=1 \
  --instrumentation-no-counters-clear >"$work/instrument.log" 2>&1 ||
  { cat "$work/instrument.log" >&2; exit 1; }

runs=0
train() {
  rm -f "$work/counts.fdata"
  echo "optimize-netplugin: training: testbed bench $*" >&2
  TESTBED_BINARIES="$work/train" CNIRUN="$cnirun" "$work/train/testbed" bench "$@" >/dev/null
  sleep 1.5
  cp "$work/counts.fdata" "$work/run$runs.fdata"
  runs=$((runs + 1))
}
# What a host does: pods set up one at a time and twenty at once, pods that services select,
# policy rules arriving through netmaster, and all of them on one host together.
train pod-setup --pods 50 --services 20
train pod-setup --pods 40 --concurrency 20
train policy --rules 2000
train memory --pods 50 --rules 500 --services 10

"$bolt/merge-fdata" "$work"/run*.fdata >"$work/all.fdata" 2>/dev/null
"$bolt/llvm-bolt" "$work/netplugin.relocs" -o "$out/netplugin" -data="$work/all.fdata" \
  -reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold \
  -split-eh -lite=0 >"$work/optimize.log" 2>&1 ||
  { cat "$work/optimize.log" >&2; exit 1; }
grep -E "have non-empty execution profile|splitting separates" "$work/optimize.log" >&2 || true
"$out/netplugin" --version >/dev/null
echo "optimize-netplugin: $out/netplugin (and the other daemons) ready" >&2
