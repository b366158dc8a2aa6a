#!/bin/bash
# launch/ch01_tensor.mpirun.sh -- chapter 01's program, ch01_tensor, started by mpirun
# without a scheduler, twice: on 1 thread and on every core of this machine, and the two
# outputs compared. One process, on this machine or on the first host of DDP_HOSTFILE.
#
#   launch/ch01_tensor.mpirun.sh
#   DDP_HOSTFILE=hosts.txt launch/ch01_tensor.mpirun.sh   # "gpu01 slots=4" lines
#
# Settings: launch/common.sh. As root, Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (containers, CI); launch/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
program=$(ddp_program ch01_tensor)   # exits with a hint when it is not built
# This machine's cores (nproc would answer OMP_NUM_THREADS when it is set); a host of
# DDP_HOSTFILE may have others: any count above 1 makes the point.
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)

# Chapter 01's promise: the thread count does not change a result (why: ch01_tensor.sh).
# -np 1: one process. --bind-to none: Open MPI would pin it to one core, and its threads
# would share that one. -x passes OMP_NUM_THREADS on to it (mpirun does not copy the whole
# environment to other hosts). The first line, which says the thread count, is left out
# of the comparison.
run() {
  OMP_NUM_THREADS=$1 mpirun -np 1 --bind-to none ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
    -x OMP_NUM_THREADS "$program"
}
one=$(run 1)
all=$(run "$cores")
echo "$all"
diff <(sed 1d <<<"$one") <(sed 1d <<<"$all") ||
  { echo "launch: the results on 1 thread and on $cores differ (diff above)" >&2; exit 1; }
echo "launch: the same results on 1 thread and on $cores threads"
