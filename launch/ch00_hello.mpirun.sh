#!/bin/bash
# launch/ch00_hello.mpirun.sh -- "hello, cluster" without a scheduler: mpirun starts the
# ranks on this machine, or on the hosts of DDP_HOSTFILE; ddp-doctor runs first.
#
#   launch/ch00_hello.mpirun.sh                         # 4 ranks on this machine
#   DDP_RANKS=8 DDP_HOSTFILE=hosts.txt launch/ch00_hello.mpirun.sh   # "gpu01 slots=4" lines
#
# Settings: launch/common.sh (MASTER_ADDR = first host of the hostfile, else 127.0.0.1).
# As root (containers, CI) Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
doctor=$(ddp_program ddp-doctor)
hello=$(ddp_program ch00_hello)
ranks=${DDP_RANKS:-4}

# --oversubscribe: allow more ranks than cores (a laptop, a CI box); without a hostfile
# every rank is local. -x passes variables to ranks on other hosts.
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$hello"
