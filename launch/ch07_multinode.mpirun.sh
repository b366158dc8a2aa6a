#!/bin/bash
# launch/ch07_multinode.mpirun.sh -- chapter 07's training without a scheduler: mpirun
# starts the ranks of ddp-train on this machine or on the hosts of DDP_HOSTFILE; the
# Reducer all-reduces gradients in buckets while backward still runs, and every rank
# records a timeline (--trace). ddp-doctor runs first; after training the ranks'
# timelines are merged into ch07_multinode-<pid>.json here, and its path printed.
#
#   launch/ch07_multinode.mpirun.sh                     # 4 ranks on this machine
#   DDP_RANKS=8 DDP_HOSTFILE=hosts.txt launch/ch07_multinode.mpirun.sh
#   DDP_BACKEND=mpi launch/ch07_multinode.mpirun.sh     # MPI_Allreduce instead of the tcp ring
#
# Backend: ddp-train's --backend auto (NCCL when every rank has a GPU of its own, else
# tcp). A good run prints rank 0's "epoch N: compute .. ms, communication .. ms, exposed
# .. ms, overlap ..%", then "final: test accuracy XX.XX% (N/2000 after epoch 1), wall time
# T s" and "trace: PATH"; on CPUs the `final:` line, without its wall time, equals the
# one of `ddprun --nproc-per-node 4 ddp-train` with the same flags. With a hostfile, this
# folder must be one that every host sees (the programs and the trace files are here).
# NCCL_* variables (launch/ch07_multinode.sh explains the ones worth knowing) are passed
# to every rank. Settings: launch/common.sh (DDP_TRAIN_ARGS below). As root (containers,
# CI) Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # ranks share the cores: one thread each
# The default is a quick run that proves the job works; drop --max-steps to train fully.
# The global batch stays at ddp-train's default, 128, whatever the number of ranks.
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 20}
doctor=$(ddp_program ddp-doctor)
program=$(ddp_program ddp-train)       # each exits with a hint when it is not built
ddp_program ddp-trace-merge >/dev/null  # needed after training: checked before it
# ddp-train writes FILE.rankR.json per rank; ddp_merge_trace (common.sh) joins them here.
trace=${DDP_TRACE_DIR:-$PWD}/ch07_multinode-$DDP_JOB_ID.json
ranks=${DDP_RANKS:-4}

# --oversubscribe: allow more ranks than cores (a laptop, a CI box); without a hostfile
# every rank is local. -x passes variables to ranks on other hosts.
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN -x OMP_NUM_THREADS \
    ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} \
  "$program" $DDP_TRAIN_ARGS --backend "${DDP_BACKEND:-auto}" --trace "$trace"
ddp_merge_trace "$trace" "$ranks"
