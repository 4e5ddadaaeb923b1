#!/usr/bin/env bash
# A test cluster of several hosts on this machine (sourced by the multi-host tests; needs root).
#
#   cluster_up DIR N     N hosts node1..nodeN. Each is a network namespace (its own eth0 on a
#                        bridge, 10.97.S.I/24 in a private subnet that exists only inside the
#                        test's namespaces), a UTS namespace (host name nodeI) and a mount
#                        namespace (its /etc/hosts names the other nodes); they share the
#                        machine's file system, as cluster nodes share a parallel file system.
#                        The bridge lives in a namespace of its own ("the switch"), so nothing
#                        is added to or addressed in the machine's own network: only the loopback
#                        and the test subnet. Starts munged (unless one answers), slurmctld on
#                        node1 and one slurmd per node (NodeName=node[1-N]) with DIR/slurm.conf,
#                        and waits until sinfo shows N idle nodes.
#   cluster_down         stops every daemon and process in the nodes and removes the namespaces
#                        (run by the EXIT trap that cluster_up sets, after a failure too).
#   on_node I CMD...     runs CMD on node I (its network, host name and /etc/hosts).
#   node_kill I          the node dies: SIGKILL to its slurmd and to every process on it.
#   node_start I         the node comes back: its slurmd starts again.
#   link_down I / link_up I
#                        the node's switch port goes down (packets are dropped silently, as on a
#                        failed link: TCP notices only after minutes) or up again.
#   link_slow I RATE     the node's link is throttled to RATE (tc tbf, e.g. 2mbit); link_fast I.
# Variables set: CLUSTER_DIR, CLUSTER_N, CLUSTER_SUBNET (10.97.S.0/24), SLURM_CONF.

CLUSTER_TAG=gm$$
CLUSTER_N=0
CLUSTER_DIR=
CLUSTER_MUNGE=
declare -a CLUSTER_HOLDER=()

_cluster_ns() { printf '%s-n%s\n' "$CLUSTER_TAG" "$1"; }
_cluster_sw() { printf '%s-sw\n' "$CLUSTER_TAG"; }

on_node() {
  local i=$1
  shift
  # --wd: entering a mount namespace would otherwise leave the command in /.
  nsenter -t "${CLUSTER_HOLDER[$i]}" --net --uts --mount --wd="$PWD" -- "$@"
}

# _cluster_pids I: every process in node I's network namespace except its holder.
_cluster_pids() {
  local p
  for p in $(ip netns pids "$(_cluster_ns "$1")" 2>/dev/null); do
    [ "$p" = "${CLUSTER_HOLDER[$1]}" ] || echo "$p"
  done
}

_cluster_slurmd() {
  on_node "$1" env SLURM_CONF="$SLURM_CONF" slurmd -N "node$1"
}

cluster_up() {
  CLUSTER_DIR=$1
  CLUSTER_N=$2
  local i s=$((10 + RANDOM % 240)) sw
  sw=$(_cluster_sw)
  export CLUSTER_SUBNET=10.97.$s.0/24
  trap cluster_down EXIT
  # A test stopped by a signal (ctest's timeout, ^C) still runs its EXIT trap.
  trap 'exit 143' TERM
  trap 'exit 130' INT
  for t in slurmctld slurmd munged sbatch nsenter unshare; do
    command -v "$t" >/dev/null || { echo "cluster: $t not found: run scripts/install-deps.sh" >&2; return 1; }
  done
  mkdir -p "$CLUSTER_DIR/state" "$CLUSTER_DIR/log"
  for i in $(seq "$CLUSTER_N"); do mkdir -p "$CLUSTER_DIR/spool-node$i"; done
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  : >"$CLUSTER_DIR/hosts"
  printf '127.0.0.1 localhost\n' >>"$CLUSTER_DIR/hosts"
  for i in $(seq "$CLUSTER_N"); do printf '10.97.%s.%s node%s\n' "$s" "$i" "$i" >>"$CLUSTER_DIR/hosts"; done
  for i in $(seq "$CLUSTER_N"); do
    local ns
    ns=$(_cluster_ns "$i")
    ip netns add "$ns"
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.97.$s.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    # The node's holder: a process in its own UTS and mount namespaces (host name, /etc/hosts)
    # that on_node enters. nsenter and unshare exec in place, so $! is the holder. (Not
    # `ip netns exec`: it mounts a new /sys without /sys/fs/cgroup, which slurmd needs.)
    nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
      sh -c "hostname node$i && mount --bind '$CLUSTER_DIR/hosts' /etc/hosts && exec sleep infinity" &
    disown $!
    CLUSTER_HOLDER[i]=$!
  done
  for i in $(seq "$CLUSTER_N"); do  # until each holder has set its host name
    for _ in $(seq 50); do
      [ "$(on_node "$i" hostname 2>/dev/null)" = "node$i" ] && break
      sleep 0.1
    done
    [ "$(on_node "$i" hostname)" = "node$i" ] || { echo "cluster: node$i did not start" >&2; return 1; }
  done

  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then  # the socket is on the shared file system
    mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
    [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
    chmod 400 /etc/munge/munge.key
    munged --force --pid-file="$CLUSTER_DIR/munged.pid"
    CLUSTER_MUNGE=$(cat "$CLUSTER_DIR/munged.pid")
  fi
  # Every node offers the machine's memory (Slurm does not enforce it here: no cgroups).
  local mem_mib=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))
  {
    cat <<CONF
ClusterName=genemaskmulti
SlurmctldHost=node1(10.97.$s.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$CLUSTER_DIR/state
SlurmdSpoolDir=$CLUSTER_DIR/spool-%n
SlurmctldPidFile=$CLUSTER_DIR/slurmctld.pid
SlurmdPidFile=$CLUSTER_DIR/slurmd-%n.pid
SlurmctldLogFile=$CLUSTER_DIR/log/slurmctld.log
SlurmdLogFile=$CLUSTER_DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=3600
# A dead node is declared DOWN after SlurmdTimeout s without an answer (default 300). A
# requeued job waits for its old credential to expire (cred_expire) and for the next
# scheduler pass (sched_interval, bf_interval).
SlurmdTimeout=10
AuthInfo=cred_expire=10
SchedulerParameters=sched_interval=2,bf_interval=2
KillWait=5
CONF
    for i in $(seq "$CLUSTER_N"); do
      echo "NodeName=node$i NodeAddr=10.97.$s.$i CPUs=2 RealMemory=$mem_mib State=UNKNOWN"
    done
    echo "PartitionName=test Nodes=node[1-$CLUSTER_N] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } >"$CLUSTER_DIR/slurm.conf"
  export SLURM_CONF=$CLUSTER_DIR/slurm.conf
  on_node 1 env SLURM_CONF="$SLURM_CONF" slurmctld
  for i in $(seq "$CLUSTER_N"); do _cluster_slurmd "$i"; done
  local idle=0
  for _ in $(seq 120); do
    idle=$(on_node 1 sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$' || true)
    [ "$idle" = "$CLUSTER_N" ] && break
    sleep 0.5
  done
  if [ "$idle" != "$CLUSTER_N" ]; then
    echo "cluster: $idle of $CLUSTER_N nodes idle:" >&2
    on_node 1 sinfo -N >&2 || true
    tail -n 20 "$CLUSTER_DIR"/log/*.log >&2 || true
    return 1
  fi
}

node_kill() {
  local p
  # shellcheck disable=SC2046  # pids, one per line
  kill -9 $(_cluster_pids "$1") 2>/dev/null || true
  for _ in $(seq 50); do
    p=$(_cluster_pids "$1")
    [ -z "$p" ] && return 0
    sleep 0.1
  done
  echo "cluster: processes left on node$1: $p" >&2
}

node_start() { _cluster_slurmd "$1"; }

link_down() { ip -n "$(_cluster_sw)" link set "p$1" down; }
link_up() { ip -n "$(_cluster_sw)" link set "p$1" up; }
link_slow() { tc -n "$(_cluster_ns "$1")" qdisc replace dev eth0 root tbf rate "$2" burst 32kbit latency 2s; }
link_fast() { tc -n "$(_cluster_ns "$1")" qdisc del dev eth0 root 2>/dev/null || true; }

cluster_down() {
  local i rc=$?
  [ "$CLUSTER_N" -gt 0 ] || return "$rc"
  # Jobs first (their processes must not outlive slurmd), then the daemons and everything else.
  if [ -n "${CLUSTER_HOLDER[1]:-}" ] && kill -0 "${CLUSTER_HOLDER[1]}" 2>/dev/null; then
    timeout 10 nsenter -t "${CLUSTER_HOLDER[1]}" --net --uts --mount -- scancel --partition=test 2>/dev/null || true
  fi
  for i in $(seq "$CLUSTER_N"); do
    [ -n "${CLUSTER_HOLDER[$i]:-}" ] || continue
    # shellcheck disable=SC2046
    kill $(_cluster_pids "$i") 2>/dev/null || true
  done
  sleep 1
  for i in $(seq "$CLUSTER_N"); do
    [ -n "${CLUSTER_HOLDER[$i]:-}" ] || continue
    # shellcheck disable=SC2046
    kill -9 $(_cluster_pids "$i") "${CLUSTER_HOLDER[$i]}" 2>/dev/null || true
    ip netns del "$(_cluster_ns "$i")" 2>/dev/null || true
  done
  ip netns del "$(_cluster_sw)" 2>/dev/null || true
  if [ -n "$CLUSTER_MUNGE" ]; then kill "$CLUSTER_MUNGE" 2>/dev/null || true; fi
  CLUSTER_N=0
  return "$rc"
}
