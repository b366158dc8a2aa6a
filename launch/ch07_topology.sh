#!/bin/bash
# launch/ch07_topology.sh -- chapter 07's "Topology": the flat ring against the two-level
# all-reduce (dist/two_level_group.hpp) on two nodes of two ranks, tcp backend. Rank 0
# prints, per size, both all-reduces' median times, and the bytes that went over links
# inside the nodes and between them, beside the cost model's formula (ch07_topology).
#
#   sbatch launch/ch07_topology.sh                      # the cluster's real network
#   DDP_TCP_LINK=1gbit,50us DDP_TCP_LINK_SCOPE=between-hosts sbatch launch/ch07_topology.sh
#                          # a 1 Gbit/s network between the nodes, emulated: what the local
#                          # test cluster runs, and the page's table; the model's
#                          # prediction is printed beside the times
#   DDP_TCP_SHM=0 sbatch launch/ch07_topology.sh        # a node's ranks talk over sockets
#                          # too, so that the bytes inside the nodes are counted as well
#   DDP_TOPOLOGY_ARGS="--sizes 1,16,64 --reps 9" sbatch launch/ch07_topology.sh
#   sbatch --ntasks-per-node=8 launch/ch07_topology.sh  # more ranks a node: the same on each
#
# A good run ends with "ch07_topology: ok": every byte count the tcp sockets saw equals the
# formula. srun starts one task per rank; ddprun and mpirun work too (DDP_LAUNCH), as in
# ch05_rendezvous.sh. Output: ch07_topology-<job id>.out. Settings: common.sh.
#SBATCH --job-name=ch07_topology    # shown by squeue; %x in --output
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # ranks on each: the same number on every node
#SBATCH --cpus-per-task=1           # cores per rank
#SBATCH --time=00:10:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
program=$(ddp_program ch07_topology)
DDP_TOPOLOGY_ARGS=${DDP_TOPOLOGY_ARGS:---sizes 1,16 --reps 5}

# shellcheck disable=SC2086  # DDP_TOPOLOGY_ARGS is a list of flags
case ${DDP_LAUNCH:-srun} in
  srun) srun "$program" $DDP_TOPOLOGY_ARGS ;;
  ddprun) ddp_ddprun_per_node "$program" $DDP_TOPOLOGY_ARGS ;;
  mpirun)
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} \
      "$program" $DDP_TOPOLOGY_ARGS ;;
  *) echo "launch: DDP_LAUNCH=${DDP_LAUNCH} is not one of srun, ddprun, mpirun" >&2; exit 2 ;;
esac
