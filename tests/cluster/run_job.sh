#!/usr/bin/env bash
# The cluster tests' harness: runs one launch script the way a participant would, shows
# its whole log, and checks exit code and output. Chapter 00 (label `cluster`).
#
#   run_job.sh METHOD SCRIPT CHECK [CHECK ARGS...]
#     METHOD  sbatch  `sbatch SCRIPT` on the local cluster, then wait for the job in the
#                     cluster's jobcomp log (its exit code = the job's)
#             qsub    `qsub SCRIPT`, then the same
#             direct  `bash SCRIPT` (the .mpirun.sh scripts)
#             direct-warned  chapter 08: `bash SCRIPT`, SIGTERM to it once ddp-train trains
#                     (exit 75 expected), then `bash SCRIPT` again to the end
#             sbatch-warned  chapter 08: `sbatch SCRIPT`, and once ddp-train is training,
#                     the time-limit warning that `#SBATCH --signal=B:USR1@T` would send
#                     (scancel --signal=USR1 --batch); the job must save, requeue itself
#                     and finish in its second run (after SLURM's requeue delay, which
#                     is the credential lifetime: 10 s on the local cluster)
#             sbatch-killed  chapter 08: `sbatch SCRIPT`, and once ddp-train is training,
#                     kill -9 of rank DDP_KILL_RANK's process (on its node); every other
#                     rank must be gone within DDP_TIMEOUT + 5 s, none left behind, and
#                     the job must fail (its exit code is expected to be non-zero)
#     CHECK   line PATTERN...          each regex PATTERN matches some line of the log
#             train                    ddp-train's `final:` line is there
#             train-as-ddprun RANKS    ddp-train ran on RANKS ranks, and its header, epoch
#                                      summaries (without timings) and `final:` line
#                                      (without the wall time) equal those of
#                                      `ddprun --nproc-per-node RANKS ddp-train
#                                      $DDP_TRAIN_ARGS --backend tcp`, run here after the job
#                                      (or by an earlier job with the same command and
#                                      programs: Testing/cluster-references/)
#             traced-train-as-ddprun RANKS  the same, and the job traced its training
#                                      (check_trace below): rank 0's timeline summary per
#                                      epoch, and one merged trace file with every rank
#             requeued-train-as-ddprun RANKS  after sbatch-warned or direct-warned: the
#                                      first run stopped and saved (and requeued), the
#                                      second resumed from its checkpoint, and the second
#                                      run's results equal train-as-ddprun's reference
#             sharded-train RANKS PARAMETERS  chapter 09: ddp-train (one `final:` line) on
#                                      RANKS ranks, whose recipe line names DDP_SHARD
#                                      (default fsdp), and every rank's memory table after
#                                      each epoch: parameter, gradient and optimizer-state
#                                      bytes within 2% of the prediction beside them, and
#                                      the sharded ones (optimizer state from zero1 on,
#                                      gradients from zero2, parameters under fsdp) 1/RANKS
#                                      of what a model of PARAMETERS parameters needs;
#                                      with DDP_MEMORY_LIMIT_MB, rank 0 named the budget
#                                      and no rank's peak passed it
#             lost-rank RANKS          after sbatch-killed: each of the other RANKS-1
#                                      ranks' watchdog spoke and named the killed rank
#                                      as "rank R (HOST, pid PID)"
#             hello RANKS LAUNCHER HOST...  rank 0's table: RANKS rows, ranks 0..RANKS-1
#                                      once each, placed in blocks on the HOSTs in order,
#                                      all set up by LAUNCHER; ddp-doctor said OK first
#                                      (HOST "." = this machine's host name)
# Environment: DDP_ROOT (repository), DDP_BUILD (build tree), LOCAL_SLURM_DIR (the
# cluster started by cluster.sh); anything else the job needs (DDP_LAUNCH, DDP_TRAIN_ARGS)
# is exported by ctest and reaches the job with the rest of the environment. The harness
# sets DDP_TRACE_DIR and DDP_CKPT_DIR to its scratch folder: a job's trace files and
# checkpoints go there, not into the repository it is submitted from.
# Exits 0 on success, 77 when SLURM is not installed (ctest: Skipped), 1 otherwise.
set -uo pipefail

method=$1 script=$2 check=$3
what="$*"
shift 3
: "${DDP_ROOT:?}" "${DDP_BUILD:?}"
export DDP_ROOT DDP_BUILD
readonly job_timeout=240   # seconds; below the ctest TIMEOUT, so a hang is reported here

fail() {
  echo "FAIL: $*"
  exit 1
}

# ---- Run the job --------------------------------------------------------------------
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
log=$scratch/job.log
export DDP_TRACE_DIR=$scratch   # /tmp: the local cluster's nodes share it, like a cluster's
export DDP_CKPT_DIR=$scratch    # chapter 08's checkpoints, likewise

if [[ $method != direct* ]]; then
  if ! command -v sbatch >/dev/null || ! command -v slurmctld >/dev/null; then
    echo "SLURM is not installed (tools/install-deps.sh installs it): skipping"
    exit 77
  fi
  if (($(id -u) != 0)); then
    echo "the local cluster runs as root only (cluster.sh skipped it): skipping"
    exit 77
  fi
  if ! unshare --uts --mount --propagation private /bin/true 2>/dev/null; then
    echo "no UTS + mount namespaces here (cluster.sh skipped the cluster): skipping"
    exit 77
  fi
  [[ -r $LOCAL_SLURM_DIR/env.sh ]] ||
    fail "no local cluster in $LOCAL_SLURM_DIR (the fixture test 'cluster: start' starts it)"
  # shellcheck disable=SC1091  # SLURM_CONF and Open MPI's root/loopback variables
  source "$LOCAL_SLURM_DIR/env.sh"
else
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

cd "$DDP_ROOT" || fail "cannot cd to $DDP_ROOT"   # the submit folder, as for a participant
start=$(date +%s)
case $method in
  sbatch | qsub)
    # Both return at once with the job id; the job's end state is in the cluster's jobcomp
    # log, read every 0.2 s (sbatch --wait asks every 2 s: a second lost per job). A name
    # of our own: the job is cancelled by it if it outlives job_timeout, since a hung job
    # would hold both nodes and queue every later cluster test behind it. --output on the
    # command line beats the script's #SBATCH --output.
    if [[ $method == sbatch ]]; then
      job_id=$(sbatch --parsable --job-name="ddp-ctest-$$" --output="$log" "$script" 2>&1) ||
        fail "sbatch failed: $job_id"
    else
      job_id=$(qsub -j oe -o "$log" "$script" 2>&1) || fail "qsub failed: $job_id"
    fi
    echo "$method: job $job_id"
    [[ $job_id =~ ^[0-9]+$ ]] || fail "$method printed '$job_id', not a job id"
    rc=
    for ((waited = 0; waited < job_timeout * 5; ++waited)); do
      record=$(grep "^JobId=$job_id " "$LOCAL_SLURM_DIR/log/jobcomp.log" 2>/dev/null)
      if [[ -n $record ]]; then
        echo "jobcomp: $record"
        exit_code=$(sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1 \2/p' <<<"$record")
        read -r code signal <<<"$exit_code"
        rc=$((signal != 0 ? 128 + signal : code))
        break
      fi
      sleep 0.2
    done
    [[ -n $rc ]] || { scancel "$job_id"; rc=124; }
    ;;
  sbatch-warned)
    job_id=$(sbatch --parsable --job-name="ddp-ctest-$$" --output="$log" "$script" 2>&1) ||
      fail "sbatch failed: $job_id"
    echo "sbatch: job $job_id"
    # wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s; false when time runs out.
    wait_for() {
      local limit=$(($1 * 5))
      shift
      for ((waited = 0; waited < limit; ++waited)); do
        "$@" && return 0
        sleep 0.2
      done
      return 1
    }
    log_has() { grep -Eq "$1" "$log" 2>/dev/null; }
    # The job's records in the jobcomp log: one per run (the first run's, cut short by the
    # requeue, says FAILED or PENDING depending on timing); the run after `runs_before`
    # records is the one that counts.
    records() { grep "^JobId=$job_id " "$LOCAL_SLURM_DIR/log/jobcomp.log" 2>/dev/null; }
    finished() {
      (($(records | wc -l) > runs_before)) && record=$(records | tail -n 1)
    }
    rc=124
    # Training has begun once rank 0 has printed its first progress line (a fifth of the
    # epoch: step 12 of 63). Not a fixed sleep after the recipe: on an idle machine the
    # 60 steps took 4 s, and a warning that came after them found nothing left to stop.
    if wait_for 60 log_has '^(\[rank 0\] )?epoch [0-9]+/[0-9]+ step [0-9]+/'; then
      echo "scancel --signal=USR1 --batch $job_id   (the time-limit warning, now)"
      scancel --signal=USR1 --batch "$job_id"
      if wait_for 90 log_has '^launch: stopped on request \(75\); requeueing job'; then
        # The requeued job waits for SLURM's requeue delay first (LOCAL_SLURM_CRED_EXPIRE,
        # 10 s here; skipping it with StartTime=now gets the run killed: "Job credential
        # revoked"). Under `ctest -j` other tests' jobs wait in the queue too, and a requeued
        # job goes behind them: it is given the top priority, as an admin would.
        second_run() {
          log_has '^launch: run 2 of job' && return 0
          scontrol update JobId="$job_id" Priority=4294967000 >/dev/null 2>&1
          return 1
        }
        if wait_for 240 second_run &&
           wait_for 5 bash -c "grep -q '^JobId=$job_id ' '$LOCAL_SLURM_DIR/log/jobcomp.log'" &&
           runs_before=$(records | wc -l) && wait_for 150 finished; then
          echo "jobcomp: $record"
          code=$(sed -n 's/.* ExitCode=\([0-9]*\):.*/\1/p' <<<"$record")
          rc=${code:-1}
        else
          # Why the requeued run did not start or end: the job's state and reason, the
          # nodes', and what the controller logged about the job.
          echo "---- the requeued job $job_id, as SLURM sees it ----"
          scontrol show job "$job_id" 2>&1 | grep -E 'JobState|Reason|StartTime|Restarts|NodeList'
          sinfo -N -o '%N %T %E' 2>&1
          grep -E "JobId=$job_id\b|job $job_id\b" "$LOCAL_SLURM_DIR/log/slurmctld.log" 2>/dev/null |
            tail -n 15
          records
        fi
      fi
    fi
    ((rc != 124)) || scancel "$job_id"
    ;;
  sbatch-killed)
    : "${DDP_KILL_RANK:?sbatch-killed needs DDP_KILL_RANK}" "${DDP_TIMEOUT:?and DDP_TIMEOUT}"
    job_id=$(sbatch --parsable --job-name="ddp-ctest-$$" --output="$log" "$script" 2>&1) ||
      fail "sbatch failed: $job_id"
    echo "sbatch: job $job_id"
    # This job's ddp-train processes: their --save path is in the scratch folder. The
    # local cluster's nodes share this machine's process table (no pid namespace), so
    # they are seen, and killed, from here; SLURM_PROCID in a process's environment is
    # its rank.
    ranks_alive() { pgrep -x ddp-train -a | grep -F -- "$scratch/" | cut -d' ' -f1; }
    rank_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^SLURM_PROCID=//p'; }
    rc=124 victim=
    for ((waited = 0; waited < 300; ++waited)); do
      if grep -Eq '^(\[rank 0\] )?ddp-train: device ' "$log" 2>/dev/null; then
        sleep 4
        for pid in $(ranks_alive); do
          [[ $(rank_of "$pid") == "$DDP_KILL_RANK" ]] && victim=$pid
        done
        break
      fi
      sleep 0.2
    done
    if [[ -n $victim ]]; then
      echo "kill -9 $victim   (rank $DDP_KILL_RANK, mid-training)"
      kill -9 "$victim"
      killed_at=$(date +%s%N)
      for ((waited = 0; waited < 5 * (DDP_TIMEOUT + 30); ++waited)); do
        [[ -z $(ranks_alive) ]] && break
        sleep 0.2
      done
      gone_ms=$((($(date +%s%N) - killed_at) / 1000000))
      left=$(ranks_alive)
      if [[ -n $left ]]; then
        scancel "$job_id"
        pkill -9 -f -- "$scratch/" 2>/dev/null
        fail "ranks still running $((gone_ms / 1000)) s after the kill (pids: $left)"
      fi
      echo "every rank gone $gone_ms ms after the kill (allowed: DDP_TIMEOUT + 5 s)"
      ((gone_ms <= (DDP_TIMEOUT + 5) * 1000)) ||
        fail "the survivors took $gone_ms ms, more than DDP_TIMEOUT + 5 s"
      records() { grep "^JobId=$job_id " "$LOCAL_SLURM_DIR/log/jobcomp.log" 2>/dev/null; }
      for ((waited = 0; waited < 5 * 60; ++waited)); do
        record=$(records | tail -n 1)
        [[ -n $record ]] && break
        sleep 0.2
      done
      if [[ -n $record ]]; then
        echo "jobcomp: $record"
        code=$(sed -n 's/.* ExitCode=\([0-9]*\):.*/\1/p' <<<"$record")
        rc=${code:-1}
      fi
    else
      echo "no rank $DDP_KILL_RANK of this job was found training"
    fi
    ((rc != 124)) || scancel "$job_id"
    ;;
  direct-warned)
    # Ctrl-C's and PBS's signal, SIGTERM, to the script while ddp-train trains: it must stop,
    # save and exit 75; then the same command again, which must continue to the end.
    bash "$script" >"$log" 2>&1 &
    pid=$!
    log_has() { grep -Eq "$1" "$log" 2>/dev/null; }
    rc=124
    for ((waited = 0; waited < 300 && rc == 124; ++waited)); do
      # Once training is under way (rank 0's first progress line: see sbatch-warned).
      if log_has '^(\[rank 0\] )?epoch [0-9]+/[0-9]+ step [0-9]+/'; then
        echo "kill -TERM $pid   (Ctrl-C, or PBS at the walltime)"
        kill -TERM "$pid"
        rc=0
        timeout 90 tail --pid="$pid" -f /dev/null || rc=124
      fi
      sleep 0.2
    done
    first=0
    wait "$pid" || first=$?
    ((rc == 124)) && kill -9 "$pid" 2>/dev/null
    if ((rc != 124)); then
      rc=$first
      if ((first == 75)); then
        echo "launch: run 2 of job (run_job.sh: the same command again)" >>"$log"
        rc=0
        timeout "$job_timeout" bash "$script" >>"$log" 2>&1 || rc=$?
      fi
    fi
    ;;
  direct)
    timeout "$job_timeout" bash "$script" >"$log" 2>&1
    rc=$?
    ;;
  *) fail "unknown method '$method' (sbatch, sbatch-warned, sbatch-killed, qsub, direct or" \
          "direct-warned)" ;;
esac

echo "---- job log: $method $script (exit code $rc, $(($(date +%s) - start)) s) ----"
cat "$log" 2>/dev/null || echo "(no log written)"
echo "---- end of job log ----"
((rc != 124)) || fail "$script did not finish within ${job_timeout} s"
if [[ $method == *-killed ]]; then
  ((rc != 0)) || fail "$script exited 0 although one of its ranks was killed"
else
  ((rc == 0)) || fail "$script exited with code $rc"
fi

# check_trace RANKS: a job that ran `ddp-train --trace` on RANKS ranks and merged their
# files (launch/ch07_*) printed rank 0's timeline summary once per epoch, and "trace:
# PATH" for a file in DDP_TRACE_DIR that is JSON (jq, where installed, else the parser
# of ddp-trace-merge) and holds one process "rank R" for each rank 0..RANKS-1, with
# backward spans, Reducer bucket launches and all-reduces of its own. The ranks' own
# files are gone (merged).
check_trace() {
  local ranks=$1 epochs trace r event
  local summary='^epoch [0-9]+: compute [0-9]+ ms, communication [0-9]+ ms, exposed [0-9]+ ms, '
  epochs=$(grep -Ec '^epoch [0-9]+/[0-9]+: ' "$log")
  [[ $(grep -Ec "${summary}overlap [0-9]+%$" "$log") == "$epochs" ]] ||
    fail "expected rank 0's 'epoch N: compute .. ms, communication .. ms, exposed .. ms," \
         "overlap ..%' once per epoch ($epochs epochs)"
  trace=$(sed -n 's/^trace: \([^ ]*\.json\)\( .*\)\{0,1\}$/\1/p' "$log")
  [[ -n $trace ]] || fail "the job printed no 'trace: PATH.json' line"
  [[ $trace == "$DDP_TRACE_DIR"/*.json && -s $trace ]] ||
    fail "the merged trace '$trace' is not a file in DDP_TRACE_DIR=$DDP_TRACE_DIR"
  if command -v jq >/dev/null; then
    jq -e '.traceEvents | length > 0' "$trace" >/dev/null || fail "$trace: not JSON with events"
  else
    "$DDP_BUILD/bin/ddp-trace-merge" "$scratch/reparsed.json" "$trace" >/dev/null ||
      fail "$trace: ddp-trace-merge cannot read it back"
  fi
  local processes
  processes=$(grep -c '"name":"process_name"' "$trace")
  ((processes == ranks)) || fail "$trace: expected $ranks processes (ranks), found $processes"
  for ((r = 0; r < ranks; ++r)); do
    grep -qF "\"name\":\"process_name\",\"args\":{\"name\":\"rank $r\"}" "$trace" ||
      fail "$trace: no process 'rank $r'"
    for event in '"cat":"backward"' '"cat":"reducer","name":"bucket' \
                 '"cat":"comm","name":"all_reduce'; do
      grep -q "\"pid\":$r,.*$event" "$trace" ||   # ddp-trace-merge: "pid" before "cat"
        fail "$trace: rank $r has no event with $event"
    done
  done
  ! compgen -G "${trace%.json}.rank*.json" >/dev/null ||
    fail "the ranks' own files are still there: $(echo "${trace%.json}".rank*.json)"
  echo "trace: $trace, $(grep -c '"ph":"X"' "$trace") spans from $ranks ranks"
}

# ---- Check its output ----------------------------------------------------------------
# ddprun prefixes every line of rank R with "[rank R] "; the checks read the lines without.
sed -E 's/^\[rank [0-9]+\] //' "$log" >"$scratch/lines"
log=$scratch/lines
case $check in
  line)
    for pattern in "$@"; do
      grep -Eq -- "$pattern" "$log" || fail "no line of the log matches '$pattern'"
    done
    ;;
  train)
    grep -Eq '^final: test accuracy [0-9.]+% \([0-9]+/[0-9]+ after epoch [0-9]+\)' "$log" ||
      fail "ddp-train's 'final:' line is missing"
    ;;
  requeued-train-as-ddprun)
    # The first run was told to stop, saved and requeued the job; the second resumed from
    # the checkpoint. Only the second run's lines are compared with the reference.
    grep -Eq '^launch: stopped on request' "$log" || fail "the first run did not stop on request"
    grep -Eq '^launch: run 2 of job' "$log" || fail "the job did not run a second time"
    grep -Eq '^resumed from .*ch08_teardown(-[0-9]+)?\.ckpt' "$log" ||
      fail "the second run did not resume from the job's checkpoint"
    sed -n '/^launch: run 2 of job/,$p' "$log" | grep -v '^resumed from ' >"$scratch/second"
    log=$scratch/second
    check=train-as-ddprun
    ;&
  train-as-ddprun | traced-train-as-ddprun)
    # Where the ranks run must not change the arithmetic: the tcp ring adds in an order
    # that depends on the ranks alone, and so does shared memory, which the tcp group
    # takes when every rank is on one host (another order than the ring's). The
    # reference, on this one machine, takes what the job took: the ring for a job across
    # the nodes (DDP_TCP_SHM=0), shared memory for one on this host (a .mpirun.sh run
    # directly), as the job's header says. DDP_TRAIN_ARGS is the job's flags (ctest sets it,
    # so that the script's default and this check cannot drift apart).
    ranks=$1
    # mpirun gives local ranks a pseudo-terminal; ddp-train's --progress auto sees the
    # launcher and prints plain lines, but a job run with --progress bar draws its bar with
    # carriage returns, the epoch summary after it on the same line: split them.
    tr '\r' '\n' <"$log" >"$scratch/split" && log=$scratch/split
    [[ -n ${DDP_TRAIN_ARGS:-} ]] || fail "train-as-ddprun needs the job's flags in DDP_TRAIN_ARGS"
    [[ ${DDP_BACKEND:-tcp} == tcp ]] ||
      fail "train-as-ddprun compares tcp runs (ddprun has no MPI), not DDP_BACKEND=$DDP_BACKEND"
    # ddp-train's summary lines, without what depends on the machine's speed, nor how the
    # backend was chosen (the job: "tcp, auto: ...;", the reference: "tcp, --backend tcp;").
    results() {
      grep -E '^(ddp-train: device |epoch [0-9]+/[0-9]+: |final: )' "$1" |
        sed -E 's/, [0-9.]+ img\/s, [0-9.]+ s$//; s/, wall time [0-9.]+ s$//' |
        sed -E 's/ ranks \(([a-z]+( \(shared memory\))?), [^;)]*; / ranks (\1, /'
    }
    grep -Eq "^ddp-train: device .*, $ranks ranks \(tcp( \(shared memory\))?," "$log" ||
      fail "ddp-train's header does not say '$ranks ranks (tcp, ...)'"
    shm=0
    grep -Eq "^ddp-train: device .*, $ranks ranks \(tcp \(shared memory\)," "$log" && shm=1
    [[ $(grep -c '^final: ' "$log") == 1 ]] || fail "expected one 'final:' line (rank 0's)"
    grep -Eq '^final: test accuracy [0-9.]+% \([0-9]+/[0-9]+ after epoch [0-9]+\)' "$log" ||
      fail "ddp-train's 'final:' line is missing"
    # shellcheck disable=SC2206  # DDP_TRAIN_ARGS is a list of flags
    reference=(env "DDP_TCP_SHM=$shm" "$DDP_BUILD/bin/ddprun" --nproc-per-node "$ranks" --timeout "$job_timeout"
               "$DDP_BUILD/bin/ddp-train" $DDP_TRAIN_ARGS --backend tcp)
    echo "---- reference, here: ${reference[*]//"$DDP_BUILD/"/} ----"
    # A reference depends on nothing but its command and the two programs: the jobs that
    # share them (a chapter's srun, mpirun, ddprun and PBS runs) share one run, kept in the
    # build tree under a checksum of all three.
    key=$( { echo "${reference[*]}"; cksum <"$DDP_BUILD/bin/ddprun"
             cksum <"$DDP_BUILD/bin/ddp-train"; } | cksum | cut -d' ' -f1)
    kept=$DDP_BUILD/Testing/cluster-references/$key.raw
    if [[ -s $kept ]]; then
      echo "(the run of an earlier job with the same command and programs: $kept)"
      cp "$kept" "$scratch/reference.raw"
      ref_rc=0
    else
      "${reference[@]}" >"$scratch/reference.raw" 2>&1
      ref_rc=$?
      if ((ref_rc == 0)); then
        mkdir -p "${kept%/*}" && cp "$scratch/reference.raw" "$kept.$$" && mv "$kept.$$" "$kept"
      fi
    fi
    cat "$scratch/reference.raw"
    echo "---- end of reference (exit code $ref_rc) ----"
    ((ref_rc == 0)) || fail "the reference run exited with code $ref_rc"
    tr '\r' '\n' <"$scratch/reference.raw" | sed -E 's/^\[rank [0-9]+\] //' >"$scratch/reference"
    results "$log" >"$scratch/job.results"
    results "$scratch/reference" >"$scratch/reference.results"
    grep -q '^final: ' "$scratch/reference.results" || fail "the reference printed no 'final:' line"
    diff -u --label "$script" --label "ddprun here" "$scratch/job.results" \
      "$scratch/reference.results" || fail "the job's results differ from ddprun's (diff above)"
    echo "same as ddprun here: $(grep '^final: ' "$scratch/job.results")"
    [[ $check == train-as-ddprun ]] || check_trace "$ranks"
    ;;
  sharded-train)
    # Chapter 09's memory tables, one per rank and epoch. Their lines may come between
    # other ranks' lines (srun and mpirun pass each rank's output on as it comes), so the
    # rows are checked one by one, wherever they are, and counted.
    ranks=$1 parameters=$2 shard=${DDP_SHARD:-fsdp}
    tr '\r' '\n' <"$log" >"$scratch/split" && log=$scratch/split
    [[ $(grep -c '^final: ' "$log") == 1 ]] || fail "expected one 'final:' line (rank 0's)"
    grep -Eq '^final: test accuracy [0-9.]+% \([0-9]+/[0-9]+ after epoch [0-9]+\)' "$log" ||
      fail "ddp-train's 'final:' line is missing"
    recipe=$(grep -E "^ddp-train: device .*, $ranks ranks \(" "$log") ||
      fail "ddp-train's recipe line does not say '$ranks ranks'"
    case $shard in
      none) ! grep -q 'sharded' <<<"$recipe" || fail "--shard none, but: $recipe" ;;
      fsdp) grep -Eq 'parameters and optimizer state sharded in [0-9]+ units \(fsdp\)' \
              <<<"$recipe" || fail "the recipe line does not name fsdp's units: $recipe" ;;
      *) grep -qF "($shard)" <<<"$recipe" || fail "the recipe line does not name $shard: $recipe" ;;
    esac
    epochs=$(grep -Ec '^epoch [0-9]+/[0-9]+: ' "$log")
    ((epochs > 0)) || fail "no epoch summary"
    for ((r = 0; r < ranks; ++r)); do
      n=$(grep -Ec "^memory of rank $r/$ranks \(--shard $shard, (sgd|adamw);" "$log")
      ((n == epochs)) ||
        fail "rank $r printed its memory table $n times, expected once per epoch ($epochs)"
    done
    # Bytes per parameter of each sharded row, the optimizer's from the tables (AdamW: 8,
    # two moments; SGD: 4, the momentum). Rows not sharded: only against their prediction.
    optimizer=$(sed -nE 's/^memory of rank 0\/[0-9]+ \(--shard [a-z0-9]+, ([a-z]+);.*/\1/p' "$log" |
                head -n 1)
    state=4
    [[ $optimizer == adamw ]] && state=8
    declare -A per_parameter=()
    case $shard in
      fsdp) per_parameter[parameters]=4 ;;&
      zero2 | fsdp) per_parameter[gradients]=4 ;;&
      zero1 | zero2 | fsdp) per_parameter["optimizer state"]=$state ;;
    esac
    for category in parameters gradients "optimizer state"; do
      # "  parameters   1.18   8.19   1237196   1237194": live and predicted bytes, the last two.
      rows=$(awk -v c="$category" '$0 ~ "^  " c " +[0-9]" { print $(NF - 1), $NF }' "$log")
      if [[ -z $rows ]] || (($(wc -l <<<"$rows") != ranks * epochs)); then
        fail "expected $((ranks * epochs)) '$category' rows (ranks x epochs), got: $rows"
      fi
      sharded=$(( ${per_parameter[$category]:-0} * parameters / ranks ))
      while read -r live predicted; do
        awk -v l="$live" -v p="$predicted" 'BEGIN { exit !(l >= 0.98 * p && l <= 1.02 * p) }' ||
          fail "$category: $live bytes held, $predicted predicted (more than 2% apart)"
        ((sharded == 0)) ||
          awk -v l="$live" -v s="$sharded" 'BEGIN { exit !(l >= 0.98 * s && l <= 1.02 * s) }' ||
          fail "$category: $live bytes held, not 1/$ranks of the model's ($sharded)"
      done <<<"$rows"
      echo "$category: $(head -n 1 <<<"$rows" | cut -d' ' -f1) bytes held per rank" \
           "${per_parameter[$category]:+(sharded: 1/$ranks of the model is $sharded)}"
    done
    if [[ -n ${DDP_MEMORY_LIMIT_MB:-} ]]; then
      grep -Eq "^memory budget: $DDP_MEMORY_LIMIT_MB MiB of tensors per rank" "$log" ||
        fail "rank 0 did not name the budget DDP_MEMORY_LIMIT_MB=$DDP_MEMORY_LIMIT_MB"
      # "  total   4.98   393.97   5218352": the peak, in MiB, is the third field.
      awk -v b="$DDP_MEMORY_LIMIT_MB" '/^  total +[0-9]/ && $3 > b { bad = 1 } END { exit bad }' \
        "$log" || fail "a rank's peak passed the budget of $DDP_MEMORY_LIMIT_MB MiB"
      echo "every rank within DDP_MEMORY_LIMIT_MB=$DDP_MEMORY_LIMIT_MB:" \
           "$(awk '/^  total +[0-9]/ { print $3 }' "$log" | sort -n | tail -n 1) MiB at most"
    fi
    ;;
  lost-rank)
    # Every survivor's watchdog names the lost rank with its host and pid (the ring's
    # "closed the connection", or the store's process when rank 0 was the one).
    ranks=$1
    [[ $method == *-killed ]] || fail "lost-rank checks a job run with sbatch-killed"
    [[ -n $victim ]] || fail "no rank was killed"
    for ((r = 0; r < ranks; ++r)); do
      ((r == DDP_KILL_RANK)) && continue
      grep -Eq "^ddp watchdog: rank $r/$ranks " "$log" || fail "survivor rank $r's watchdog is silent"
    done
    grep -Eq "rank $DDP_KILL_RANK \(node[0-9]+, pid $victim\)" "$log" ||
      fail "no line names the lost rank as 'rank $DDP_KILL_RANK (nodeN, pid $victim)'"
    ;;
  hello)
    ranks=$1 launcher=$2
    shift 2
    hosts=("${@/#./$(hostname)}")
    per_host=$((ranks / ${#hosts[@]}))
    grep -Eq "^ddp-doctor: OK: all $ranks ranks" "$log" || fail "ddp-doctor did not say OK"
    [[ $(grep -c "^hello from rank [0-9]* of $ranks " "$log") == "$ranks" ]] ||
      fail "expected $ranks 'hello from rank r of $ranks' lines"
    grep -Eq "^hello, cluster: $ranks ranks" "$log" || fail "rank 0's table header is missing"
    # The table rows: rank, local/size, node, host, launcher, pid.
    rows=$(sed -n '/^hello, cluster:/,$p' "$log" |
           awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+\/[0-9]+$/ { print $1, $4, $5 }')
    [[ $(wc -l <<<"$rows") == "$ranks" ]] || fail "expected $ranks table rows, got: $rows"
    for ((r = 0; r < ranks; ++r)); do
      want="$r ${hosts[r / per_host]} $launcher"
      grep -qx "$want" <<<"$rows" || fail "no table row '$want' (rank host launcher)"
    done
    ;;
  *) fail "unknown check '$check'" ;;
esac
echo "PASS: $what"
