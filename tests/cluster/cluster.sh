#!/usr/bin/env bash
# Starts or stops the local SLURM cluster for the cluster tests (ctest fixture
# `cluster`): tools/local-cluster.sh with a state folder and ports of this build tree's
# own, so two build trees never share a cluster. Chapter 00 (label `cluster`).
#
#   cluster.sh start|stop       (LOCAL_SLURM_DIR and the ports come from CMake)
# Exits 77 (ctest: Skipped) when SLURM is not installed, we are not root, or there are no
# namespaces to give the logical nodes their host names.
set -uo pipefail
: "${DDP_ROOT:?}" "${LOCAL_SLURM_DIR:?}"

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "SLURM/munge not installed (tools/install-deps.sh installs them): skipping"
  exit 77
fi
if (($(id -u) != 0)); then
  echo "the local cluster runs its daemons as root; not root: skipping"
  exit 77
fi
# The jobs check that their ranks see the host names node1 and node2, which needs a UTS
# namespace per node (a container without CAP_SYS_ADMIN has none): skip, do not fail.
if ! unshare --uts --mount --propagation private /bin/true 2>/dev/null; then
  echo "no UTS + mount namespaces here (unshare needs CAP_SYS_ADMIN): the cluster tests" \
       "need node1/node2 host names: skipping"
  exit 77
fi

case ${1:-} in
  start)
    # A clean slate each time: no state, queue or job records from an earlier run.
    "$DDP_ROOT/tools/local-cluster.sh" stop >/dev/null 2>&1
    rm -rf "$LOCAL_SLURM_DIR"
    # One fake GPU per node (a /dev/null clone as GRES gpu): chapter 02's job scripts ask
    # for a GPU, and a cluster without GRES refuses them at submission ("Invalid generic
    # resource (gres) specification"). With it, SLURM allocates the GPU and sets
    # CUDA_VISIBLE_DEVICES as on a real cluster; the program finds no device behind it and
    # runs on the CPU. Jobs that ask for no GPU see no difference.
    LOCAL_SLURM_GPUS=${LOCAL_SLURM_GPUS:-1} "$DDP_ROOT/tools/local-cluster.sh" start
    ;;
  stop)
    rc=0
    "$DDP_ROOT/tools/local-cluster.sh" stop || rc=$?
    ((rc == 0)) || tail -n 20 "$LOCAL_SLURM_DIR"/log/*.log
    exit $rc
    ;;
  *) echo "usage: cluster.sh start|stop" >&2; exit 2 ;;
esac
