#!/bin/bash
# launch/ch01_tensor.mpirun.sh -- chapter 01's program, ch01_tensor, started by mpirun
# without a scheduler: views, broadcasting, reductions, matmul and random numbers,
# each result checked.
# One process, on this machine or on the first host of DDP_HOSTFILE.
#
#   launch/ch01_tensor.mpirun.sh
#   DDP_HOSTFILE=hosts.txt launch/ch01_tensor.mpirun.sh   # "gpu01 slots=4" lines
#
# Settings: launch/common.sh. As root, Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (containers, CI); launch/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
program=$(ddp_program ch01_tensor)   # exits with a hint when it is not built

# -np 1: one process. -x passes a variable on to it (mpirun does not copy the whole
# environment to other hosts). --hostfile only when one is given.
# shellcheck disable=SC2086  # DDP_ARGS: extra arguments for the program, split on spaces
mpirun -np 1 ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} -x OMP_NUM_THREADS \
  "$program" ${DDP_ARGS:-}
