#!/usr/bin/env bash
# tools/local-cluster.sh refuses to start, before it starts or writes anything, and says
# why in one line naming the culprit:
#
#   refusals.sh port-in-use   a daemon's port is held by another process (named)
#   refusals.sh symlink       the state folder is a symlink (root would follow it)
#
# Chapter 00 (labels cluster, ch00). Exits 77 (ctest: Skipped) without SLURM or root,
# which local-cluster.sh's own checks need before it gets this far.
set -uo pipefail
: "${DDP_ROOT:?}"

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "SLURM/munge not installed (tools/install-deps.sh installs them): skipping"; exit 77
fi
(($(id -u) == 0)) || { echo "local-cluster.sh runs as root only; not root: skipping"; exit 77; }

work=$(mktemp -d /tmp/lc-refuse.XXXXXX) || exit 1
holder=
cleanup() {  # a failed refusal may have started daemons: stop them before removing their folder
  [[ -n $holder ]] && kill "$holder" 2>/dev/null
  [[ -d $work/c/run ]] && LOCAL_SLURM_DIR=$work/c "$DDP_ROOT/tools/local-cluster.sh" stop >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# expect_refusal PATTERN: local-cluster.sh start (environment set by the caller) exits 1,
# its output matches PATTERN (grep -E), and the state folder was never created.
expect_refusal() {
  local out rc
  out=$("$DDP_ROOT/tools/local-cluster.sh" start 2>&1); rc=$?
  echo "$out"
  ((rc == 1)) || { echo "FAIL: exit $rc, expected 1"; exit 1; }
  grep -qE -- "$1" <<<"$out" || { echo "FAIL: no line matches: $1"; exit 1; }
  [[ ! -d $LOCAL_SLURM_DIR/run ]] || { echo "FAIL: $LOCAL_SLURM_DIR/run was created"; exit 1; }
}

case ${1:-} in
  port-in-use)
    command -v ss >/dev/null || { echo "no ss (iproute2): skipping"; exit 77; }
    # A listener on a loopback port below the ephemeral range (perl-base is in every
    # Debian); it prints the port it holds.
    exec {from_holder}< <(exec perl -MIO::Socket::INET -e '
      $| = 1;
      for (1 .. 200) {
        my $port = 12000 + int(rand(12000));
        my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $port,
                                      Listen => 1) or next;
        print "$port\n"; sleep 60; exit 0;
      }
      exit 1;')
    holder=$!
    read -r -t 10 port <&"$from_holder" || { echo "FAIL: could not hold a port"; exit 1; }
    echo "holding 127.0.0.1:$port (pid $holder)"
    export LOCAL_SLURM_DIR=$work/c LOCAL_SLURM_CTLD_PORT=$port LOCAL_SLURM_SLURMD_PORT=$((port + 1))
    expect_refusal "ERROR: slurmctld port $port is in use"
    expect_refusal "\"perl\",pid=$holder"
    ;;
  symlink)
    mkdir "$work/elsewhere"
    ln -s "$work/elsewhere" "$work/c"
    export LOCAL_SLURM_DIR=$work/c
    expect_refusal "ERROR: $work/c exists but is a symlink"
    [[ -z $(ls -A "$work/elsewhere") ]] || { echo "FAIL: wrote into the link's target"; exit 1; }
    ;;
  *) echo "usage: refusals.sh port-in-use|symlink" >&2; exit 2 ;;
esac
echo "ok"
