// ddp-doctor's checks: encoding the rank reports, and finding what is wrong with a job.
// Chapter 00 (cluster section). See checks.hpp.
#include "tools/ddp_doctor/checks.hpp"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "base/text.hpp"  // split, to_integer
#include "dist/launch_env.hpp"  // training_gpu

namespace ddp::doctor {

namespace {

int to_int(const std::string& text, const char* what) {
  const std::optional<int> value = to_integer<int>(text);
  DDP_CHECK(value.has_value(), "ddp-doctor: bad ", what, " '", text, "' in a rank's report");
  return *value;
}

}  // namespace

// ---- Reports on the wire ---------------------------------------------------------------
std::string encode(const RankReport& r) {
  std::ostringstream os;
  os << r.rank << '\t' << r.world_size << '\t' << r.local_rank << '\t' << r.local_world_size
     << '\t' << r.host << '\t' << r.launcher << '\t' << r.device << '\t' << r.gpu << '\t'
     << r.connect_ms << '\t' << r.gpu_uuid << '\t' << r.visible_gpus;
  return os.str();
}

RankReport decode(const std::string& line) {
  const std::vector<std::string> f = split(line, '\t');
  DDP_CHECK(f.size() == 11, "ddp-doctor: a rank's report has ", f.size(),
            " fields, expected 11: '", line, "'");
  RankReport r;
  r.rank = to_int(f[0], "rank");
  r.world_size = to_int(f[1], "world size");
  r.local_rank = to_int(f[2], "local rank");
  r.local_world_size = to_int(f[3], "local world size");
  r.host = f[4];
  r.launcher = f[5];
  r.device = f[6];
  r.gpu = f[7];
  r.connect_ms = to_int(f[8], "connect time");
  r.gpu_uuid = f[9];
  r.visible_gpus = to_int(f[10], "visible GPU count");
  return r;
}

std::string physical_gpu(int index, const std::string& slurm_step_gpus,
                         const std::string& cuda_visible_devices) {
  for (const std::string& list : {slurm_step_gpus, cuda_visible_devices}) {
    if (list.empty()) continue;
    const std::vector<std::string> ids = split(list, ',');
    if (index >= 0 && index < static_cast<int>(ids.size())) return ids[index];
  }
  return std::to_string(index);
}

void place_rank(RankReport& report, const std::vector<std::string>& visible_uuids,
                const std::string& slurm_step_gpus, const std::string& cuda_visible_devices) {
  report.visible_gpus = static_cast<int>(visible_uuids.size());
  const int index = training_gpu(report.local_rank, report.visible_gpus);
  if (index < 0) {
    report.device = "cpu";
    return;
  }
  report.device = "cuda:" + std::to_string(index);
  report.gpu = physical_gpu(index, slurm_step_gpus, cuda_visible_devices);
  report.gpu_uuid = visible_uuids[static_cast<std::size_t>(index)];
}

// ---- The checks ------------------------------------------------------------------------
std::vector<std::string> find_problems(const std::vector<RankReport>& reports) {
  std::vector<std::string> problems;
  if (reports.empty()) return problems;
  const RankReport& first = reports.front();

  for (const RankReport& r : reports) {
    if (r.world_size != first.world_size) {
      problems.push_back(detail::concat(
          "rank ", r.rank, " on ", r.host, " has world size ", r.world_size, ", rank ",
          first.rank, " on ", first.host, " has ", first.world_size,
          "\nhint: every rank must be started by the same launcher with the same task count;"
          " look for a leftover WORLD_SIZE/RANK in the job's environment"));
    }
    if (r.launcher != first.launcher) {
      problems.push_back(detail::concat(
          "rank ", r.rank, " on ", r.host, " was set up by ", r.launcher, ", rank ", first.rank,
          " by ", first.launcher,
          "\nhint: a variable of another launcher leaks into some ranks (exported RANK,"
          " OMPI_*, SLURM_*?)"));
    }
  }

  // Per host: local ranks must be distinct, and so must the GPUs.
  std::map<std::string, std::map<int, int>> local_owner;          // host -> local -> rank
  std::map<std::string, std::map<std::string, int>> gpu_owner;    // host -> gpu -> rank
  for (const RankReport& r : reports) {
    auto [it, fresh] = local_owner[r.host].emplace(r.local_rank, r.rank);
    if (!fresh) {
      problems.push_back(detail::concat(
          "ranks ", it->second, " and ", r.rank, " both have local rank ", r.local_rank,
          " on ", r.host,
          "\nhint: the program was started twice per slot: with ddprun/torchrun under srun,"
          " ask for --ntasks-per-node=1 (one launcher per node)"));
    }
    if (r.gpu.empty()) continue;
    // The UUID names the GPU itself; the index lists may not (--gpus-per-task=1).
    const std::string& id = r.gpu_uuid.empty() ? r.gpu : r.gpu_uuid;
    auto [git, gfresh] = gpu_owner[r.host].emplace(id, r.rank);
    if (!gfresh) {
      problems.push_back(detail::concat(
          "ranks ", git->second, " and ", r.rank, " on ", r.host, " would share GPU ", r.gpu,
          r.gpu_uuid.empty() ? "" : " (" + r.gpu_uuid + ")",
          "\nhint: one task per GPU: --gpus-per-task=1, or --gpus-per-node equal to"
          " --ntasks-per-node with each rank on cuda:<local rank>"));
    }
  }
  return problems;
}

BackendChoice auto_backend(const std::vector<RankReport>& reports, bool nccl_built) {
  std::vector<RankGpu> ranks;
  for (const RankReport& r : reports) ranks.push_back({r.host, r.gpu_uuid, r.visible_gpus});
  return choose_backend(ranks, nccl_built);
}

std::string format_table(const std::vector<RankReport>& reports) {
  std::string out;
  char line[320];
  std::snprintf(line, sizeof(line), "%5s  %-6s %-16s %-9s %-8s %-4s %-10s %s\n", "rank", "local",
                "host", "launcher", "device", "gpu", "connect", "gpu uuid");
  out += line;
  for (const RankReport& r : reports) {
    const std::string local = std::to_string(r.local_rank) + "/" +
                              std::to_string(r.local_world_size);
    const std::string connect = std::to_string(r.connect_ms) + " ms";
    std::snprintf(line, sizeof(line), "%5d  %-6s %-16s %-9s %-8s %-4s %-10s %s\n", r.rank,
                  local.c_str(), r.host.c_str(), r.launcher.c_str(), r.device.c_str(),
                  r.gpu.empty() ? "-" : r.gpu.c_str(), connect.c_str(),
                  r.gpu_uuid.empty() ? "-" : r.gpu_uuid.c_str());
    out += line;
  }
  return out;
}

std::string format_findings(const std::vector<RankReport>& reports,
                            const std::vector<std::string>& problems, bool nccl_built) {
  // What ddp-train --backend auto would do with these ranks (dist/backend_choice.hpp).
  const BackendChoice pick = auto_backend(reports, nccl_built);
  std::string out = format_table(reports) + "ddp-doctor: --backend auto would pick " +
                    pick.backend + ": " + pick.reason + "\n";
  for (const std::string& p : problems) out += "ddp-doctor: PROBLEM: " + p + "\n";
  return out;
}

}  // namespace ddp::doctor
