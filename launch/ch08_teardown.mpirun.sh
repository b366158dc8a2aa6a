#!/bin/bash
# launch/ch08_teardown.mpirun.sh -- chapter 08's job with plain mpirun (no scheduler):
# ddp-train on DDP_RANKS ranks (default 4) that saves a checkpoint every epoch and when
# told to stop. Ctrl-C (or `kill -TERM` / `kill -USR1` of this script) reaches every rank
# as SIGUSR1 through mpirun (which would abort the job on SIGINT or SIGTERM itself:
# ddp_run_stoppable in common.sh); each rank finishes its step, rank 0 writes the
# checkpoint, all exit 75. Run the same command again: it continues where it stopped
# (--resume auto).
#
#   bash launch/ch08_teardown.mpirun.sh
#   DDP_HOSTFILE=hosts.txt DDP_RANKS=8 bash launch/ch08_teardown.mpirun.sh
#
# The checkpoint is DDP_CKPT (default ch08_teardown.ckpt in DDP_CKPT_DIR, else here: a
# fixed name, so that running again finds it; delete it to start over). Exit codes,
# deadlines and what a good run prints: launch/ch08_teardown.sh; settings: common.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # ranks share the cores: one thread each
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 60}
program=$(ddp_program ddp-train)    # exits with a hint when it is not built
checkpoint=${DDP_CKPT:-${DDP_CKPT_DIR:-$PWD}/ch08_teardown.ckpt}
echo "launch: checkpoint $checkpoint"

rc=0
# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
ddp_run_stoppable mpirun -np "${DDP_RANKS:-4}" --oversubscribe \
  ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN \
  -x OMP_NUM_THREADS ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} "$program" $DDP_TRAIN_ARGS \
  --backend "${DDP_BACKEND:-auto}" --save "$checkpoint" --resume auto \
  ${DDP_TIMEOUT:+--timeout "$DDP_TIMEOUT"} || rc=$?
if ((rc == 75)); then echo "launch: stopped on request (75); run the same command again to continue"; fi
exit "$rc"
