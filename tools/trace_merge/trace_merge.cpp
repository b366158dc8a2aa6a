// Merging trace files (see trace_merge.hpp).
#include "tools/trace_merge/trace_merge.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/error.hpp"
#include "tools/trace_merge/json.hpp"

namespace ddp::trace_merge {

namespace {

struct RankTrace {
  std::string path;
  int rank = 0;
  double start_unix_us = 0.0;
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

RankTrace read_trace(const std::string& path) {
  const std::string text = read_file(path);
  json::Value root = json::parse(text, path);
  json::Value* events = root.find("traceEvents");
  DDP_CHECK(events != nullptr && events->is_array(), "ddp-trace-merge: ", path,
            " is not a Chrome trace (no \"traceEvents\" array)");
  RankTrace trace;
  trace.path = path;
  trace.events = std::move(std::get<json::Array>(events->v));
  const json::Value* other = root.find("otherData");
  // A file from ddp::trace::write names its rank; another Chrome trace: its first pid.
  double rank = -1;
  if (other != nullptr) rank = number_or(other->find("rank"), -1, path, "otherData.rank");
  for (const json::Value& e : trace.events) {
    if (rank >= 0) break;
    rank = number_or(e.find("pid"), -1, path, "an event's pid");
  }
  DDP_CHECK(rank >= 0 && rank == std::floor(rank) && rank < std::numeric_limits<int>::max(),
            "ddp-trace-merge: ", path, " names no rank (otherData.rank or a pid)");
  trace.rank = static_cast<int>(rank);
  trace.start_unix_us =
      other ? number_or(other->find("start_unix_us"), 0.0, path, "otherData.start_unix_us") : 0.0;
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

std::vector<int> merge_files(const std::string& output, const std::vector<std::string>& inputs) {
  DDP_CHECK(!inputs.empty(), "ddp-trace-merge: no input files");
  std::vector<RankTrace> traces;
  for (const std::string& path : inputs) {
    traces.push_back(read_trace(path));
    for (std::size_t i = 0; i + 1 < traces.size(); ++i) {
      DDP_CHECK(traces[i].rank != traces.back().rank, "ddp-trace-merge: ", traces[i].path, " and ",
                path, " are both rank ", traces[i].rank, "\nhint: give each rank's file once");
    }
  }
  double origin = std::numeric_limits<double>::max();  // the earliest start(): time 0
  for (const RankTrace& t : traces) origin = std::min(origin, t.start_unix_us);

  json::Array merged;
  std::vector<int> ranks;
  for (RankTrace& t : traces) {
    ranks.push_back(t.rank);
    const double shift = t.start_unix_us - origin;
    merged.push_back(metadata(
        "process_name", t.rank,
        json::Value{json::Object{{"name", json::Value{detail::concat("rank ", t.rank)}}}}));
    merged.push_back(metadata(
        "process_sort_index", t.rank,
        json::Value{json::Object{{"sort_index", json::Value{static_cast<double>(t.rank)}}}}));
    for (json::Value& e : t.events) {
      DDP_CHECK(e.is_object(), "ddp-trace-merge: ", t.path, ": an event is not a JSON object");
      const json::Value* name = e.find("name");
      if (name && name->is_string() && std::get<std::string>(name->v) == "process_name") {
        continue;  // replaced by "rank R" above
      }
      if (json::Value* pid = e.find("pid")) pid->v = static_cast<double>(t.rank);
      if (json::Value* ts = e.find("ts")) {
        DDP_CHECK(ts->is_number(), "ddp-trace-merge: ", t.path, ": an event's ts is not a number");
        ts->v = std::get<double>(ts->v) + shift;
      }
      merged.push_back(std::move(e));
    }
  }
  std::ofstream out(output, std::ios::trunc);
  DDP_CHECK(out.is_open(), "ddp-trace-merge: cannot open ", output, " for writing");
  out << "{\"traceEvents\":[\n";
  for (std::size_t i = 0; i < merged.size(); ++i) {
    out << (i == 0 ? "" : ",\n") << json::dump(merged[i]);
  }
  out << "\n],\n\"displayTimeUnit\":\"ms\"}\n";
  out.close();
  DDP_CHECK(out.good(), "ddp-trace-merge: writing ", output, " failed (disk full?)");
  return ranks;
}

}  // namespace ddp::trace_merge
