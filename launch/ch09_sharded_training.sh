#!/bin/bash
# launch/ch09_sharded_training.sh -- chapter 09's job: sharded data parallelism across
# nodes. ddp-train on two nodes with FSDP (ZeRO-3: parameters, gradients and AdamW's state
# each split over the ranks; a unit's parameters gathered just before it computes and
# freed after), gradients clipped by their global norm, on a model 4x as wide as chapter
# 04's (--width 4: 1,226,442 parameters). After the epoch every rank prints its memory
# table: the bytes it holds per category beside the page's prediction.
#
#   sbatch launch/ch09_sharded_training.sh                        # srun: one task per rank
#   DDP_LAUNCH=ddprun sbatch launch/ch09_sharded_training.sh      # srun: one ddprun per node
#   DDP_LAUNCH=mpirun sbatch launch/ch09_sharded_training.sh      # mpirun in the allocation
#   DDP_SHARD=zero1 sbatch launch/ch09_sharded_training.sh        # or zero2, or none (DDP)
#   DDP_TRAIN_ARGS="--epochs 1 --max-steps 20 --width 4 --optimizer adamw --clip-grad-norm 1.0
#     --grad-accum 4" sbatch launch/ch09_sharded_training.sh      # 4 micro-batches per step
#   export DDP_TRAIN_ARGS="--epochs 1 --max-steps 4 --width 8 --batch-size 4"
#   DDP_TRAIN_ARGS+=" --eval-batch-size 16 --optimizer adamw --lr 0.001"  # the budget's model:
#   DDP_MEMORY_LIMIT_MB=110 sbatch launch/ch09_sharded_training.sh              # fits
#   DDP_MEMORY_LIMIT_MB=110 DDP_SHARD=none sbatch launch/ch09_sharded_training.sh  # refused
#
# DDP_SHARD: none (chapter 07's DDP: everything replicated), zero1 (AdamW's state sharded),
# zero2 (the gradients too, reduce-scattered bucket by bucket during backward) or fsdp (the
# default: the parameters too). The recipe line says which ("parameters and optimizer
# state sharded in 6 units (fsdp)"). --grad-accum K splits each rank's batch into K
# micro-batches, the first K-1 without communication ("batch 32 per rank = 128 global in 4
# micro-batches"); the global batch stays 128.
#
# Rank 0's table on the local cluster (2 x 2 ranks, --width 4, AdamW), in bytes held after
# the epoch (every rank's is the same), and the peak of all its tensors, which comes from
# the evaluation (500 test images per rank at once: 384.6 MiB of activations):
#              parameters  gradients  optimizer state  communication  peak total
#   none          4916520    4905768          9811536              0  403.32 MiB
#   zero1         4916528    6132212          2452888        1226444  398.65 MiB
#   zero2         4916528    1226444          2452888              0  392.80 MiB
#   fsdp          1237196    1226444          2452888              0  393.97 MiB
# After the epoch an FSDP rank holds 5.0 MiB of tensors where a DDP rank holds 19.0, each
# row within a few bytes of the prediction in the printed table's last column (BatchNorm's
# statistics stay whole on every rank). The budget, DDP_MEMORY_LIMIT_MB=N MiB of tensors
# per rank, makes an allocation past it fail, naming the category and the bytes. At width
# 4 the evaluation's 384.6 MiB of activations dwarf the 19.0 MiB of model state, so the
# budget is shown on the model twice as wide (--width 8: 4,894,090 parameters), with 4
# images per rank per step and 16 per evaluation forward (the DDP_TRAIN_ARGS above).
# Without a budget, DDP's peak total is 135.55 MiB per rank and FSDP's 97.59 MiB (its
# parameters 4.69 MiB live, its optimizer state 9.33). At 110, FSDP finishes; DDP trains
# one step and is refused in its second, once AdamW's state exists, on every rank:
#   error: memory budget exceeded: allocating 37748736 bytes (36.0 MiB) of activations
#   would hold 126.6 MiB in tensors, over the budget of 110.0 MiB (DDP_MEMORY_LIMIT_MB=110)
#   held now: parameters 18.7 MiB, gradients 18.7 MiB, optimizer state 37.3 MiB,
#   activations 15.9 MiB, communication 0.0 MiB
#
# A good run ends with "final: test accuracy XX.XX% (N/2000 after epoch 1), wall time T s"
# (a short run: 20 steps, 30 s on the local cluster's 2 CPU cores; drop --max-steps to
# train fully). Backend: --backend auto (NCCL when every rank has a GPU of its own, else
# tcp; DDP_BACKEND=tcp|nccl|mpi, mpi under mpirun only). Output:
# ch09_sharded_training-<job id>.out. The chapter: tutorial/ch09_sharded; launch methods:
# launch/README.md; settings: common.sh. On a real cluster, edit the #SBATCH lines as
# launch/ch07_multinode.sh explains (partition, account, GPUs, modules, NCCL variables).
#SBATCH --job-name=ch09_sharded_training   # shown by squeue; %x in --output
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # ranks on each: on GPU nodes, = GPUs per node
##SBATCH --gpus-per-node=2          # GPU nodes: remove one '#' (and match ntasks-per-node)
##SBATCH --partition=gpu            # remove one '#' and name your cluster's partition
##SBATCH --account=proj42           # remove one '#' and name your project's account
#SBATCH --cpus-per-task=1           # cores per rank (its OpenMP threads)
#SBATCH --time=00:30:00             # wall-clock limit
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
# The default is a short run; drop --max-steps to train fully. The global batch stays at
# ddp-train's default, 128, whatever the number of ranks (and --grad-accum).
default_args="--epochs 1 --max-steps 20 --width 4 --optimizer adamw --clip-grad-norm 1.0"
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:-$default_args}
program=$(ddp_program ddp-train)    # exits with a hint when it is not built
args=(--shard "${DDP_SHARD:-fsdp}" --print-memory --backend "${DDP_BACKEND:-auto}")
# The budget reaches ranks that srun and ddprun start with the rest of the environment;
# mpirun's remote ranks see only what -x names (DDP_MPIRUN_X, common.sh, names it).

# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
case ${DDP_LAUNCH:-srun} in
  srun) srun "$program" $DDP_TRAIN_ARGS "${args[@]}" ;;
  ddprun) ddp_ddprun_per_node "$program" $DDP_TRAIN_ARGS "${args[@]}" ;;
  mpirun)
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN -x OMP_NUM_THREADS \
      ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} \
      "$program" $DDP_TRAIN_ARGS "${args[@]}"
    ;;
  *) echo "launch: DDP_LAUNCH=${DDP_LAUNCH} is not one of srun, ddprun, mpirun" >&2; exit 2 ;;
esac
