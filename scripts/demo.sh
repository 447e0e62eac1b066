#!/usr/bin/env bash
# Brings the demo cluster up on this machine (installing what it needs first).
#   bash scripts/demo.sh          # up
#   bash scripts/demo.sh down     # remove everything
#   bash scripts/demo.sh status
#   bash scripts/demo.sh up --etcd-members 3 --etcd-tls   # a 3-member etcd cluster, TLS only
#   bash scripts/demo.sh up --hosts 3                     # three emulated hosts sharing the netmaster
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build -q -p testbed
exec target/debug/testbed "${1:-up}" "${@:2}"
