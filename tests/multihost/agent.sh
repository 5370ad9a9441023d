#!/bin/sh
# Open MPI's rsh launcher agent for the simulated hosts (tests/multihost/cluster.sh),
# used in place of ssh:
#   agent.sh HOSTS-FILE HOST COMMAND...
# HOSTS-FILE has one line "ADDRESS NETNS HOSTNAME" per simulated host; HOST is
# the address mpirun took from its hostfile.  The command (orted and its
# arguments, a shell command line as ssh would receive it) runs inside that
# host's network namespace, in a new UTS namespace named after the host, with
# the environment a non-interactive ssh session would give (PATH, HOME, USER,
# LOGNAME, SHELL): what the ranks need beyond that has to come through
# `mpirun -x`, as on a real cluster.
hosts=$1 host=$2
shift 2
line=$(grep "^$host " "$hosts" 2>/dev/null | head -1)
if [ -z "$line" ]; then
  echo "agent.sh: $host: no such simulated host (in $hosts)" >&2
  exit 255   # what ssh returns when it cannot reach a host
fi
set -- $line "$*"
ns=$2 name=$3 command=$4
exec ip netns exec "$ns" unshare --uts -- \
  env -i PATH="$PATH" HOME="${HOME:-/}" USER="${USER:-root}" LOGNAME="${LOGNAME:-${USER:-root}}" SHELL=/bin/sh \
  sh -c '{ hostname "$0" || echo "$0" > /proc/sys/kernel/hostname; } 2>/dev/null && exec sh -c "$1"' "$name" "$command"
