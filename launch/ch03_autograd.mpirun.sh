#!/bin/bash
# launch/ch03_autograd.mpirun.sh -- chapter 03's program, ch03_autograd, started by mpirun
# without a scheduler: a tiny network's backward graph, hook order and gradients against
# finite differences. Its exit code is gradcheck's verdict: without a scheduler, the
# shell's && makes chapter 04's training wait behind it, and start only if it passed.
# One process, on this machine or on the first host of DDP_HOSTFILE.
#
#   launch/ch03_autograd.mpirun.sh && launch/ch04_resnet_mnist.mpirun.sh
#   DDP_HOSTFILE=hosts.txt launch/ch03_autograd.mpirun.sh   # "gpu01 slots=4" lines
#
# Settings: launch/common.sh. As root, Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (containers, CI); launch/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
program=$(ddp_program ch03_autograd)   # exits with a hint when it is not built

# -np 1: one process. -x passes a variable on to it (mpirun does not copy the whole
# environment to other hosts). --hostfile only when one is given. mpirun exits with the
# program's code, and so does this script (set -e).
mpirun -np 1 ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} -x OMP_NUM_THREADS "$program"
echo "launch: gradcheck passed"
