#!/bin/bash
# launch/ch05_rendezvous.mpirun.sh -- chapter 05's program without a scheduler: mpirun
# starts the ranks on this machine or on the hosts of DDP_HOSTFILE (mpi backend by
# default, DDP_BACKEND=tcp for the from-scratch one, DDP_BACKEND=nccl with one rank per
# GPU: each rank's tensors on its own GPU); ddp-doctor runs first.
#
#   launch/ch05_rendezvous.mpirun.sh                    # 4 ranks on this machine
#   DDP_RANKS=8 DDP_HOSTFILE=hosts.txt launch/ch05_rendezvous.mpirun.sh
#   DDP_BACKEND=nccl DDP_RANKS=2 launch/ch05_rendezvous.mpirun.sh   # a machine with 2 GPUs
#
# A good run ends with "ok: 4 ranks met, reduced and left together". Settings: common.sh.
# As root (containers, CI) Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
doctor=$(ddp_program ddp-doctor)
program=$(ddp_program ch05_rendezvous)
ranks=${DDP_RANKS:-4}

# --oversubscribe: allow more ranks than cores (a laptop, a CI box); without a hostfile
# every rank is local. -x passes variables to ranks on other hosts.
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN \
    ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} "$program" \
  --backend "${DDP_BACKEND:-mpi}"
