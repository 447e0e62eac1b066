#!/usr/bin/env bash
# Installs what building, testing and the demo need on a fresh Debian machine.
# Idempotent and non-interactive: only missing packages are installed, nothing is prompted.
set -euo pipefail

packages=(
  protobuf-compiler            # etcd-client's build script runs protoc
  openvswitch-switch           # ovsdb-server, ovs-vswitchd (userspace datapath), ovs-vsctl, ovs-ofctl
  etcd-server                  # the state store
  etcd-client                  # etcdctl: tests write records another host would have written
  iproute2                     # ip netns, veth pairs
  iputils-ping                 # reachability checks in tests
  netcat-openbsd               # TCP/UDP reachability checks (policy tests)
  iperf3                       # QoS: a netprofile's bandwidth limit measured with traffic
  tcpdump                      # DSCP marking and ARP-proxy checks
  openssl                      # test certificates (Kubernetes API client, etcd TLS clusters)
  ethtool                      # tests read interface features (netplugin sets them over netlink)
  util-linux-extra             # fincore: the memory benchmark's test reads what the page cache holds
  containernetworking-plugins  # the reference `bridge` + `host-local` CNI plugins (benchmark)
  golang-go                    # builds cnirun, the libcni runtime driver
  golang-github-appc-cni-dev   # libcni sources for cnirun
  prometheus                   # /usr/bin/prometheus: the real scraper of the metrics test
  docker.io                    # dockerd + docker: Docker mode tests and demo (each test runs its own dockerd)
  busybox-static               # the locally imported container image of the Docker tests
  iptables                     # a test silences the ofnet master's connection to one host
  gobgpd                       # gobgpd + gobgp: the BGP speaker netplugin runs in routing mode
  bird2                        # the top-of-rack BGP router of the routing-mode tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  # Tests start their own Prometheus on a free port; a packaged one started by systemd would
  # hold :9090, netplugin's default debug port.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1 \
    && [[ -d /run/systemd/system ]]; then
    systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
  fi
  # Likewise the packaged BGP daemons: netplugin and the tests start their own, per namespace.
  if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    for unit in gobgpd bird; do
      if [[ " ${missing[*]} " == *" ${unit/bird/bird2} "* ]]; then
        systemctl disable --now "$unit" >/dev/null 2>&1 || true
      fi
    done
  fi
fi

if ! command -v cargo-nextest >/dev/null 2>&1; then
  echo "install-deps: installing cargo-nextest"
  cargo install --locked cargo-nextest
fi

# cnirun: drives CNI plugins through libcni exactly as containerd does (CNI end-to-end tests).
shared="$(cd "$(dirname "$0")/.." && pwd)/../shared"
if [ -x "$shared/tools/cnirun/build.sh" ] || [ -f "$shared/tools/cnirun/build.sh" ]; then
  out="$(cd "$(dirname "$0")/.." && pwd)/target/cnirun"
  if [ ! -x "$out/cnirun" ]; then
    bash "$shared/tools/cnirun/build.sh" "$out" >/dev/null
  fi
fi
