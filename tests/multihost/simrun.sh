#!/bin/sh
# Run an MPI job over simulated hosts on this machine (as root):
#   tests/multihost/simrun.sh [-n HOSTS] [-s SLOTS] [--] MPIRUN-ARGUMENTS...
# e.g.  tests/multihost/simrun.sh -n 2 -- -np 4 -x LD_PRELOAD=$PWD/.libs/libhpcmem.so ./app
# Brings up HOSTS (default 2) network namespaces with SLOTS (default 2) slots
# each (tests/multihost/cluster.sh), runs mpirun over them and removes them
# again, also on Ctrl-C.  Exit status: mpirun's, 77 when namespaces cannot
# be made here.
mh_srcdir=$(cd "$(dirname "$0")" && pwd)
. "$mh_srcdir/cluster.sh"
hosts=2 slots=2
while [ $# -gt 0 ]; do
  case $1 in
    -n) hosts=$2; shift 2 ;;
    -s) slots=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
trap 'mh_down' EXIT
trap 'mh_down; exit 130' INT
trap 'mh_down; exit 143' TERM
if ! mh_up "$hosts" "$slots"; then echo "simrun.sh: $mh_skip_reason" >&2; exit 77; fi
i=0
while [ $i -lt "$hosts" ]; do echo "simrun.sh: host $(mh_hostname $i) at $(mh_addr $i)" >&2; i=$((i + 1)); done
mh_mpirun "$@"
