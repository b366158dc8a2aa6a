#!/usr/bin/env bash
# Chapter 04, ddp-train's --progress on a terminal: run under a pseudo-terminal (util-linux
# `script`, with the terminal's newline -> CR LF translation off, so that every carriage
# return in the capture is ddp-train's own). auto draws the bar there; --progress lines,
# and auto under mpirun (real, and simulated with Open MPI's variables), print plain lines
# without a carriage return; none prints neither; bar draws it even into a file.
#   progress.sh <ddp-train> <data folder> <scratch folder>
set -u
bin=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/common.sh"
command -v script >/dev/null || { echo "no 'script' (util-linux): skipping"; exit 77; }
small_mnist "$data" mnist && data=$PWD/mnist

# on_tty <log> <command...>: runs the command with a pseudo-terminal as its stdout, as in
# an interactive shell; its output (stdout and stderr) goes to <log>.
on_tty() {
  local log=$1
  shift
  script -qec "stty -onlcr; $(printf '%q ' "$@")" /dev/null >"$log" 2>&1 ||
    { cat "$log"; fail "$* exited non-zero"; }
  grep -q '^final: test accuracy' "$log" || { cat "$log"; fail "no final: line in $log"; }
}
flags=(--data "$data" --device cpu --threads 1 --seed 3 --batch-size 32 --epochs 1)
has_cr() { grep -q $'\r' "$1"; }
plain_lines() { grep -q '^epoch 1/1 step 8/8 loss [0-9.]* [0-9]* img/s$' "$1"; }

# The control: without it the checks below could pass on a capture that hides carriage
# returns.
on_tty auto.log "$bin" "${flags[@]}"
has_cr auto.log || { cat auto.log; fail "auto on a terminal drew no bar (no carriage return)"; }
! plain_lines auto.log || fail "auto on a terminal printed plain progress lines"

on_tty lines.log "$bin" "${flags[@]}" --progress lines
! has_cr lines.log || { cat -A lines.log; fail "--progress lines on a terminal: carriage returns"; }
plain_lines lines.log || { cat lines.log; fail "--progress lines printed no plain progress line"; }

# mpirun gives its ranks a pseudo-terminal even when its own output goes to a log.
on_tty ompi.log env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0 \
  OMPI_COMM_WORLD_LOCAL_SIZE=1 "$bin" "${flags[@]}"
! has_cr ompi.log || { cat -A ompi.log; fail "auto with OMPI_COMM_WORLD_*: carriage returns"; }
plain_lines ompi.log || { cat ompi.log; fail "auto with OMPI_COMM_WORLD_*: no plain lines"; }
if command -v mpirun >/dev/null; then
  on_tty mpirun.log env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np 1 "$bin" "${flags[@]}"
  ! has_cr mpirun.log || { cat -A mpirun.log; fail "auto under mpirun: carriage returns"; }
  plain_lines mpirun.log || { cat mpirun.log; fail "auto under mpirun: no plain lines"; }
fi

on_tty none.log "$bin" "${flags[@]}" --progress none
! has_cr none.log && ! grep -q '^epoch 1/1 step ' none.log ||
  { cat -A none.log; fail "--progress none printed progress"; }
[ -n "$(summary none.log 1)" ] || { cat none.log; fail "--progress none: no epoch summary"; }

train bar.log --epochs 1 --progress bar  # stdout a file: bar, because it was asked for
has_cr bar.log || { cat bar.log; fail "--progress bar into a file drew no bar"; }
echo "ok: auto, lines, none and bar on a terminal, under mpirun, and into a file"
