#!/usr/bin/env bash
# Chapter 05: runs a program on the tcp backend under mpirun, which tells each rank who it
# is (OMPI_COMM_WORLD_*) but not where rank 0's TCPStore listens: this picks a free
# loopback port and exports MASTER_ADDR and MASTER_PORT to every rank (without them every
# job would take the default 29500, and two at once would collide).
#   mpirun_tcp.sh <mpiexec> <np> <ch05_fault> PROGRAM ARGS...
set -u
mpiexec=$1 np=$2 fault=$3
shift 3
port=$("$fault" free-port) || { echo "FAIL: could not pick a free port"; exit 1; }
# DDP_TCP_SHM, when set, reaches the ranks too (mpirun passes on only what -x names).
shm=()
[ -n "${DDP_TCP_SHM:-}" ] && shm=(-x DDP_TCP_SHM)
exec "$mpiexec" -np "$np" --oversubscribe -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
  ${shm[@]+"${shm[@]}"} "$@"
