#!/bin/bash
# launch/ch07_multinode.sh -- chapter 07's training across nodes, the job the workshop ends
# with: ddp-train on two nodes, gradients all-reduced in buckets by the Reducer while
# backward still runs, every rank recording a timeline (--trace). ddp-doctor runs first,
# under the same launcher; after training the ranks' timelines are merged into one file,
# ch07_multinode-<job id>.json, and its path printed (open it in ui.perfetto.dev, or
# offline: ddp-trace-merge --svg OUT.svg TRACE.json draws it for any browser).
#
#   sbatch launch/ch07_multinode.sh                       # srun: one task per rank
#   DDP_LAUNCH=ddprun sbatch launch/ch07_multinode.sh     # srun: one ddprun per node
#   DDP_LAUNCH=mpirun sbatch launch/ch07_multinode.sh     # mpirun in the allocation
#   DDP_TRAIN_ARGS="--epochs 5 --width 4 --print-buckets" sbatch launch/ch07_multinode.sh
#   sbatch -p gpu -A proj42 --gpus-per-node=4 --ntasks-per-node=4 launch/ch07_multinode.sh
#
# Ranks per node come from the allocation (--ntasks-per-node: on GPU nodes one per GPU,
# each rank on cuda:<local rank>); the backend is ddp-train's --backend auto, NCCL when
# every rank has a GPU of its own, else tcp (DDP_BACKEND=tcp|nccl|mpi names one; mpi
# under mpirun only).
#
# A good run prints, per epoch, rank 0's "epoch N: compute .. ms, communication .. ms,
# exposed .. ms, overlap ..%" (how much of the all-reduce hid behind backward), then
# "final: test accuracy XX.XX% (N/2000 after epoch 1), wall time T s" and "trace: PATH".
# On CPU nodes the `final:` line, without its wall time, equals the one that `ddprun
# --nproc-per-node 4 ddp-train` with the same flags prints on one machine. Output:
# ch07_multinode-<job id>.out, and the trace beside it (DDP_TRACE_DIR: another folder,
# one that every node sees). Launch methods: launch/README.md; settings: common.sh.
#
# On a real cluster, edit the #SBATCH lines below (or give sbatch the flags: they win):
#   partition  --partition=gpu   (or SBATCH_PARTITION=gpu before sbatch)
#   account    --account=proj42  (or SBATCH_ACCOUNT=proj42)
#   GPUs       --gpus-per-node=G together with --ntasks-per-node=G, one rank per GPU; and
#              --cpus-per-task = the node's cores / G, for the data loading and the CPU side
#   modules    DDP_MODULES="gcc/12 openmpi cuda/12.4" before sbatch (common.sh loads them)
#   network    NCCL reads NCCL_* variables; export them before sbatch (srun passes the
#              environment on, the mpirun lines below pass every NCCL_* variable with -x):
#     NCCL_DEBUG=INFO            NCCL says which network it took: "NET/IB" is InfiniBand,
#                                "NET/Socket" plain TCP (slow on a cluster: see the next two)
#     NCCL_SOCKET_IFNAME=ib0     the interface for NCCL's bootstrap and its socket transport
#                                (`ip -br addr` on a node lists them: eth0, ib0, ...)
#     NCCL_IB_HCA=mlx5_0,mlx5_1  the InfiniBand adapters to use (`ibv_devices` lists them)
#     NCCL_IB_DISABLE=1          InfiniBand off: tells an InfiniBand problem from the rest
#   InfiniBand NCCL finds and uses it by itself. The tcp backend's ring runs over the
#              interface through which each node reaches MASTER_ADDR (common.sh: the first
#              node's name); MASTER_ADDR=<its IPoIB name or address> moves it onto IB.
#SBATCH --job-name=ch07_multinode   # shown by squeue; %x in --output
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # ranks on each: on GPU nodes, = GPUs per node
##SBATCH --gpus-per-node=2          # GPU nodes: remove one '#' (and match ntasks-per-node)
##SBATCH --partition=gpu            # remove one '#' and name your cluster's partition
##SBATCH --account=proj42           # remove one '#' and name your project's account
#SBATCH --cpus-per-task=1           # cores per rank (its OpenMP threads)
#SBATCH --time=00:30:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
# The default is a quick run that proves the job works; drop --max-steps to train fully.
# The global batch stays at ddp-train's default, 128, whatever the number of ranks.
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 20}
doctor=$(ddp_program ddp-doctor)
program=$(ddp_program ddp-train)       # each exits with a hint when it is not built
ddp_program ddp-trace-merge >/dev/null  # needed after training: checked before it
# ddp-train writes FILE.rankR.json per rank; ddp_merge_trace (common.sh) joins them here.
trace=${DDP_TRACE_DIR:-$PWD}/ch07_multinode-$DDP_JOB_ID.json
ranks=${SLURM_NTASKS:-$SLURM_NNODES}    # nodes x ntasks-per-node (srun: 1 per node if unset)

# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
case ${DDP_LAUNCH:-srun} in
  srun)
    # One task per rank; each reads SLURM_PROCID/SLURM_LOCALID, and MASTER_ADDR/PORT
    # from the environment common.sh set.
    srun "$doctor"
    srun "$program" $DDP_TRAIN_ARGS --backend "${DDP_BACKEND:-auto}" --trace "$trace"
    ;;
  ddprun)
    # One ddprun per node (ddp_ddprun_per_node, common.sh), which starts the node's
    # ranks with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
    ddp_ddprun_per_node "$doctor"
    ddp_ddprun_per_node "$program" $DDP_TRAIN_ARGS --backend "${DDP_BACKEND:-auto}" \
      --trace "$trace"
    ;;
  mpirun)
    # mpirun reads the allocation and starts one rank per slot; -x passes variables on.
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN -x OMP_NUM_THREADS \
      ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} \
      "$program" $DDP_TRAIN_ARGS --backend "${DDP_BACKEND:-auto}" --trace "$trace"
    ;;
  *) echo "launch: DDP_LAUNCH=${DDP_LAUNCH} is not one of srun, ddprun, mpirun" >&2; exit 2 ;;
esac
ddp_merge_trace "$trace" "$ranks"
