// ddprun's command line: the flags, their defaults and their parsing. Chapter 05.
//
//   ddprun --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]
//          [--timeout S] [--max-restarts N] PROGRAM ARGS...
//
// Everything from PROGRAM on belongs to the program, flags included. Nothing here
// starts a process (ddprun.cpp does).
#pragma once

#include <string>
#include <vector>

namespace ddp::run {

struct Options {
  int nproc_per_node = 0;  // required: ranks started on this node
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0 = pick a free one (single node only)
  int timeout_s = 0;    // stop the whole job after this many seconds; 0 = never
  int max_restarts = 0;  // start the ranks again after a failure, this many times at most
  std::vector<std::string> program;  // PROGRAM ARGS...
  bool help = false;
};

// Parses argv (argv[0] is ddprun itself). Throws ddp::Error with one line naming the
// flag and what it expects ("--nproc-per-node expects an integer from 1 to 4096, got 'x'").
Options parse_options(int argc, const char* const* argv);

std::string usage();

}  // namespace ddp::run
