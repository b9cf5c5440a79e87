# netns.sh — the names, addresses and network of a local cluster whose
# hosts are network namespaces (TIDE_HOSTS=netns make up). Sourced (bash)
# by netns-up.sh, netns-down.sh, login.sh and demo.sh.
#
# Every "host" — the controller (ctl), one login node (login) and each
# compute node (gpu01, ...) — is a network namespace of its own,
# tide-<port>-<host>, joined to a private bridge tidebr<port> in the root
# namespace by a veth pair (tide<port>-<host> on the bridge, eth0 inside).
# The hosts share the file system, the users and the cgroups (as NFS
# homes, LDAP and one kernel would), nothing else: each has its own
# addresses, ports and munged. The bridge has no address: the root
# namespace is not a host of the cluster, and nothing outside reaches it.
#
# Addresses: <net>.1 ctl, <net>.2 login, <net>.(10+N) gpuN, where <net>
# is 10.77.<port % 256> (TIDE_NETNS_NET overrides it: three octets).
# The namespaces see no other network, so <net> may overlap a real one.
#
#   netns_init RUN PORT NNODES   # set NETNS_* for this cluster
#   netns_load RUN               # the same, from RUN/hosts/netns.env
#   netns_save                   # write RUN/hosts/netns.env
#   netns_ns HOST                # namespace name
#   netns_addr HOST              # its address
#   netns_veth HOST              # the bridge side of its veth pair
#   netns_enter HOST             # NETNS_ENTER: the command prefix that
#                                # runs a command in HOST's namespace
#   netns_net_up                 # make what is missing (idempotent)
#   netns_net_down               # remove this cluster's links, namespaces
#
# Host commands enter the namespace with `nsenter --net`, not `ip netns
# exec`: the latter also gives the command a mount namespace with a
# fresh /sys, in which /sys/fs/cgroup is empty — tided would find no
# cgroups, and job cgroups are host-wide on a real node too.

# netns_init RUN PORT NNODES sets the cluster's names: NETNS_RUN,
# NETNS_PORT, NETNS_NET, NETNS_BRIDGE, NETNS_NODES (gpu01 ...),
# NETNS_HOSTS (ctl login gpu01 ...), NETNS_CTL_ADDR and the ports
# (NETNS_NODE_PORT: node_addr; NETNS_API_PORT: api_addr; NETNS_STEP_PORT:
# each tided's step_addr). It fails, saying why, on bad values.
netns_init() {
  NETNS_RUN=$1 NETNS_PORT=$2
  local n=$3 i
  case $NETNS_PORT in '' | *[!0-9]* | 0*) echo "netns: TIDE_PORT=$NETNS_PORT is not a port number" >&2; return 1 ;; esac
  # api_addr is node_addr's port + 3 (6817 -> 6820, as slurmrestd's).
  if [ "$NETNS_PORT" -lt 1 ] || [ "$NETNS_PORT" -gt 65532 ]; then
    echo "netns: TIDE_PORT=$NETNS_PORT is not between 1 and 65532 (the user API listens on TIDE_PORT+3)" >&2
    return 1
  fi
  NETNS_NET=${TIDE_NETNS_NET:-10.77.$((NETNS_PORT % 256))}
  if ! [[ $NETNS_NET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
    [ "${BASH_REMATCH[1]}" -gt 255 ] || [ "${BASH_REMATCH[2]}" -gt 255 ] || [ "${BASH_REMATCH[3]}" -gt 255 ]; then
    echo "netns: TIDE_NETNS_NET=$NETNS_NET is not the first three octets of an IPv4 /24 (e.g. 10.77.5)" >&2
    return 1
  fi
  NETNS_BRIDGE=tidebr$NETNS_PORT
  NETNS_NODE_PORT=$NETNS_PORT
  NETNS_STEP_PORT=$((NETNS_PORT + 1))
  NETNS_API_PORT=$((NETNS_PORT + 3))
  NETNS_CTL_ADDR=$NETNS_NET.1
  NETNS_NODES=()
  for i in $(seq 1 "$n"); do NETNS_NODES+=("$(printf 'gpu%02d' "$i")"); done
  NETNS_HOSTS=(ctl login "${NETNS_NODES[@]}")
}

# netns_load RUN reads the settings netns-up.sh saved for the cluster
# under RUN; it fails (silently) when RUN holds none.
netns_load() {
  local f=$1/hosts/netns.env
  [ -f "$f" ] || return 1
  local port nodes net
  port=$(sed -n 's/^NETNS_PORT=\([0-9]*\)$/\1/p' "$f")
  nodes=$(sed -n 's/^NETNS_NNODES=\([0-9]*\)$/\1/p' "$f")
  net=$(sed -n 's/^NETNS_NET=\([0-9.]*\)$/\1/p' "$f")
  [ -n "$port" ] && [ -n "$nodes" ] && [ -n "$net" ] || return 1
  TIDE_NETNS_NET=$net netns_init "$1" "$port" "$nodes"
  NETNS_BIN=$(sed -n 's/^NETNS_BIN=//p' "$f")
}

# netns_save writes the settings that netns_load reads (and that mark
# RUN as holding a netns cluster: down.sh and login.sh look for them).
netns_save() {
  mkdir -p "$NETNS_RUN/hosts"
  cat >"$NETNS_RUN/hosts/netns.env.tmp" <<EOF
# The netns cluster under $NETNS_RUN (scripts/netns-up.sh); read by
# down.sh, login.sh and demo.sh. Removed by down.sh.
NETNS_PORT=$NETNS_PORT
NETNS_NNODES=${#NETNS_NODES[@]}
NETNS_NET=$NETNS_NET
NETNS_BIN=$NETNS_BIN
NETNS_CONTROLLER=$NETNS_CTL_ADDR:$NETNS_API_PORT
EOF
  mv -f "$NETNS_RUN/hosts/netns.env.tmp" "$NETNS_RUN/hosts/netns.env"
}

netns_ns() { printf 'tide-%s-%s\n' "$NETNS_PORT" "$1"; }
netns_veth() { printf 'tide%s-%s\n' "$NETNS_PORT" "$1"; }
netns_addr() {
  case $1 in
  ctl) echo "$NETNS_NET.1" ;;
  login) echo "$NETNS_NET.2" ;;
  gpu[0-9][0-9]) echo "$NETNS_NET.$((10 + 10#${1#gpu}))" ;;
  *) echo "netns: no host $1" >&2; return 1 ;;
  esac
}

# netns_enter HOST sets NETNS_ENTER to the command prefix that runs a
# command in HOST's network namespace: `"${NETNS_ENTER[@]}" CMD... &`
# leaves CMD's own pid in $! (nsenter execs it; a shell function in
# between would be a subshell of its own).
netns_enter() {
  NETNS_ENTER=(nsenter --net="/run/netns/$(netns_ns "$1")" --)
}

# netns_bridge_alias is the alias that marks the bridge as this
# cluster's: netns_net_down removes a bridge of that name only when it
# carries it.
netns_bridge_alias() { printf 'tide netns cluster %s\n' "$NETNS_RUN"; }

# netns_bridge_ours: the bridge exists and is this cluster's.
netns_bridge_ours() {
  [ "$(cat "/sys/class/net/$NETNS_BRIDGE/ifalias" 2>/dev/null)" = "$(netns_bridge_alias)" ]
}

# netns_check_free fails, saying what is in the way, when a bridge or
# namespace this cluster would make already exists but is not this
# cluster's (another TIDE_RUN on the same TIDE_PORT).
netns_check_free() {
  local h other
  if [ -e "/sys/class/net/$NETNS_BRIDGE" ] && ! netns_bridge_ours; then
    other=$(cat "/sys/class/net/$NETNS_BRIDGE/ifalias" 2>/dev/null)
    echo "netns: a link $NETNS_BRIDGE exists and is not this cluster's (${other:-no alias}): another cluster on TIDE_PORT=$NETNS_PORT? Stop it, or use another TIDE_PORT" >&2
    return 1
  fi
  if [ ! -e "/sys/class/net/$NETNS_BRIDGE" ]; then
    for h in "${NETNS_HOSTS[@]}"; do
      if [ -e "/run/netns/$(netns_ns "$h")" ]; then
        echo "netns: the namespace $(netns_ns "$h") exists but the bridge $NETNS_BRIDGE does not: left by another cluster on TIDE_PORT=$NETNS_PORT? (ip netns del $(netns_ns "$h") once nothing runs in it: ip netns pids $(netns_ns "$h"))" >&2
        return 1
      fi
    done
  fi
}

# netns_net_up makes the bridge, the namespaces, the veth pairs and the
# addresses that are missing, and keeps what is there.
netns_net_up() {
  local h ns veth addr
  netns_check_free || return 1
  if [ ! -e "/sys/class/net/$NETNS_BRIDGE" ]; then
    ip link add "$NETNS_BRIDGE" type bridge || return 1
    ip link set "$NETNS_BRIDGE" alias "$(netns_bridge_alias)" || return 1
    echo "netns: bridge $NETNS_BRIDGE made"
  fi
  ip link set "$NETNS_BRIDGE" up || return 1
  for h in "${NETNS_HOSTS[@]}"; do
    ns=$(netns_ns "$h") veth=$(netns_veth "$h") addr=$(netns_addr "$h")
    [ -e "/run/netns/$ns" ] || ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up || return 1
    if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
      # A bridge side left without its peer (a namespace deleted by
      # hand) is in the way of the new pair.
      ip link del "$veth" 2>/dev/null || true
      ip link add "$veth" type veth peer name eth0 netns "$ns" || return 1
    fi
    ip link set "$veth" master "$NETNS_BRIDGE" up || return 1
    if ! ip -n "$ns" -4 -o addr show dev eth0 | grep -q " inet $addr/24 "; then
      ip -n "$ns" addr add "$addr/24" dev eth0 || return 1
    fi
    ip -n "$ns" link set eth0 up || return 1
  done
}

# netns_net_down removes the veth pairs, the namespaces and the bridge
# of this cluster (by their names; the bridge only while it carries this
# cluster's alias). Processes still in a namespace keep it alive after
# `ip netns del`: stop them first.
netns_net_down() {
  local h ns veth
  for h in "${NETNS_HOSTS[@]}"; do
    ns=$(netns_ns "$h") veth=$(netns_veth "$h")
    if [ -e "/sys/class/net/$veth" ]; then
      ip link del "$veth" && echo "down: link $veth removed"
    fi
    if [ -e "/run/netns/$ns" ]; then
      ip netns del "$ns" && echo "down: namespace $ns removed"
    fi
  done
  if [ -e "/sys/class/net/$NETNS_BRIDGE" ]; then
    if netns_bridge_ours; then
      ip link del "$NETNS_BRIDGE" && echo "down: bridge $NETNS_BRIDGE removed"
    else
      echo "down: $NETNS_BRIDGE is not this cluster's (alias '$(cat "/sys/class/net/$NETNS_BRIDGE/ifalias" 2>/dev/null)'): left alone"
    fi
  fi
}
