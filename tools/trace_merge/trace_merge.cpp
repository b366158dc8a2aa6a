// Merging trace files (see trace_merge.hpp).
#include "tools/trace_merge/trace_merge.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "base/error.hpp"
#include "tools/trace_merge/json.hpp"

namespace ddp::trace_merge {

namespace {

struct RankTrace {
  std::string path;
  std::vector<int> ranks;   // one, from otherData.rank; several for a file merged before
  bool rewrite_pid = true;  // every event's pid becomes ranks[0]
  std::optional<double> start_unix_us;
  json::Array events;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DDP_CHECK(in.is_open(), "ddp-trace-merge: cannot open ", path,
            " (missing?)\nhint: ddp-train --trace FILE.json with several ranks writes "
            "FILE.rank0.json, FILE.rank1.json, ...");
  std::ostringstream text;
  text << in.rdbuf();
  DDP_CHECK(!in.bad(), "ddp-trace-merge: reading ", path, " failed");
  return text.str();
}

// A whole number from `value`, or `fallback` when absent; an error for anything else.
double number_or(const json::Value* value, double fallback, const std::string& path,
                 const char* what) {
  if (value == nullptr) return fallback;
  DDP_CHECK(value->is_number(), "ddp-trace-merge: ", path, ": ", what, " is not a number");
  return std::get<double>(value->v);
}

bool is_whole_number(double x) {
  return x >= 0 && x == std::floor(x) && x < std::numeric_limits<int>::max();
}

RankTrace read_trace(const std::string& path) {
  const std::string text = read_file(path);
  json::Value root = json::parse(text, path);
  json::Value* events = root.find("traceEvents");
  DDP_CHECK(events != nullptr && events->is_array(), "ddp-trace-merge: ", path,
            " is not a Chrome trace (no \"traceEvents\" array)");
  RankTrace trace;
  trace.path = path;
  trace.events = std::move(std::get<json::Array>(events->v));
  for (const json::Value& e : trace.events) {
    DDP_CHECK(e.is_object(), "ddp-trace-merge: ", path, ": an event is not a JSON object");
  }
  // A file from ddp::trace::write names its rank; another Chrome trace (one merged
  // before): its pids are the ranks.
  const json::Value* other = root.find("otherData");
  const double rank = other ? number_or(other->find("rank"), -1, path, "otherData.rank") : -1;
  if (rank >= 0) {
    DDP_CHECK(is_whole_number(rank), "ddp-trace-merge: ", path, ": otherData.rank is ", rank,
              ", not a rank");
    trace.ranks = {static_cast<int>(rank)};
  } else {
    trace.rewrite_pid = false;
    for (const json::Value& e : trace.events) {
      const double pid = number_or(e.find("pid"), -1, path, "an event's pid");
      if (pid < 0) continue;
      DDP_CHECK(is_whole_number(pid), "ddp-trace-merge: ", path, ": an event's pid is ", pid,
                ", not a rank");
      if (std::find(trace.ranks.begin(), trace.ranks.end(), pid) == trace.ranks.end()) {
        trace.ranks.push_back(static_cast<int>(pid));
      }
    }
    std::sort(trace.ranks.begin(), trace.ranks.end());
  }
  DDP_CHECK(!trace.ranks.empty(), "ddp-trace-merge: ", path,
            " names no rank (otherData.rank or a pid)");
  if (other != nullptr && other->find("start_unix_us") != nullptr) {
    trace.start_unix_us =
        number_or(other->find("start_unix_us"), 0.0, path, "otherData.start_unix_us");
  }
  return trace;
}

json::Value metadata(const char* name, int pid, json::Value args) {
  return json::Value{json::Object{{"ph", json::Value{std::string("M")}},
                                  {"pid", json::Value{static_cast<double>(pid)}},
                                  {"tid", json::Value{0.0}},
                                  {"name", json::Value{std::string(name)}},
                                  {"args", std::move(args)}}};
}

}  // namespace

Merged merge(const std::vector<std::string>& inputs) {
  DDP_CHECK(!inputs.empty(), "ddp-trace-merge: no input files");
  std::vector<RankTrace> traces;
  for (const std::string& path : inputs) {
    traces.push_back(read_trace(path));
    for (std::size_t i = 0; i + 1 < traces.size(); ++i) {
      for (const int rank : traces.back().ranks) {
        const std::vector<int>& seen = traces[i].ranks;
        DDP_CHECK(std::find(seen.begin(), seen.end(), rank) == seen.end(),
                  "ddp-trace-merge: ", traces[i].path, " and ", path, " are both rank ", rank,
                  "\nhint: give each rank's file once");
      }
    }
  }
  // Time 0 is the earliest start(); a file merged before is on its own axis already.
  double origin = std::numeric_limits<double>::max();
  for (const RankTrace& t : traces) {
    if (t.start_unix_us) origin = std::min(origin, *t.start_unix_us);
  }

  Merged merged;
  merged.inputs = inputs;
  for (RankTrace& t : traces) {
    const double shift = t.start_unix_us ? *t.start_unix_us - origin : 0.0;
    for (const int rank : t.ranks) {
      merged.ranks.push_back(rank);
      merged.events.push_back(metadata(
          "process_name", rank,
          json::Value{json::Object{{"name", json::Value{detail::concat("rank ", rank)}}}}));
      merged.events.push_back(metadata(
          "process_sort_index", rank,
          json::Value{json::Object{{"sort_index", json::Value{static_cast<double>(rank)}}}}));
    }
    for (json::Value& e : t.events) {
      const json::Value* name = e.find("name");
      if (name && name->is_string() &&
          (std::get<std::string>(name->v) == "process_name" ||
           std::get<std::string>(name->v) == "process_sort_index")) {
        continue;  // replaced by "rank R" above
      }
      if (t.rewrite_pid) {
        if (json::Value* pid = e.find("pid")) pid->v = static_cast<double>(t.ranks[0]);
      }
      if (json::Value* ts = e.find("ts")) {
        DDP_CHECK(ts->is_number(), "ddp-trace-merge: ", t.path, ": an event's ts is not a number");
        ts->v = std::get<double>(ts->v) + shift;
      }
      const json::Value* dur = e.find("dur");
      DDP_CHECK(dur == nullptr || dur->is_number(), "ddp-trace-merge: ", t.path,
                ": an event's dur is not a number");
      merged.events.push_back(std::move(e));
    }
  }
  return merged;
}

void write_json(const std::string& output, const Merged& merged) {
  std::ofstream out(output, std::ios::trunc);
  DDP_CHECK(out.is_open(), "ddp-trace-merge: cannot open ", output, " for writing");
  out << "{\"traceEvents\":[\n";
  for (std::size_t i = 0; i < merged.events.size(); ++i) {
    out << (i == 0 ? "" : ",\n") << json::dump(merged.events[i]);
  }
  out << "\n],\n\"displayTimeUnit\":\"ms\"}\n";
  out.close();
  DDP_CHECK(out.good(), "ddp-trace-merge: writing ", output, " failed (disk full?)");
}

std::vector<int> merge_files(const std::string& output, const std::vector<std::string>& inputs) {
  const Merged merged = merge(inputs);
  write_json(output, merged);
  return merged.ranks;
}

}  // namespace ddp::trace_merge
