// Command-line parsing for ddprun (see options.hpp).
#include "tools/ddprun/options.hpp"

#include <string_view>

#include "base/error.hpp"
#include "tools/flags.hpp"

namespace ddp::run {

std::string usage() {
  return R"(usage: ddprun --nproc-per-node N [flags] PROGRAM [ARGS...]

Starts N copies of PROGRAM on this node, one per rank, tells each who it is through
the environment (RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR
MASTER_PORT), prefixes every line they print with "[rank R] ", and stops them all
when one fails.

  --nproc-per-node N   ranks on this node (required)
  --nnodes M           nodes in the job (default 1); run ddprun once per node
  --node-rank R        this node's index, 0..M-1 (default 0)
  --master-addr A      where rank 0 listens (default 127.0.0.1)
  --master-port P      its port; default: a free port, picked on a single node only
  --timeout S          stop the job after S seconds, and exit with 124 (default: never);
                       restarts included
  --max-restarts N     when a rank fails, stop the others and start all ranks of this
                       node again, at most N times (default 0); each rank finds the count
                       in DDPRUN_RESTART_COUNT (0 at the first start) and N in
                       DDPRUN_MAX_RESTARTS. Not restarted: a signal sent to ddprun,
                       --timeout, ranks that exit with 75. On several nodes, give every
                       node's ddprun the same N: each restarts only its own ranks
  --help               this text

Signals: SIGINT, SIGTERM, SIGHUP and SIGUSR1 sent to ddprun go to every rank, SIGQUIT as
SIGTERM; the ranks then have 60 s (a second signal is forwarded too) before SIGKILL. If
ddprun is killed outright, the kernel kills the rank processes too.

Exit code:
  0        every rank succeeded
  1        ddprun's own error, or a second ddprun for this node of the job (the
           launcher was started twice): both copies stop, saying so
  75       the ranks stopped on request (each exited with 75, as ddp-train does after
           a stop signal, or died of the SIGTERM ddprun passed on after one did): start
           the job again with --resume to continue
  124      --timeout
  128 + N  ddprun got signal N (and the ranks did not all exit with 75)
  other    the first failing rank's exit code (128 + N when it was killed by signal N),
           after the last restart
  2        bad flags; nothing was started
)";
}

Options parse_options(int argc, const char* const* argv) {
  Options o;
  bool port_given = false, addr_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--") {  // everything after is the program
      ++i;
      break;
    }
    if (!flag.starts_with("-")) break;  // PROGRAM
    if (flag == "--help" || flag == "-h") {
      o.help = true;
      return o;
    }
    // --flag=value and --flag value
    std::string_view value;
    if (const auto eq = flag.find('='); eq != std::string_view::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      DDP_CHECK(i + 1 < argc, flag, " needs a value (see --help)");
      value = argv[++i];
    }
    if (flag == "--nproc-per-node") {
      o.nproc_per_node = parse_int_flag(flag, value, 1, 4096);
    } else if (flag == "--nnodes") {
      o.nnodes = parse_int_flag(flag, value, 1, 65536);
    } else if (flag == "--node-rank") {
      o.node_rank = parse_int_flag(flag, value, 0, 65535);
    } else if (flag == "--master-addr") {
      DDP_CHECK(!value.empty(), "--master-addr expects a host name or address, got ''");
      o.master_addr = value;
      addr_given = true;
    } else if (flag == "--master-port") {
      o.master_port = parse_int_flag(flag, value, 1, 65535);
      port_given = true;
    } else if (flag == "--timeout") {
      o.timeout_s = parse_int_flag(flag, value, 1, 1 << 30);
    } else if (flag == "--max-restarts") {
      o.max_restarts = parse_int_flag(flag, value, 0, 1000);
    } else {
      DDP_FAIL("unknown flag '", flag, "' (see --help)");
    }
  }
  for (; i < argc; ++i) o.program.emplace_back(argv[i]);

  DDP_CHECK(o.nproc_per_node > 0, "--nproc-per-node N is required (see --help)");
  DDP_CHECK(!o.program.empty(), "no PROGRAM to run (see --help)");
  DDP_CHECK(o.node_rank < o.nnodes, "--node-rank ", o.node_rank, " is not below --nnodes ",
            o.nnodes);
  // A port picked here would be known to this node only, and the default address
  // (loopback) would send every other node's ranks to themselves.
  DDP_CHECK(o.nnodes == 1 || (port_given && addr_given), "--nnodes ", o.nnodes,
            " needs --master-addr and --master-port: every node must name the same ones",
            " (node 0's address)");
  return o;
}

}  // namespace ddp::run
