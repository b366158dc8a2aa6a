// Launch-environment discovery (see launch_env.hpp): which launcher started this process
// and what its variables say about rank, world and the master. Chapter 05.
//
// In reading order: the environment, and EnvReader, which remembers every variable a
// reader consults so that an error can list them all; the precedence walk; one reader per
// launcher; the job (hosts, id) and the master's address and port; discover_launch_env,
// which strings them together. Each step is one function, so an exercise can swap it.
// This file only reads: it starts nothing and opens no socket.
#include "dist/launch_env.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include "base/error.hpp"

extern char** environ;  // POSIX: the process's environment, "NAME=value" strings

namespace ddp {

// ---- The environment -------------------------------------------------------------------------
Environment current_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::size_t eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

std::string process_label(const std::string& host, std::int64_t pid) {
  return detail::concat(host, ", pid ", pid);
}

std::string process_label() { return process_label(host_name(), ::getpid()); }

int gpu_for_local_rank(int local_rank, int visible_gpus) {
  if (visible_gpus == 1) return 0;
  return local_rank >= 0 && local_rank < visible_gpus ? local_rank : -1;
}

int training_gpu(int local_rank, int visible_gpus) {
  if (visible_gpus <= 0) return -1;
  const int gpu = gpu_for_local_rank(local_rank, visible_gpus);
  return gpu >= 0 ? gpu : local_rank % visible_gpus;
}

const char* to_string(Launcher launcher) {
  switch (launcher) {
    case Launcher::Torchrun:
      return "torchrun";
    case Launcher::Slurm:
      return "slurm";
    case Launcher::OpenMpi:
      return "openmpi";
    case Launcher::Pmi:
      return "pmi";
    case Launcher::Pbs:
      return "pbs";
    case Launcher::None:
      return "none";
  }
  return "?";
}

std::string LaunchEnv::describe() const {
  std::ostringstream os;
  os << "rank " << rank << '/' << world_size << " (local " << local_rank << '/' << local_world_size
     << ", node " << node_rank << ") via " << to_string(launcher) << ", master " << master_addr
     << ':' << master_port;
  if (!job_id.empty()) os << ", job " << job_id;
  if (!hosts.empty()) os << ", " << hosts.size() << (hosts.size() == 1 ? " host" : " hosts");
  return os.str();
}

namespace {


// ---- EnvReader: the variables one launcher sets ----------------------------------------------
// Knows the variables its launcher sets, so that an error shows all of them with their values
// ("looked at: SLURM_PROCID=5 SLURM_NTASKS=4 SLURM_LOCALID=(unset) ..."), whichever one was at
// fault: the fix is often in a neighbour of the variable that failed.
class EnvReader {
 public:
  EnvReader(const Environment& env, std::string launcher, std::vector<std::string> names)
      : env_(env), launcher_(std::move(launcher)), names_(std::move(names)) {}

  // The value of `name`; nullptr when unset.
  const std::string* find(const std::string& name) {
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
    const auto it = env_.find(name);
    return it == env_.end() ? nullptr : &it->second;
  }
  bool has(const std::string& name) { return find(name) != nullptr; }

  // The integer in `name`; nullopt when unset. The whole value must be a decimal integer
  // that fits an int: "4 " or "4(x2)" are errors, not 4.
  std::optional<int> integer(const std::string& name) {
    const std::string* text = find(name);
    if (text == nullptr) return std::nullopt;
    int value = 0;
    const char* end = text->data() + text->size();
    const auto [ptr, ec] = std::from_chars(text->data(), end, value);
    if (ec != std::errc() || ptr != end || text->empty()) {
      fail(name + "='" + *text + "' is not an integer" +
               (ec == std::errc::result_out_of_range ? " (out of range)" : ""),
           "each of these variables holds one decimal number; look for a typo where it is set");
    }
    return value;
  }

  // Like integer(), but an unset variable is an error, with `hint`.
  int required(const std::string& name, std::string_view hint) {
    const std::optional<int> value = integer(name);
    if (!value) fail(name + " is not set", hint);
    return *value;
  }

  // "NAME=value" as the environment has it, or "NAME=(unset)".
  std::string show(const std::string& name) const {
    const auto it = env_.find(name);
    return name + "=" + (it == env_.end() ? "(unset)" : it->second);
  }

  // discover_launch_env on host gpu07, reading slurm variables: <what>
  //   looked at: SLURM_JOB_ID=42 SLURM_PROCID=5 ...
  //   hint: <hint>
  [[noreturn]] void fail(std::string_view what, std::string_view hint) const {
    std::ostringstream os;
    os << "discover_launch_env on host " << host_name() << ", reading " << launcher_
       << " variables: " << what << "\n  looked at:";
    for (const std::string& name : names_) os << ' ' << show(name);
    os << "\n  hint: " << hint;
    DDP_FAIL(os.str());
  }

 private:
  const Environment& env_;
  std::string launcher_;
  std::vector<std::string> names_;
};

// Two variables a launcher sets together (LOCAL_RANK and LOCAL_WORLD_SIZE, say): both, or
// neither (nullopt); one without the other is an error.
std::optional<std::pair<int, int>> read_pair(EnvReader& r, const std::string& a,
                                             const std::string& b) {
  const std::optional<int> x = r.integer(a);
  const std::optional<int> y = r.integer(b);
  if (x.has_value() != y.has_value()) {
    r.fail((x ? a : b) + " is set but " + (x ? b : a) + " is not",
           "launchers set the two together: set both, or neither");
  }
  if (!x) return std::nullopt;
  return std::pair{*x, *y};
}

// The checks every reader's numbers must pass; `vars` names where each number came from.
struct RankVars {
  std::string rank, world, local_rank, local_world;
};

void check_ranks(const LaunchEnv& le, const EnvReader& r, const RankVars& v) {
  if (le.world_size < 1) {
    r.fail(v.world + "=" + std::to_string(le.world_size) + ": a job has at least one process",
           "set it to the number of processes in the job");
  }
  if (le.rank < 0 || le.rank >= le.world_size) {
    r.fail(v.rank + "=" + std::to_string(le.rank) + " is not in [0, " + v.world + "=" +
               std::to_string(le.world_size) + ")",
           "ranks count 0 .. world size - 1; a process from another (larger) job, or a "
           "variable exported by hand in the job script, mixes up the two");
  }
  if (le.local_world_size < 1 || le.local_world_size > le.world_size) {
    r.fail(v.local_world + "=" + std::to_string(le.local_world_size) + " is not in [1, " + v.world +
               "=" + std::to_string(le.world_size) + "]",
           "the processes on one node are at least one and at most the whole job");
  }
  if (le.local_rank < 0 || le.local_rank >= le.local_world_size) {
    r.fail(v.local_rank + "=" + std::to_string(le.local_rank) + " is not in [0, " + v.local_world +
               "=" + std::to_string(le.local_world_size) + ")",
           "local ranks count 0 .. (processes on this node) - 1");
  }
  if (le.node_rank < 0 || le.node_rank >= le.world_size) {
    r.fail("node rank " + std::to_string(le.node_rank) + " is not in [0, " + v.world + "=" +
               std::to_string(le.world_size) + ")",
           "nodes are numbered 0 .. (number of nodes) - 1");
  }
}

// ---- The precedence walk ---------------------------------------------------------------------
// The first launcher whose variables are present wins. Launchers nest: an sbatch script that
// runs mpirun leaves SLURM_PROCID=0 (the batch script's own) in every MPI rank's environment,
// and torchrun under srun sees one SLURM_PROCID per node. The innermost launcher started this
// very process, so it is asked first. PMIx comes after SLURM because srun --mpi=pmix sets
// PMIX_RANK next to SLURM's complete set, and PMIx alone cannot tell the world size.
Launcher detect_launcher(const Environment& env) {
  const auto has = [&env](const char* name) { return env.count(name) != 0; };
  if (has("RANK") || has("WORLD_SIZE")) return Launcher::Torchrun;
  if (has("OMPI_COMM_WORLD_RANK") || has("OMPI_COMM_WORLD_SIZE")) return Launcher::OpenMpi;
  if (has("PMI_RANK") || has("PMI_SIZE")) return Launcher::Pmi;
  if (has("SLURM_PROCID") || has("SLURM_JOB_ID") || has("SLURM_JOBID")) return Launcher::Slurm;
  if (has("PMIX_RANK")) return Launcher::Pmi;
  if (has("PBS_NODEFILE") || has("PBS_JOBID")) return Launcher::Pbs;
  return Launcher::None;
}

// ---- 1. torchrun, ddprun, or variables set by hand ------------------------------------------
// torchrun sets all six. Started by hand on one machine (RANK=1 WORLD_SIZE=2 ./prog), the
// local pair may be left out: then local = global. The node rank, when neither GROUP_RANK
// (torchrun) nor NODE_RANK says it, is rank / local world size: nodes hold blocks of ranks.
LaunchEnv read_torchrun(const Environment& env) {
  EnvReader r(env, "torchrun",
              {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK"});
  constexpr std::string_view kHint =
      "torchrun and ddprun set RANK and WORLD_SIZE together; starting processes by hand, "
      "give each RANK=0..N-1 and all WORLD_SIZE=N";
  LaunchEnv le;
  le.launcher = Launcher::Torchrun;
  le.rank = r.required("RANK", kHint);
  le.world_size = r.required("WORLD_SIZE", kHint);
  const auto local = read_pair(r, "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  le.local_rank = local ? local->first : le.rank;
  le.local_world_size = local ? local->second : le.world_size;
  const std::optional<int> group = r.integer("GROUP_RANK");
  const std::optional<int> node = r.integer("NODE_RANK");
  if (group && node && *group != *node) {
    r.fail("GROUP_RANK=" + std::to_string(*group) + " and NODE_RANK=" + std::to_string(*node) +
               " disagree",
           "both name this node's index; unset the stale one");
  }
  le.node_rank = group ? *group : node ? *node : 0;
  check_ranks(le, r, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"});
  if (!group && !node) le.node_rank = le.rank / le.local_world_size;
  return le;
}

// ---- 2. Open MPI (mpirun) -------------------------------------------------------------------
// OMPI_COMM_WORLD_NODE_RANK is *not* the node's index: it is this process's rank among all
// processes of all jobs on this node. Open MPI does not export the node's index, so it is
// rank / local size, which holds for mpirun's default placement (blocks of ranks per node).
LaunchEnv read_openmpi(const Environment& env) {
  EnvReader r(env, "openmpi",
              {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "OMPI_COMM_WORLD_LOCAL_SIZE"});
  constexpr std::string_view kHint =
      "mpirun (Open MPI >= 1.3) sets all four OMPI_COMM_WORLD_* variables; were they set by "
      "hand, or copied from another job?";
  LaunchEnv le;
  le.launcher = Launcher::OpenMpi;
  le.rank = r.required("OMPI_COMM_WORLD_RANK", kHint);
  le.world_size = r.required("OMPI_COMM_WORLD_SIZE", kHint);
  le.local_rank = r.required("OMPI_COMM_WORLD_LOCAL_RANK", kHint);
  le.local_world_size = r.required("OMPI_COMM_WORLD_LOCAL_SIZE", kHint);
  check_ranks(le, r,
              {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "OMPI_COMM_WORLD_LOCAL_SIZE"});
  le.node_rank = le.rank / le.local_world_size;
  return le;
}

// ---- 3 and 5. PMI and PMIx ------------------------------------------------------------------
// PMI-1/2 launchers (MPICH's and Intel MPI's mpiexec, Cray's PALS) set PMI_RANK and PMI_SIZE;
// the local pair is PMI_LOCAL_RANK/_SIZE (Cray) or MPI_LOCALRANKID/MPI_LOCALNRANKS (MPICH's
// hydra). PMIx puts only PMIX_RANK in the environment; the size lives in the PMIx server.
// With no local pair, local = global (all on one machine), as for torchrun.
LaunchEnv read_pmi(const Environment& env) {
  EnvReader r(env, "pmi",
              {"PMI_RANK", "PMIX_RANK", "PMI_SIZE", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE",
               "MPI_LOCALRANKID", "MPI_LOCALNRANKS"});
  LaunchEnv le;
  le.launcher = Launcher::Pmi;
  const std::optional<int> pmi_rank = r.integer("PMI_RANK");
  const std::optional<int> pmix_rank = r.integer("PMIX_RANK");
  if (pmi_rank && pmix_rank && *pmi_rank != *pmix_rank) {
    r.fail("PMI_RANK=" + std::to_string(*pmi_rank) +
               " and PMIX_RANK=" + std::to_string(*pmix_rank) + " disagree",
           "two launchers are nested; unset the variables of the outer one");
  }
  if (!pmi_rank && !pmix_rank) {
    r.fail("PMI_SIZE is set but neither PMI_RANK nor PMIX_RANK is",
           "PMI launchers set PMI_RANK and PMI_SIZE together");
  }
  le.rank = pmi_rank ? *pmi_rank : *pmix_rank;
  le.world_size = r.required(
      "PMI_SIZE", pmi_rank ? "PMI launchers set PMI_RANK and PMI_SIZE together"
                           : "PMIx keeps the world size in its server, not in the environment: "
                             "export PMI_SIZE=<number of processes>, or launch with srun or "
                             "mpirun, whose variables carry it");
  std::optional<std::pair<int, int>> local = read_pair(r, "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE");
  if (!local) local = read_pair(r, "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
  le.local_rank = local ? local->first : le.rank;
  le.local_world_size = local ? local->second : le.world_size;
  const char* local_rank_var = r.has("PMI_LOCAL_RANK") ? "PMI_LOCAL_RANK" : "MPI_LOCALRANKID";
  const char* local_size_var = r.has("PMI_LOCAL_SIZE") ? "PMI_LOCAL_SIZE" : "MPI_LOCALNRANKS";
  check_ranks(le, r,
              {pmi_rank ? "PMI_RANK" : "PMIX_RANK", "PMI_SIZE", local_rank_var, local_size_var});
  le.node_rank = le.rank / le.local_world_size;
  return le;
}

// ---- 4. SLURM (srun) ------------------------------------------------------------------------
// "2(x3),1" -> {2, 2, 2, 1}: SLURM's tasks per node, one entry per node of the step.
std::vector<int> parse_tasks_per_node(EnvReader& r, const std::string& name) {
  const std::string& text = *r.find(name);
  const auto bad = [&] {
    r.fail(name + "='" + text + "' is not a list like 2(x3),1",
           "srun writes this variable; was it set by hand?");
  };
  std::vector<int> counts;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = std::string_view(text).substr(pos, comma - pos);
    int count = 0;
    int repeat = 1;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), count);
    if (ec != std::errc() || count < 0) bad();
    const std::string_view rest(ptr, static_cast<std::size_t>(item.data() + item.size() - ptr));
    if (!rest.empty()) {  // "(xN)"
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')') bad();
      const auto [p2, e2] = std::from_chars(rest.data() + 2, rest.data() + rest.size() - 1, repeat);
      if (e2 != std::errc() || p2 != rest.data() + rest.size() - 1 || repeat < 1) bad();
    }
    if (counts.size() + static_cast<std::size_t>(repeat) > (std::size_t{1} << 20)) bad();
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), count);
    pos = comma + 1;
  }
  return counts;
}

// srun starts one process per task and tells each its SLURM_PROCID (rank), SLURM_LOCALID and
// SLURM_NODEID; SLURM_STEP_ID says a job step (an srun) is running. The batch script itself
// and an salloc shell carry the job's variables, SLURM_PROCID=0 included, but no step: a
// program started there is one process, and an error when the job asks for more tasks.
LaunchEnv read_slurm(const Environment& env) {
  EnvReader r(env, "slurm",
              {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NTASKS",
               "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE",
               "SLURM_TASKS_PER_NODE", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES"});
  LaunchEnv le;
  le.launcher = Launcher::Slurm;
  const bool in_step = r.has("SLURM_STEP_ID") || r.has("SLURM_STEPID");
  std::optional<int> ntasks = r.integer("SLURM_NTASKS");
  if (!ntasks) ntasks = r.integer("SLURM_NPROCS");  // the older name
  const std::optional<int> per_node = r.integer("SLURM_NTASKS_PER_NODE");
  const std::optional<int> nnodes = r.integer("SLURM_NNODES");

  if (!in_step || !r.has("SLURM_PROCID")) {
    if (ntasks.value_or(1) > 1 || per_node.value_or(1) > 1 || nnodes.value_or(1) > 1) {
      r.fail(
          "the job asks for more than one task, but no srun started this process "
          "(SLURM_STEP_ID or SLURM_PROCID unset: this is the batch script or salloc shell)",
          "start one process per task with `srun ./program ...` inside the job script");
    }
    return le;  // one process: rank 0 of 1
  }

  constexpr std::string_view kHint =
      "srun sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and "
      "SLURM_NODEID for every task it starts";
  le.rank = r.required("SLURM_PROCID", kHint);
  if (!ntasks) r.fail("SLURM_NTASKS is not set", kHint);
  le.world_size = *ntasks;
  const std::optional<int> step_tasks = r.integer("SLURM_STEP_NUM_TASKS");
  if (le.world_size == 1 && (step_tasks.value_or(1) > 1 || per_node.value_or(1) > 1)) {
    const int more = std::max(step_tasks.value_or(1), per_node.value_or(1));
    r.fail("SLURM_NTASKS=1, but " +
               std::string(step_tasks.value_or(1) > 1 ? "SLURM_STEP_NUM_TASKS"
                                                      : "SLURM_NTASKS_PER_NODE") +
               "=" + std::to_string(more) + " says there are more tasks",
           "launched with srun but SLURM_NTASKS=1 and --ntasks-per-node=" + std::to_string(more) +
               "? An `#SBATCH --ntasks=1` (or an SLURM_NTASKS exported by hand) caps the job "
               "at one task: ask for --nodes=N --ntasks-per-node=T and leave --ntasks out; to "
               "run a single task on purpose, unset SLURM_NTASKS_PER_NODE");
  }
  if (step_tasks && *step_tasks != le.world_size) {
    r.fail("SLURM_NTASKS=" + std::to_string(le.world_size) +
               " but SLURM_STEP_NUM_TASKS=" + std::to_string(*step_tasks),
           "srun sets both to the step's task count; one was exported from an outer job");
  }
  le.local_rank = r.required("SLURM_LOCALID", kHint);
  le.node_rank = r.required("SLURM_NODEID", kHint);

  // Tasks on this node: the step's per-node list, else --ntasks-per-node, else all of them
  // on a single node.
  const char* list = r.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                     : r.has("SLURM_TASKS_PER_NODE")    ? "SLURM_TASKS_PER_NODE"
                                                        : nullptr;
  std::string local_world_var = "SLURM_NTASKS_PER_NODE";
  if (list != nullptr) {
    const std::vector<int> counts = parse_tasks_per_node(r, list);
    if (le.node_rank < 0 || static_cast<std::size_t>(le.node_rank) >= counts.size()) {
      r.fail(std::string("SLURM_NODEID=") + std::to_string(le.node_rank) + " but " + list +
                 " lists " + std::to_string(counts.size()) + " nodes",
             "the node id indexes the per-node task list; were they set by different sruns?");
    }
    le.local_world_size = counts[static_cast<std::size_t>(le.node_rank)];
    local_world_var = std::string(list) + "[SLURM_NODEID]";
  } else if (per_node) {
    le.local_world_size = *per_node;
  } else if (nnodes.value_or(1) == 1) {
    le.local_world_size = le.world_size;
    local_world_var = "SLURM_NTASKS";
  } else {
    r.fail("cannot tell how many tasks run on this node",
           "srun sets SLURM_STEP_TASKS_PER_NODE; outside srun, set SLURM_NTASKS_PER_NODE");
  }
  check_ranks(le, r, {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", local_world_var});
  return le;
}

// ---- 6. PBS (qsub; pbsdsh) ------------------------------------------------------------------
// $PBS_NODEFILE lists one host per slot ("n1 n1 n2 n2" for 2 nodes x 2). pbsdsh starts one
// process per slot and gives each PBS_VNODENUM, its line in that file: its rank. The job
// script itself has no PBS_VNODENUM.
std::vector<std::string> read_nodefile(EnvReader& r) {
  const std::string* path = r.find("PBS_NODEFILE");
  if (path == nullptr) {
    r.fail("PBS_JOBID is set but PBS_NODEFILE is not",
           "qsub sets both inside a job; outside one, unset PBS_JOBID");
  }
  std::ifstream in(*path);
  if (!in) {
    r.fail("cannot open PBS_NODEFILE " + *path,
           "the node file lives on the job's first node; is this a job of this machine?");
  }
  std::vector<std::string> slots;
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const std::size_t last = line.find_last_not_of(" \t\r");
    slots.push_back(line.substr(first, last - first + 1));
  }
  if (slots.empty()) r.fail("PBS_NODEFILE " + *path + " lists no hosts", "qsub fills it");
  return slots;
}

LaunchEnv read_pbs(const Environment& env) {
  EnvReader r(env, "pbs", {"PBS_JOBID", "PBS_NODEFILE", "PBS_VNODENUM"});
  const std::vector<std::string> slots = read_nodefile(r);
  LaunchEnv le;
  le.launcher = Launcher::Pbs;
  const std::optional<int> vnode = r.integer("PBS_VNODENUM");
  if (!vnode) {
    if (slots.size() > 1) {
      r.fail("the job has " + std::to_string(slots.size()) +
                 " slots, but this process was not "
                 "started for one (PBS_VNODENUM unset: this is the job script itself)",
             "start one process per slot: mpirun ./program (it reads PBS_NODEFILE), "
             "pbsdsh, or ddprun");
    }
    return le;  // one slot, one process
  }
  le.rank = *vnode;
  le.world_size = static_cast<int>(slots.size());
  le.local_world_size = 1;
  check_ranks(le, r, {"PBS_VNODENUM", "lines of PBS_NODEFILE", "-", "-"});
  // Local rank: earlier slots on my host. Node rank: my host's place among distinct hosts.
  const std::string& mine = slots[static_cast<std::size_t>(le.rank)];
  std::vector<std::string> distinct;
  le.local_rank = 0;
  le.local_world_size = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (std::find(distinct.begin(), distinct.end(), slots[i]) == distinct.end()) {
      distinct.push_back(slots[i]);
    }
    if (slots[i] != mine) continue;
    ++le.local_world_size;
    if (i < static_cast<std::size_t>(le.rank)) ++le.local_rank;
  }
  le.node_rank =
      static_cast<int>(std::find(distinct.begin(), distinct.end(), mine) - distinct.begin());
  return le;
}

// ---- Reading the ranks: one reader per launcher --------------------------------------------
LaunchEnv read_ranks(Launcher launcher, const Environment& env) {
  switch (launcher) {
    case Launcher::Torchrun:
      return read_torchrun(env);
    case Launcher::OpenMpi:
      return read_openmpi(env);
    case Launcher::Pmi:
      return read_pmi(env);
    case Launcher::Slurm:
      return read_slurm(env);
    case Launcher::Pbs:
      return read_pbs(env);
    case Launcher::None:
      return LaunchEnv{};
  }
  DDP_FAIL("read_ranks: unknown launcher ", static_cast<int>(launcher));
}

// ---- The job: its id and hosts, from the scheduler -----------------------------------------
// Whoever started this process, the scheduler knows the job's hosts: SLURM's node list (the
// step's when srun started us, as rank 0 runs on the step's first node), else PBS's node file
// (each host once, in file order).
struct Job {
  std::string id;
  std::vector<std::string> hosts;
};

Job read_job(const Environment& env, Launcher launcher) {
  EnvReader r(env, "job",
              {"SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
               "PBS_JOBID", "PBS_NODEFILE"});
  Job job;
  const std::string* slurm_id = r.find("SLURM_JOB_ID");
  if (slurm_id == nullptr) slurm_id = r.find("SLURM_JOBID");
  std::vector<std::string> lists = {"SLURM_JOB_NODELIST", "SLURM_NODELIST"};
  if (launcher == Launcher::Slurm) lists.insert(lists.begin(), "SLURM_STEP_NODELIST");
  for (const std::string& name : lists) {
    const std::string* list = r.find(name);
    if (list == nullptr) continue;
    try {
      job.hosts = expand_hostlist(*list);
    } catch (const Error& e) {
      r.fail(name + " is not a hostlist:\n" + e.what(),
             "SLURM writes this variable; was it "
             "set by hand?");
    }
    break;
  }
  if (slurm_id != nullptr || !job.hosts.empty()) {
    if (slurm_id != nullptr) job.id = *slurm_id;
    return job;
  }
  if (r.has("PBS_JOBID") || r.has("PBS_NODEFILE")) {
    const std::string* pbs_id = r.find("PBS_JOBID");
    if (pbs_id != nullptr) job.id = *pbs_id;
    if (r.has("PBS_NODEFILE")) {
      for (const std::string& host : read_nodefile(r)) {
        if (std::find(job.hosts.begin(), job.hosts.end(), host) == job.hosts.end()) {
          job.hosts.push_back(host);
        }
      }
    }
  }
  return job;
}

// ---- The master's address and port ---------------------------------------------------------
// Note [A port per job]
// Every rank must name the same port without talking to the others (talking needs the port).
// MASTER_PORT says it when set. Otherwise each rank derives it from what they all share, the
// job id: port = 20000 + (job id mod 10000), the id's leading digits read as a number (PBS
// ids look like "1234.server"; an id without leading digits is hashed, FNV-1a). The range
// 20000-29999 lies below Linux's ephemeral ports (32768-60999), so no outgoing connection
// holds the port by chance, and two jobs sharing a node collide only when their ids agree mod
// 10000. With no job at all the port is 29500, torchrun's default.
constexpr int kDefaultPort = 29500;
constexpr int kJobPortBase = 20000;
constexpr int kJobPortSpan = 10000;

int port_for_job(const std::string& job_id) {
  std::uint64_t number = 0;
  std::size_t digits = 0;
  for (char c : job_id) {
    if (c < '0' || c > '9') break;
    number = (number * 10 + static_cast<std::uint64_t>(c - '0')) % kJobPortSpan;
    ++digits;
  }
  if (digits == 0) {
    std::uint32_t hash = 2166136261u;  // FNV-1a, 32 bits
    for (char c : job_id) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
    number = hash % kJobPortSpan;
  }
  return kJobPortBase + static_cast<int>(number);
}

// MASTER_ADDR, else the job's first host, else this machine (127.0.0.1), which is only right
// when the whole job runs on this one node.
void resolve_master(const Environment& env, const Job& job, LaunchEnv& le) {
  EnvReader r(env, to_string(le.launcher), {"MASTER_ADDR", "MASTER_PORT"});
  if (const std::string* addr = r.find("MASTER_ADDR")) {
    if (addr->empty()) r.fail("MASTER_ADDR is set but empty", "give rank 0's host name or IP");
    le.master_addr = *addr;
  } else if (!job.hosts.empty()) {
    le.master_addr = job.hosts.front();
  } else {
    le.master_addr = "127.0.0.1";
    if (le.local_world_size < le.world_size) {
      r.fail("the job spans several nodes (local world " + std::to_string(le.local_world_size) +
                 " < world " + std::to_string(le.world_size) +
                 ") but nothing names the master's host",
             "export MASTER_ADDR=<rank 0's host> to every process (mpirun -x MASTER_ADDR=...), "
             "or launch with ddprun, which sets it");
    }
  }
  if (const std::optional<int> port = r.integer("MASTER_PORT")) {
    if (*port < 1 || *port > 65535) {
      r.fail("MASTER_PORT=" + std::to_string(*port) + " is not a port (1..65535)",
             "pick a free port above 1024, the same on every rank");
    }
    le.master_port = *port;
  } else {
    le.master_port = job.id.empty() ? kDefaultPort : port_for_job(job.id);
  }
}

}  // namespace

// ---- Putting it together -------------------------------------------------------------------
LaunchEnv discover_launch_env(const Environment& env) {
  const Launcher launcher = detect_launcher(env);
  LaunchEnv le = read_ranks(launcher, env);
  const Job job = read_job(env, launcher);
  le.job_id = job.id;
  le.hosts = job.hosts;
  resolve_master(env, job, le);
  return le;
}

bool in_slurm_batch_shell(const Environment& env) {
  return detect_launcher(env) == Launcher::Slurm && env.count("SLURM_STEP_ID") == 0 &&
         env.count("SLURM_STEPID") == 0;
}

}  // namespace ddp
