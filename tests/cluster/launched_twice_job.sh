#!/bin/bash
# Chapter 08, a launcher started twice, as a new user would start it: one ddprun per
# node with `srun --ntasks-per-node=1` but without --ntasks, inside a 2-tasks-per-node
# allocation. srun keeps the job's 4 tasks (with a warning), so two ddprun start on each
# node, and every rank would be started twice. The two ddprun of a node must find each
# other and say so within seconds (Note [A launcher started twice], tools/ddprun; the
# ranks' own check is Note [Claiming a rank], dist/tcp_store.cpp), instead of waiting out
# the 60 s timeout, and every launcher must then end its job within seconds: srun runs
# under `timeout 20`, and a run that needs longer says so. The cluster test expects this
# job to fail with the hint, and not with that line (expect_failure.sh).
#SBATCH --job-name=launched_twice   # shown by squeue
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # two slots on each
#SBATCH --time=00:02:00             # wall-clock limit
set -euo pipefail
source "${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh"
ddprun=$(ddp_program ddprun)
program=$(ddp_program ddp-train)
echo "launched_twice: srun --ntasks-per-node=1 ddprun ..., without --ntasks"
rc=0
timeout 20 srun --ntasks-per-node=1 bash -c 'exec "$0" --nnodes "$SLURM_NNODES" \
  --node-rank "$SLURM_NODEID" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" "$@"' \
  "$ddprun" --nproc-per-node 2 "$program" --epochs 1 --max-steps 3000 --backend tcp \
  --timeout 60 || rc=$?
# (124 would read as the harness's own timeout: say what happened, and exit 3.)
((rc != 124)) || { echo "launched_twice: the job was still running after 20 s"; exit 3; }
exit "$rc"
