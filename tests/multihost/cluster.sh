# Simulated cluster on one Linux machine, for MPI tests that need ranks on
# several hosts.  Sourced by tests/multihost/test_multihost.sh and
# tests/multihost/simrun.sh, after setting mh_srcdir to this directory (an
# absolute path without blanks); needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN),
# iproute2 (`ip`), util-linux (`unshare`) and coreutils (`timeout`).
#
#   mh_up N SLOTS   make N hosts; 0, or 1 with the reason in $mh_skip_reason
#   mh_mpirun ARGS  mpirun ARGS in the launcher namespace, over the hosts
#   mh_down         remove everything mh_up made (idempotent; call it from traps)
#
# Layout (no address or link is ever added to the caller's own network
# namespace, so nothing here can collide with the machine's networks):
#
#   netns hpcmem-mh<PID>-l    launcher: bridge br0 10.213.0.1/24, mpirun runs here
#   netns hpcmem-mh<PID>-h<i> host i: eth0 10.213.0.<11+i>/24, veth to br0
#
# A host has no route but the subnet's, so MPI traffic can only go to the
# other simulated hosts.  Each orted is started by tests/multihost/agent.sh
# (Open MPI's rsh launcher agent, in place of ssh) inside its host's network
# namespace and in a UTS namespace of its own with the host's name, so
# uname() in the ranks names the simulated host.  The mount namespace is
# shared: /tmp and the build tree are the same on every host, as on a
# cluster with a shared file system.
#
# The PID in the names keeps concurrent runs apart; mh_up also removes the
# namespaces, Open MPI session directories and harness directories of
# earlier runs whose process is gone (killed by SIGKILL, which no trap sees).

mh_net=${MULTIHOST_NET:-10.213.0}      # first three octets of the /24
mh_prefix=hpcmem-mh$$
mh_dir=
mh_namespaces=
mh_skip_reason=
mh_hosts=0
mh_launcher=$mh_prefix-l
mh_hostname() { echo "mh$$-host$1"; }  # the UTS name of host $1
mh_addr() { echo "$mh_net.$((11 + $1))"; }

# Delete a namespace after ending the processes still inside it (a daemon
# left by an interrupted mpirun keeps the namespace and its links alive).
mh_delete_ns() {
  pids=$(ip netns pids "$1" 2>/dev/null)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$1" 2>/dev/null)
      [ -z "$pids" ] && break
      sleep 0.2
    done
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  fi
  ip netns del "$1" 2>/dev/null
}

# Namespaces of earlier runs whose harness process no longer exists
mh_reap_stale() {
  for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(hpcmem-mh[0-9][0-9]*-[a-z0-9]*\).*/\1/p'); do
    pid=${ns#hpcmem-mh}; pid=${pid%%-*}
    [ "$pid" = $$ ] && continue
    kill -0 "$pid" 2>/dev/null || mh_delete_ns "$ns"
  done
  for d in /tmp/ompi.mh[0-9]*-* "${TMPDIR:-/tmp}"/ompi.mh[0-9]*-*; do
    pid=${d##*/ompi.mh}; pid=${pid%%-*}
    case $pid in *[!0-9]*|'') continue ;; esac
    [ "$pid" = $$ ] || kill -0 "$pid" 2>/dev/null || mh_session_dirs "$pid" | while read -r x; do rm -rf "$x"; done
  done
  for d in "${TMPDIR:-/tmp}"/hpcmem-mh[0-9]*.??????; do   # mh_up's own directories
    pid=${d##*/hpcmem-mh}; pid=${pid%%.*}
    case $pid in *[!0-9]*|'') continue ;; esac
    [ "$pid" = $$ ] || kill -0 "$pid" 2>/dev/null || rm -rf "$d"
  done
}

mh_ns_add() {  # create netns $1 and remember it for mh_down
  err=$(ip netns add "$1" 2>&1) || { mh_skip_reason="cannot create a network namespace: ${err:-ip netns add failed}"; return 1; }
  mh_namespaces="$mh_namespaces $1"
  ip -n "$1" link set lo up
  # IPv4 on the subnet only: no IPv6 link-local addresses either
  ip netns exec "$1" sh -c 'for f in all default; do echo 1 > /proc/sys/net/ipv6/conf/$f/disable_ipv6; done' 2>/dev/null
  return 0
}

mh_up() {
  n=${1:-2} slots=${2:-2}
  if ! command -v ip >/dev/null 2>&1; then mh_skip_reason="no 'ip' command (Debian package iproute2)"; return 1; fi
  if ! command -v unshare >/dev/null 2>&1; then mh_skip_reason="no 'unshare' command (util-linux)"; return 1; fi
  if [ "$(id -u)" != 0 ]; then mh_skip_reason="network namespaces need root (running as uid $(id -u))"; return 1; fi
  if ! unshare --uts true 2>/dev/null; then mh_skip_reason="cannot create a UTS namespace (unshare --uts failed)"; return 1; fi
  mh_reap_stale
  mh_dir=$(mktemp -d "${TMPDIR:-/tmp}/hpcmem-mh$$.XXXXXX") || { mh_skip_reason="mktemp failed"; return 1; }
  mh_ns_add "$mh_launcher" || return 1
  if ! err=$(ip -n "$mh_launcher" link add br0 type bridge 2>&1); then
    mh_skip_reason="cannot create a bridge in a network namespace: $err"; mh_down; return 1
  fi
  ip -n "$mh_launcher" addr add "$mh_net.1/24" dev br0 &&
  ip -n "$mh_launcher" link set br0 up || { mh_skip_reason="cannot configure the bridge"; mh_down; return 1; }
  : > "$mh_dir/hostfile"
  : > "$mh_dir/hosts"
  i=0
  while [ $i -lt "$n" ]; do
    ns=$mh_prefix-h$i
    mh_ns_add "$ns" || { mh_down; return 1; }
    # both ends are made in the launcher namespace and one is moved into the
    # host: the caller's namespace never holds either
    if ! err=$(ip -n "$mh_launcher" link add "v$i" type veth peer name eth0 netns "$ns" 2>&1); then
      mh_skip_reason="cannot create a veth pair: $err"; mh_down; return 1
    fi
    ip -n "$mh_launcher" link set "v$i" master br0 &&
    ip -n "$mh_launcher" link set "v$i" up &&
    ip -n "$ns" addr add "$(mh_addr $i)/24" dev eth0 &&
    ip -n "$ns" link set eth0 up || { mh_skip_reason="cannot configure host $i's link"; mh_down; return 1; }
    echo "$(mh_addr $i) slots=$slots" >> "$mh_dir/hostfile"
    # address -> namespace and hostname, for the agent
    echo "$(mh_addr $i) $ns $(mh_hostname $i)" >> "$mh_dir/hosts"
    i=$((i + 1))
  done
  mh_hosts=$n
  return 0
}

# mpirun in the launcher namespace.  Open MPI's TCP traffic (daemons and
# ranks) is restricted to the subnet; the daemons are started through the
# agent one by one (no tree spawn: every host is reached from the launcher).
# MULTIHOST_TIMEOUT (s, default 90) bounds a run that hangs.  Runs in the
# background so that a trapped INT/TERM is handled at once.
mh_mpirun() {
  root=
  [ "$(id -u)" = 0 ] && root=--allow-run-as-root
  ip netns exec "$mh_launcher" unshare --uts -- sh -c '{ hostname "$0" || echo "$0" > /proc/sys/kernel/hostname; } 2>/dev/null && exec "$@"' "mh$$-launcher" \
    timeout -k 5 "${MULTIHOST_TIMEOUT:-90}" mpirun $root --hostfile "$mh_dir/hostfile" \
      --mca plm rsh --mca plm_rsh_agent "sh $mh_srcdir/agent.sh $mh_dir/hosts" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl self,vader,tcp --mca pml ob1 --mca btl_base_warn_component_unused 0 \
      --mca btl_tcp_if_include "$mh_net.0/24" --mca oob_tcp_if_include "$mh_net.0/24" \
      --bind-to none "$@" &
  mh_job=$!
  wait $mh_job
  rc=$?
  mh_job=
  return $rc
}

# Open MPI's session directories of the simulated hosts (/tmp/ompi.HOST.UID,
# named after the hosts' names, which hold the PID): mpirun removes them when
# it ends normally, not when it was killed
mh_session_dirs() {
  for d in /tmp "${TMPDIR:-/tmp}"; do
    ls -d "$d/ompi.mh$1-host"[0-9]*.[0-9]* "$d/ompi.mh$1-launcher".[0-9]* 2>/dev/null
  done | sort -u
}

mh_down() {
  for ns in $mh_namespaces; do mh_delete_ns "$ns"; done
  [ -n "$mh_namespaces" ] && mh_session_dirs $$ | while read -r d; do rm -rf "$d"; done
  mh_namespaces=
  [ -n "$mh_dir" ] && rm -rf "$mh_dir"
  mh_dir=
  mh_hosts=0
}
