#!/usr/bin/env bash
# =============================================================================
# local-cluster.sh -- a throw-away SLURM cluster on ONE machine: the cluster the
# launch scripts (launch/) are tested on, in CI and on a laptop. Chapter 00.
#
#   tools/local-cluster.sh start    munged + slurmctld + N slurmd ("node1".."nodeN")
#   tools/local-cluster.sh stop     cancel all jobs, stop every daemon this script started
#   tools/local-cluster.sh status   daemons, nodes and queue (exit 0 = all up, 3 = not)
#   tools/local-cluster.sh env      `export ...` lines: eval "$(tools/local-cluster.sh env)"
#   tools/local-cluster.sh restart  stop + start (needed after changing a setting below)
#
# Adapted from a recipe verified on Debian 12 (slurm-wlm 22.05, munge 0.5.15, Open MPI
# 4.1.4, root, no systemd); the pitfalls it handles are noted below, where they are
# handled. Needs: slurm-wlm munge (tools/install-deps.sh);
# optional slurm-wlm-torque (qsub) and openmpi-bin. Not for production: no accounting,
# no cgroups, everything runs as root.
#
# How it works
#   * Everything (config, keys, logs, state, pid files) lives under
#     $LOCAL_SLURM_DIR; nothing in /etc is touched. Clients find the cluster
#     through SLURM_CONF=$LOCAL_SLURM_DIR/etc/slurm.conf.
#   * munged runs as root with its own key and socket; slurm.conf points at
#     that socket with AuthInfo=socket=...
#   * Debian's slurmd is built with multiple-slurmd support, so N slurmd
#     daemons run on one host: `slurmd -N nodeK`, each on its own port.
#   * If possible (root + `unshare`), each slurmd is started in its own UTS +
#     mount namespace: hostname is nodeK, /dev/shm is private, and /etc/hosts
#     is replaced (bind mount, only inside the namespace) by a file that maps
#     nodeK -> 127.0.100.K. Jobs inherit this, so `hostname` prints nodeK,
#     MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1)
#     resolves, and Open MPI's shared-memory (vader) segments in /dev/shm of
#     two logical nodes cannot collide. The network namespace is shared, so
#     all traffic goes over loopback.
#   * TmpFS=$LOCAL_SLURM_DIR/tmp/%n gives each node its own PMIx client dir
#     (without it `srun --mpi=pmix` across two nodes of one host fails with
#     "Cannot create directory /tmp/spmix_appdir_...: File exists").
#
# Settings (environment variables, all optional)
#   LOCAL_SLURM_DIR          state directory (<= 60 chars) [/tmp/ddp-cluster]
#   LOCAL_SLURM_NODES        number of logical nodes      [2]
#   LOCAL_SLURM_CPUS         CPUs per logical node        [2]
#                            (may exceed the real count: config_overrides is set).
#                            2 = the launch scripts' 2 ranks per node: SLURM's qsub
#                            wrapper turns `nodes=2:ppn=2` into `-N2 -n4`, which packs
#                            3+1 onto nodes with more CPUs.
#   LOCAL_SLURM_MEM_MB       RealMemory per node, MiB     [real memory / nodes]
#   LOCAL_SLURM_CTLD_PORT    slurmctld port               [16817]
#   LOCAL_SLURM_SLURMD_PORT  port of node1; nodeK uses +K-1 [17001]
#                            Keep both below the kernel's ephemeral range
#                            (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 on
#                            Linux): any outgoing connection may hold a port in it.
#   LOCAL_SLURM_NAMESPACES   auto | 1 | 0                 [auto]
#   LOCAL_SLURM_MPI_DEFAULT  MpiDefault in slurm.conf (none|pmix|pmi2) [none]
#   LOCAL_SLURM_TIMEOUT      seconds to wait for start/stop steps [30]
#   LOCAL_SLURM_MIN_JOB_AGE  MinJobAge (s); keep small for fast `sbatch --wait` [4]
#   LOCAL_SLURM_FIRST_JOB_ID the first job's id (jobs count up from it) [1]
#   LOCAL_SLURM_CRED_EXPIRE  AuthInfo cred_expire (s): also how long a requeued job
#                            waits before it runs again (SLURM's default: 120) [10]
#   LOCAL_SLURM_GPUS         FAKE GPUs per node (GRES gpu, /dev/null-like devices) so
#                            that --gpus-per-node/--gres=gpu:N jobs are accepted [0]
# =============================================================================
set -euo pipefail

DIR=${LOCAL_SLURM_DIR:-/tmp/ddp-cluster}
NODES=${LOCAL_SLURM_NODES:-2}
CPUS=${LOCAL_SLURM_CPUS:-2}
CTLD_PORT=${LOCAL_SLURM_CTLD_PORT:-16817}
SLURMD_PORT=${LOCAL_SLURM_SLURMD_PORT:-17001}
NS_MODE=${LOCAL_SLURM_NAMESPACES:-auto}
MPI_DEFAULT=${LOCAL_SLURM_MPI_DEFAULT:-none}
TIMEOUT=${LOCAL_SLURM_TIMEOUT:-30}
GPUS=${LOCAL_SLURM_GPUS:-0}

CONF=$DIR/etc/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket
PLUGIN_DIR=$(ls -d /usr/lib/*/slurm-wlm 2>/dev/null | head -n1 || true)  # Debian multiarch path
export SLURM_CONF=$CONF                          # for our own scontrol/sinfo calls

say()  { printf '[local-cluster] %s\n' "$*"; }
warn() { printf '[local-cluster] WARNING: %s\n' "$*" >&2; }
die()  { printf '[local-cluster] ERROR: %s\n' "$*" >&2; exit 1; }
now()  { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

node_names() { local k; for ((k = 1; k <= NODES; k++)); do echo "node$k"; done; }
node_list()  { if ((NODES == 1)); then echo node1; else echo "node[1-$NODES]"; fi; }

# ---------------------------------------------------------------------------
# Process helpers. A daemon counts as running when its pid file names a live,
# non-zombie process whose executable is the expected program. (On some
# machines PID 1 reaps orphans late, so dead daemons linger as zombies.)
# ---------------------------------------------------------------------------
pid_alive() {   # pid_alive PID [EXE-BASENAME]
  local pid=$1 exe=${2:-} state
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/stat ]] || return 1
  state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z && $state != X ]] || return 1
  if [[ -n $exe ]]; then
    # prefix match: Debian installs e.g. /usr/sbin/slurmd -> slurmd-wlm
    [[ $(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)") == "$exe"* ]] || return 1
  fi
}
pidfile_pid() { [[ -s $1 ]] && tr -dc '0-9' <"$1" || true; }
daemon_pid() {  # daemon_pid PIDFILE EXE -> prints pid if running
  local pid; pid=$(pidfile_pid "$1")
  if [[ -n $pid ]] && pid_alive "$pid" "$2"; then echo "$pid"; fi
}
munged_pid()    { daemon_pid "$DIR/munge/munged.pid" munged; }
slurmctld_pid() { daemon_pid "$DIR/run/slurmctld.pid" slurmctld; }
slurmd_pid()    { daemon_pid "$DIR/run/slurmd-$1.pid" slurmd; }

wait_until() {  # wait_until SECONDS CMD... : poll every 0.2 s
  local end; end=$(awk -v t="$1" -v n="$(now)" 'BEGIN { printf "%.1f", n + t }'); shift
  until "$@"; do
    awk -v e="$end" -v n="$(now)" 'BEGIN { exit !(n > e) }' && return 1
    sleep 0.2
  done
}
stop_pid() {    # stop_pid PID EXE NAME : TERM, wait, then KILL
  local pid=$1 exe=$2 name=$3
  pid_alive "$pid" "$exe" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_until 10 eval "! pid_alive $pid $exe"; then
    warn "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_until 5 eval "! pid_alive $pid $exe" || warn "$name (pid $pid) still alive"
  fi
}

# Run a daemon launcher with stdio detached from the caller (a CI step that
# pipes our output must not wait on daemons holding its pipe open).
launch() {      # launch NAME LOGFILE CMD...
  local name=$1 log=$2; shift 2
  if ! "$@" </dev/null >>"$DIR/log/$name.stderr" 2>&1; then
    tail -n 5 "$DIR/log/$name.stderr" "$log" 2>/dev/null | sed 's/^/    /' >&2
    die "$name failed to start; see $DIR/log/$name.stderr and $log"
  fi
}

any_running() {
  [[ -n $(munged_pid) || -n $(slurmctld_pid) ]] && return 0
  local n; for n in $(node_names); do [[ -n $(slurmd_pid "$n") ]] && return 0; done
  return 1
}
all_running() {
  [[ -n $(munged_pid) && -n $(slurmctld_pid) ]] || return 1
  local n; for n in $(node_names); do [[ -n $(slurmd_pid "$n") ]] || return 1; done
}

# ---------------------------------------------------------------------------
preflight() {
  [[ $(id -u) == 0 ]] || die "must run as root (daemons run as root, SlurmUser=root)"
  local b
  for b in munged munge unmunge slurmctld slurmd sinfo scontrol sbatch srun squeue scancel; do
    command -v "$b" >/dev/null ||
      die "'$b' not found: apt-get install -y --no-install-recommends slurm-wlm munge"
  done
  [[ -n $PLUGIN_DIR && -d $PLUGIN_DIR ]] ||
    die "no /usr/lib/<arch>/slurm-wlm plugin dir (not Debian's slurm-wlm?)"
  [[ $NODES =~ ^[1-9][0-9]*$ ]] || die "LOCAL_SLURM_NODES must be a positive integer"
  # Unix socket paths (munge, slurmd, PMIx) are limited to 108 bytes.
  ((${#DIR} <= 60)) ||
    die "LOCAL_SLURM_DIR is too long (${#DIR} > 60 chars); unix socket paths would overflow"
}

# The daemons' ports must be free. Inside the ephemeral range they may not stay free:
# every outgoing connection on the machine takes its local port from there (a CI run
# lost node2 to one), so that is a warning, and a port in use now is an error that
# names who holds it. TIME_WAIT leftovers do not count: the daemons bind with
# SO_REUSEADDR. Needs `ss` (iproute2); without it, slurmd's log says it on failure.
check_ports() {
  local low=32768 high=60999 name port k held
  read -r low high </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  for ((k = 0; k <= NODES; k++)); do
    if ((k == 0)); then name=slurmctld port=$CTLD_PORT
    else name="slurmd node$k" port=$((SLURMD_PORT + k - 1)); fi
    [[ $port =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) ||
      die "$name port '$port' is not a port number (LOCAL_SLURM_CTLD_PORT / LOCAL_SLURM_SLURMD_PORT)"
    ((port < low || port > high)) ||
      warn "$name port $port is inside the ephemeral range $low-$high; a connection may take it"
    command -v ss >/dev/null || continue
    held=$(ss -Htanp exclude time-wait "sport = :$port" 2>/dev/null | head -n 3)
    [[ -z $held ]] || die "$name port $port is in use (set LOCAL_SLURM_CTLD_PORT / LOCAL_SLURM_SLURMD_PORT):
$held"
  done
}

# A daemon that did not come up: its log's last lines say why (a port in use, say).
die_with_log() {  # die_with_log LOGFILE MESSAGE
  tail -n 5 "$1" 2>/dev/null | sed 's/^/    /' >&2
  die "$2; see $1"
}

use_namespaces() {  # decides once; result cached in $DIR/run/ns_mode
  case $NS_MODE in
    0|no|false) return 1 ;;
    1|yes|true)
      command -v unshare >/dev/null || die "LOCAL_SLURM_NAMESPACES=1 but 'unshare' is missing"
      unshare --uts --mount --propagation private /bin/true 2>/dev/null \
        || die "LOCAL_SLURM_NAMESPACES=1 but 'unshare --uts --mount' fails here (no CAP_SYS_ADMIN?)"
      return 0 ;;
    *) command -v unshare >/dev/null &&
         unshare --uts --mount --propagation private /bin/true 2>/dev/null ;;
  esac
}

write_config() {
  local mem hw_mem k addr
  hw_mem=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n1)
  mem=${LOCAL_SLURM_MEM_MB:-$(( ${hw_mem:-2048} / NODES ))}

  # /etc/hosts as seen *inside* the node namespaces: real file + node names.
  { cat /etc/hosts
    echo "# --- added by local-cluster.sh (visible only inside the node namespaces) ---"
    for ((k = 1; k <= NODES; k++)); do echo "127.0.100.$k node$k"; done
  } >"$DIR/etc/hosts"

  # spank_pbs: sets PBS_JOBID, PBS_O_WORKDIR, PBS_JOBNAME, ... in every job.
  if [[ -f $PLUGIN_DIR/spank_pbs.so ]]; then
    echo "optional $PLUGIN_DIR/spank_pbs.so" >"$DIR/etc/plugstack.conf"
  else
    : >"$DIR/etc/plugstack.conf"
  fi

  # Optional fake GPUs: GRES "gpu" backed by dummy char devices, so job scripts
  # asking for GPUs are accepted (Slurm then sets CUDA_VISIBLE_DEVICES).
  local gres_line="" node_gres=""
  rm -f "$DIR/etc/gres.conf"
  if ((GPUS > 0)); then
    mkdir -p "$DIR/fakegpu"
    # slurmd insists on character devices: clones of /dev/null (char 1,3).
    for ((k = 0; k < GPUS; k++)); do
      [[ -c $DIR/fakegpu/nvidia$k ]] ||
        { rm -f "$DIR/fakegpu/nvidia$k"; mknod -m 0666 "$DIR/fakegpu/nvidia$k" c 1 3; }
    done
    { echo "AutoDetect=off"
      if ((GPUS == 1)); then echo "Name=gpu Type=fake File=$DIR/fakegpu/nvidia0"
      else echo "Name=gpu Type=fake File=$DIR/fakegpu/nvidia[0-$((GPUS - 1))]"; fi
    } >"$DIR/etc/gres.conf"
    gres_line="GresTypes=gpu"
    node_gres=" Gres=gpu:fake:$GPUS"
  fi

  cat >"$CONF" <<EOF
# Generated by local-cluster.sh on $(date -u +%FT%TZ). Do not edit: rewritten on start.
ClusterName=local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root

# Authentication: our own munged (own key + socket), no system munge needed.
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a job step's credential lives this long, and a requeued job waits as long
# before its next run (its old credential is revoked until then; a run started sooner is
# killed: "Job credential revoked"). 120 s by default; 10 s is plenty on one machine.
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=${LOCAL_SLURM_CRED_EXPIRE:-10}

# All state under $DIR ; %n = node name (one slurmd per logical node).
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
TmpFS=$DIR/tmp/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
PlugStackConfig=$DIR/etc/plugstack.conf

# No cgroups, no systemd, no accounting daemon.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.log
MpiDefault=$MPI_DEFAULT
MailProg=/bin/true

SchedulerType=sched/backfill
# Start batch jobs right at submit (default batch_sched_delay=3 adds ~2-3 s).
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Allow CPUs= larger than the real core count (logical nodes share the cores).
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
# Small MinJobAge: 'sbatch --wait' polls every 2 s only while 2 < MinJobAge/2,
# otherwise it sleeps 2, 8, 32 s... Finished jobs still stay visible to
# scontrol/squeue for MinJobAge..MinJobAge+60 s; all land in jobcomp.log.
MinJobAge=${LOCAL_SLURM_MIN_JOB_AGE:-4}
# The launch scripts' rendezvous port is 20000 + job id % 10000: two clusters on one
# machine (two build trees' tests) keep apart by numbering their jobs apart.
FirstJobId=${LOCAL_SLURM_FIRST_JOB_ID:-1}
Waittime=0

$gres_line
NodeName=DEFAULT CPUs=$CPUS RealMemory=$mem State=UNKNOWN$node_gres
EOF
  for ((k = 1; k <= NODES; k++)); do
    addr=127.0.100.$k
    # NodeHostname must match the hostname the slurmd sees (namespaced: nodeK).
    local host=node$k
    use_namespaces_cached || host=$(hostname -s)
    echo "NodeName=node$k NodeHostname=$host NodeAddr=$addr Port=$((SLURMD_PORT + k - 1))" >>"$CONF"
  done
  echo "PartitionName=debug Nodes=$(node_list) Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
}

use_namespaces_cached() { [[ $(cat "$DIR/run/ns_mode" 2>/dev/null) == 1 ]]; }

env_lines() {
  echo "# source this (or: eval \"\$(local-cluster.sh env)\") to use the local cluster"
  echo "export SLURM_CONF=$CONF"
  echo "# Open MPI 4.1 as root; all logical nodes share one host, so keep TCP on loopback"
  echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
  echo "export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo"
}
write_env() { env_lines >"$DIR/env.sh"; }

# ---------------------------------------------------------------------------
start_munged() {
  if [[ -n $(munged_pid) ]]; then say "munged already running (pid $(munged_pid))"; return; fi
  if [[ ! -s $DIR/munge/munge.key ]]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$DIR/munge/munge.key"
  fi
  rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  # --force: allow running as root with a key outside /etc/munge
  launch munged "$DIR/log/munged.log" \
    munged --force --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed"
  wait_until "$TIMEOUT" test -S "$MUNGE_SOCKET" || die "munge socket did not appear"
  munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET" >/dev/null \
    || die "munge self-test failed; see $DIR/log/munged.log"
  say "munged started (pid $(munged_pid)), self-test ok"
}

start_slurmctld() {
  # -i: ignore unreadable state files (first start, or after an unclean stop)
  launch slurmctld "$DIR/log/slurmctld.log" slurmctld -i -f "$CONF"
  wait_until "$TIMEOUT" eval 'scontrol ping 2>/dev/null | grep -q UP' \
    || die_with_log "$DIR/log/slurmctld.log" "slurmctld not answering"
  say "slurmctld started (pid $(slurmctld_pid)), port $CTLD_PORT"
}

start_slurmd() {  # start_slurmd nodeK
  local n=$1 k=${1#node}
  mkdir -p "$DIR/spool/$n" "$DIR/tmp/$n"
  if use_namespaces_cached; then
    # New UTS + mount namespace: own hostname, private /dev/shm, own /etc/hosts.
    # Mounts disappear by themselves when the last process in it exits.
    launch "slurmd-$n" "$DIR/log/slurmd-$n.log" \
      unshare --uts --mount --propagation private /bin/sh -c "
        hostname $n &&
        mount -t tmpfs -o mode=1777 shm_$n /dev/shm &&
        mount --bind '$DIR/etc/hosts' /etc/hosts &&
        exec slurmd -N $n -f '$CONF'"
  else
    launch "slurmd-$n" "$DIR/log/slurmd-$n.log" slurmd -N "$n" -f "$CONF"
  fi
  wait_until "$TIMEOUT" eval "[[ -n \$(slurmd_pid $n) ]]" ||
    die_with_log "$DIR/log/slurmd-$n.log" "slurmd $n did not start (no live pid in its pid file)"
  if use_namespaces_cached; then
    readlink "/proc/$(slurmd_pid "$n")/ns/uts" >"$DIR/run/$n.utsns"
  fi
  say "slurmd $n started (pid $(slurmd_pid "$n")), port $((SLURMD_PORT + k - 1))"
}

nodes_idle() {
  [[ $(sinfo -h -N -p debug -o '%N %T' 2>/dev/null | grep -cE ' (idle|mixed|allocated)$') \
     -ge $NODES ]]
}

cmd_start() {
  preflight
  local t0; t0=$(now)
  if all_running; then
    say "already running (SLURM_CONF=$CONF)"; cmd_status || true; return 0
  fi
  if any_running; then
    say "partially running: stopping leftovers first"; cmd_stop
  fi
  # Run as root, this writes configuration that the daemons execute: a folder (in /tmp,
  # by default) that another user created first, or a symlink, must not be trusted.
  if [[ -L $DIR ]] || [[ -e $DIR && ! -O $DIR ]]; then  # -e alone follows a dangling link
    die "$DIR exists but is a symlink or belongs to another user; remove it, or set LOCAL_SLURM_DIR"
  fi
  check_ports
  mkdir -p "$DIR"/{etc,munge,state,spool,tmp,log,run}
  chmod 0755 "$DIR" "$DIR/munge"
  if use_namespaces; then echo 1 >"$DIR/run/ns_mode"; else echo 0 >"$DIR/run/ns_mode"; fi
  write_config
  write_env
  start_munged
  start_slurmctld
  local n; for n in $(node_names); do start_slurmd "$n"; done
  # Nodes left DOWN/DRAINED by an earlier unclean stop: resume them.
  sleep 0.5
  sinfo -h -N -o '%N %T' | awk '$2 ~ /drain|down|fail/ { print $1 }' | while read -r n; do
    scontrol update NodeName="$n" State=RESUME 2>/dev/null || true
  done
  wait_until "$TIMEOUT" nodes_idle ||
    { sinfo -N -l; die "nodes did not become idle; see $DIR/log/"; }
  if use_namespaces_cached; then
    say "mode: one UTS+mount namespace per node (hostname nodeK, private /dev/shm)"
  else
    warn "mode: NO namespaces. Node names do not resolve and >1 Open MPI rank per node"
    warn "      on 2+ nodes crashes in btl/vader; use OMPI_MCA_btl=self,tcp (see launch/README.md)"
  fi
  sinfo -N
  say "up in $(elapsed "$t0") s. Use it with:  export SLURM_CONF=$CONF"
  say "(or: source $DIR/env.sh, which also sets Open MPI root/loopback variables)"
}

cmd_stop() {
  local t0 pid n ns p; t0=$(now)
  # Remember the pids first: daemons delete their pid files while exiting.
  local ctld_pid munge_pid; local -A slurmd_pids=()
  ctld_pid=$(pidfile_pid "$DIR/run/slurmctld.pid")
  munge_pid=$(pidfile_pid "$DIR/munge/munged.pid")
  for n in $(node_names); do slurmd_pids[$n]=$(pidfile_pid "$DIR/run/slurmd-$n.pid"); done

  if [[ -n $(slurmctld_pid) ]]; then
    # Cancel every job so no orphaned job processes are left behind.
    local jobs; jobs=$(squeue -h -o %A 2>/dev/null || true)
    if [[ -n $jobs ]]; then
      say "cancelling jobs: $(echo $jobs)"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      wait_until "$TIMEOUT" eval '[[ -z $(squeue -h -o %A 2>/dev/null) ]]' ||
        warn "jobs still in queue"
    fi
    # Asks slurmctld and every registered slurmd to exit.
    scontrol shutdown >/dev/null 2>&1 || true
  fi
  for n in $(node_names); do
    pid=${slurmd_pids[$n]}
    if [[ -n $pid ]]; then
      wait_until 10 eval "! pid_alive $pid slurmd" || stop_pid "$pid" slurmd "slurmd $n"
    fi
    # Namespaced mode: kill whatever is still inside that node (orphaned
    # slurmstepd / job processes), identified by the node's UTS namespace.
    if [[ -s $DIR/run/$n.utsns ]]; then
      ns=$(cat "$DIR/run/$n.utsns")
      if [[ $ns != "$(readlink /proc/1/ns/uts)" && $ns != "$(readlink /proc/self/ns/uts)" ]]; then
        for p in /proc/[0-9]*; do
          [[ $(readlink "$p/ns/uts" 2>/dev/null) == "$ns" ]] || continue
          pid=${p#/proc/}; pid_alive "$pid" || continue
          warn "killing leftover pid $pid in $n:" \
            "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-80)"
          kill -KILL "$pid" 2>/dev/null || true
        done
      fi
      rm -f "$DIR/run/$n.utsns"
    fi
    rm -f "$DIR/run/slurmd-$n.pid"
  done
  if [[ -n $ctld_pid ]]; then
    wait_until 10 eval "! pid_alive $ctld_pid slurmctld" || stop_pid "$ctld_pid" slurmctld slurmctld
  fi
  rm -f "$DIR/run/slurmctld.pid"
  if [[ -n $munge_pid ]]; then stop_pid "$munge_pid" munged munged; fi
  rm -f "$DIR/munge/munged.pid" "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  if any_running; then die "something is still running; see '$0 status'"; fi
  say "stopped in $(elapsed "$t0") s (state kept in $DIR; rm -rf it for a clean slate)"
}

show_daemon() {  # show_daemon LABEL PID : prints one status line, fails if not running
  if [[ -n $2 ]]; then printf '  %-13s running (pid %s)\n' "$1" "$2"
  else printf '  %-13s NOT running\n' "$1"; return 1; fi
}

cmd_status() {
  local rc=0 n
  say "state dir: $DIR   SLURM_CONF=$CONF"
  show_daemon munged "$(munged_pid)" || rc=3
  show_daemon slurmctld "$(slurmctld_pid)" || rc=3
  for n in $(node_names); do show_daemon "slurmd $n" "$(slurmd_pid "$n")" || rc=3; done
  if [[ -n $(slurmctld_pid) ]]; then
    sinfo -N 2>&1 | sed 's/^/  /'
    squeue 2>&1 | sed 's/^/  /'
  fi
  return $rc
}

cmd_env() { env_lines; }

case ${1:-} in
  start)  cmd_start ;;
  stop)   cmd_stop ;;
  status) cmd_status ;;
  env)    cmd_env ;;
  restart) cmd_stop; cmd_start ;;
  *) sed -n '6,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
