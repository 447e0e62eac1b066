#!/usr/bin/env bash
# Build the daemons for hosts: release builds, with netplugin's machine code laid out by a
# profile of a host's own work (LLVM BOLT), so that the code a running host executes sits
# together and the rest is never mapped. netplugin's resident code is the larger part of its
# memory otherwise (docs/performance.md, "Memory"): the kernel maps code in 64 KiB runs around
# every page executed, and the compiler spreads the functions a host runs over the whole text.
#
#   sudo bash scripts/optimize-netplugin.sh [OUT_DIR]    # default: target/optimized
#
# OUT_DIR then holds netmaster, netctl, contivk8s, testbed, cnirun (as built by `cargo build
# --release` and scripts/install-deps.sh) and the laid out netplugin:
# `TESTBED_BINARIES=OUT_DIR OUT_DIR/testbed bench memory` measures it. Needs what the
# benchmarks need (root, Open vSwitch, etcd, cnirun: scripts/install-deps.sh) and Debian's
# bolt-19 (installed here if missing). Takes 2.5 minutes after the release build, 6 when
# netplugin changed since the last run (it is linked once more). The
# laid out binary carries no line tables (BOLT drops them; a panic still names the function).
#
# How: netplugin is linked once more with its relocations kept (BOLT moves functions only
# then), an instrumented copy of it runs the training workloads below (real pods through
# libcni, services, policy rules: each a `testbed bench` run against real OVS and etcd), and
# BOLT lays the code out by the counts: the functions run, hottest first with their cold
# blocks split off, then everything that never ran.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-$root/target/optimized}")"
bolt=/usr/lib/llvm-19/bin
cnirun="$(realpath -m "${CNIRUN:-$root/target/cnirun/cnirun}")"

fail() {
  echo "optimize-netplugin: $*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "the training runs start network namespaces and OVS: run it as root"
if [ ! -x "$bolt/llvm-bolt" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq bolt-19 >/dev/null
fi
[ -x "$cnirun" ] || fail "no cnirun at $cnirun: run scripts/install-deps.sh or set CNIRUN"

cd "$root"
cargo build --release -p master -p plugin -p cni -p testbed --bins
# netplugin linked again with its relocations in the file (not loaded at run time). `cargo
# rustc` builds one package, so this netplugin has the features plugin itself asks of its
# dependencies (the workspace build unifies them with the other packages'); a later `cargo
# build --release` links the workspace's netplugin again.
cargo rustc --release -p plugin --bin netplugin -- -C link-arg=-Wl,--emit-relocs
sections="$(readelf --section-headers --wide target/release/netplugin)"
case "$sections" in
  *.rela.text*) ;;
  *) fail "target/release/netplugin was linked without its relocations; BOLT cannot lay it out" ;;
esac

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/train" "$work/out/cnirun"
for b in netmaster netctl contivk8s testbed; do
  cp target/release/$b "$work/out/$b"
  cp target/release/$b "$work/train/$b"
done
cp "$cnirun" "$work/out/cnirun/cnirun"
cp target/release/netplugin "$work/netplugin.relocs"

# The instrumented netplugin writes its counts every second (the testbed stops it with a
# signal, so it never reaches an exit hook), into one file per training run.
"$bolt/llvm-bolt" "$work/netplugin.relocs" -o "$work/train/netplugin" -instrument \
  --instrumentation-file="$work/counts.fdata" --instrumentation-sleep-time=1 \
  --instrumentation-no-counters-clear >"$work/instrument.log" 2>&1 ||
  { cat "$work/instrument.log" >&2; fail "instrumenting netplugin failed"; }

runs=0
train() {
  rm -f "$work/counts.fdata"
  echo "optimize-netplugin: training: testbed bench $*" >&2
  TESTBED_BINARIES="$work/train" CNIRUN="$cnirun" "$work/train/testbed" bench "$@" >/dev/null ||
    fail "training run \`testbed bench $*\` failed"
  sleep 1.5
  [ -s "$work/counts.fdata" ] || fail "training run \`testbed bench $*\` left no counts"
  cp "$work/counts.fdata" "$work/run$runs.fdata"
  runs=$((runs + 1))
}
# What a host does: pods set up one at a time and twenty at once, pods that services select,
# policy rules arriving through netmaster, and all of them on one host together. Twice: which
# paths run depends on timing (how requests overlap, what a batch holds), and code a host runs
# that no training run did is left among the cold code, where each page it touches maps 64 KiB
# (one round of these gave 21.7-22.3 MiB in `bench memory` in one build and 23.7-23.9 in
# another).
for round in 1 2; do
  train pod-setup --pods 50 --services 20
  train pod-setup --pods 40 --concurrency 20
  train policy --rules 2000
  train memory --pods 50 --rules 500 --services 10
done

"$bolt/merge-fdata" "$work"/run*.fdata >"$work/all.fdata" 2>"$work/merge.log" ||
  { cat "$work/merge.log" >&2; fail "merging the training counts failed"; }
"$bolt/llvm-bolt" "$work/netplugin.relocs" -o "$work/out/netplugin" -data="$work/all.fdata" \
  -reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold \
  -split-eh -lite=0 >"$work/optimize.log" 2>&1 ||
  { cat "$work/optimize.log" >&2; fail "laying netplugin out failed"; }
grep -E "have non-empty execution profile|splitting separates" "$work/optimize.log" >&2 || true
"$work/out/netplugin" --version >/dev/null || fail "the laid out netplugin does not run"

# Only a complete set replaces what OUT_DIR held; each file is replaced, not written over (a
# netplugin may be running from OUT_DIR).
mkdir -p "$out"
cp -r --remove-destination "$work/out/." "$out/"
echo "optimize-netplugin: $out/netplugin (and the other daemons) ready" >&2
