// ddprun (tools/ddprun/), driven as a user drives it: the real binary, with /bin/sh
// one-liners as the ranks. Chapter 05. Checks the environment each rank sees, the
// "[rank R] " prefixes, exit-code propagation, SIGTERM forwarding, bad flags, and that
// the port it picks stays held.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_scale.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  int code = -1;  // exit code, or 128 + signal
  std::string out;
  std::string err;
  double seconds = 0;
};

// Runs ddprun with `args`, collecting its stdout and stderr until both are closed (by
// ddprun and by every rank). When `signal_after` is given, sends `sig` to ddprun once its
// stdout contains that text `count` times. Anything still running after 30 s is killed,
// and the test fails.
Result run_ddprun(const std::vector<std::string>& args, const std::string& signal_after = "",
                  int count = 1, int sig = SIGTERM) {
  int out[2], err[2];
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err, O_CLOEXEC) == 0);
  std::vector<std::string> all{DDPRUN_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);

  const auto start = Clock::now();
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    for (int fd = 3; fd < 1024; ++fd) close(fd);  // ddprun starts with 0, 1, 2 only
    execv(argv[0], argv.data());
    _exit(126);
  }
  close(out[1]);
  close(err[1]);
  Result result;
  bool signalled = signal_after.empty();
  int fds_open = 2;
  int out_fd = out[0], err_fd = err[0];
  while (fds_open > 0) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    poll(fds, 2, 100);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      std::string& into = i == 0 ? result.out : result.err;
      if (n > 0) {
        into.append(buffer, static_cast<std::size_t>(n));
      } else {
        close(fds[i].fd);
        (i == 0 ? out_fd : err_fd) = -1;
        --fds_open;
      }
    }
    if (!signalled) {
      std::size_t seen = 0;
      for (std::size_t at = 0; (at = result.out.find(signal_after, at)) != std::string::npos;
           ++at) {
        ++seen;
      }
      if (static_cast<int>(seen) >= count) {
        kill(pid, sig);
        signalled = true;
      }
    }
    if (Clock::now() - start > std::chrono::seconds(30)) {
      kill(pid, SIGKILL);
      FAIL("ddprun still running after 30 s; output so far:\n" << result.out << result.err);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The value after "KEY=" on the first line that has it.
std::string value_of(const std::string& text, const std::string& line_start,
                     const std::string& key) {
  const std::size_t line = text.find(line_start);
  if (line == std::string::npos) return "";
  const std::size_t at = text.find(" " + key + "=", line);
  if (at == std::string::npos) return "";
  const std::size_t begin = at + key.size() + 2;
  return text.substr(begin, text.find_first_of(" \n", begin) - begin);
}

const std::string kPrintEnv =
    "echo \"env RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
    "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR "
    "MASTER_PORT=$MASTER_PORT\"";

}  // namespace

// Whether `sleep` with this pid ends within 5 s: gone, or a zombie nobody has reaped
// yet (state Z in /proc/<pid>/stat). One that does not is killed, so it cannot linger.
bool sleep_ends_soon(pid_t pid) {
  auto alive = [pid] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const std::size_t paren = line.rfind(')');  // "pid (comm) state ...": still our sleep?
    return line.find("(sleep)") != std::string::npos && paren + 2 < line.size() &&
           line[paren + 2] != 'Z';
  };
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (alive() && Clock::now() < deadline) usleep(10000);
  if (!alive()) return true;
  kill(pid, SIGKILL);
  return false;
}

TEST_CASE("ddprun gives each rank its environment on one node", "[ch05][ddprun]") {
  const Result r = run_ddprun({"--nproc-per-node", "3", "sh", "-c", kPrintEnv});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string port = value_of(r.out, "[rank 0] env", "MASTER_PORT");
  REQUIRE(!port.empty());
  CHECK(std::stoi(port) > 0);
  CHECK(std::stoi(port) < 65536);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string line = "[rank " + std::to_string(rank) + "] env";
    CHECK(value_of(r.out, line, "RANK") == std::to_string(rank));
    CHECK(value_of(r.out, line, "WORLD_SIZE") == "3");
    CHECK(value_of(r.out, line, "LOCAL_RANK") == std::to_string(rank));
    CHECK(value_of(r.out, line, "LOCAL_WORLD_SIZE") == "3");
    CHECK(value_of(r.out, line, "GROUP_RANK") == "0");
    CHECK(value_of(r.out, line, "MASTER_ADDR") == "127.0.0.1");
    CHECK(value_of(r.out, line, "MASTER_PORT") == port);  // the same port for all
  }
}

TEST_CASE("ddprun numbers ranks across nodes", "[ch05][ddprun]") {
  const Result r = run_ddprun({"--nnodes", "3", "--node-rank", "1", "--master-addr",
                               "10.1.2.3", "--master-port", "29555", "--nproc-per-node", "2",
                               "sh", "-c", kPrintEnv});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  for (int local = 0; local < 2; ++local) {
    const int rank = 2 + local;  // node 1 of nodes with 2 ranks each
    const std::string line = "[rank " + std::to_string(rank) + "] env";
    CHECK(value_of(r.out, line, "RANK") == std::to_string(rank));
    CHECK(value_of(r.out, line, "WORLD_SIZE") == "6");
    CHECK(value_of(r.out, line, "LOCAL_RANK") == std::to_string(local));
    CHECK(value_of(r.out, line, "LOCAL_WORLD_SIZE") == "2");
    CHECK(value_of(r.out, line, "GROUP_RANK") == "1");
    CHECK(value_of(r.out, line, "MASTER_ADDR") == "10.1.2.3");
    CHECK(value_of(r.out, line, "MASTER_PORT") == "29555");
  }
}

TEST_CASE("ddprun prefixes every line, on stdout and stderr, partial lines included",
          "[ch05][ddprun]") {
  const Result r = run_ddprun(
      {"--nproc-per-node", "2", "sh", "-c", "printf 'one\\ntwo\\nno newline'; echo bad >&2"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  for (const std::string rank : {"[rank 0] ", "[rank 1] "}) {
    CHECK(contains(r.out, rank + "one\n"));
    CHECK(contains(r.out, rank + "two\n"));
    CHECK(contains(r.out, rank + "no newline\n"));
    CHECK(contains(r.err, rank + "bad\n"));
    CHECK(!contains(r.out, rank + "bad"));
  }
  // Every line has a prefix (and ends in a newline, ddprun adds the missing ones).
  REQUIRE(!r.out.empty());
  REQUIRE(r.out.back() == '\n');
  for (std::size_t start = 0; start < r.out.size(); start = r.out.find('\n', start) + 1) {
    CHECK(r.out.compare(start, 6, "[rank ") == 0);
  }
}

TEST_CASE("ddprun does not wait for a background process that keeps the rank's output open",
          "[ch05][ddprun]") {
  // The rank exits at once, leaving a silent child that holds its stdout and stderr
  // for 20 s: ddprun forwards what was written and ends without waiting for it.
  const Result r = run_ddprun({"--nproc-per-node", "1", "sh", "-c", "sleep 20 & echo started"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "[rank 0] started\n"));
  CHECK(r.seconds < 10);  // a hang bound, not a speed check: it used to take the 20 s
}

TEST_CASE("ddprun keeps a last unfinished line when a background process holds the pipe",
          "[ch05][ddprun]") {
  const Result r = run_ddprun(
      {"--nproc-per-node", "1", "sh", "-c", "echo full; printf 'no newline'; sleep 3 & exit 0"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "[rank 0] full\n[rank 0] no newline\n"));
}

TEST_CASE("ddprun exits with the first failing rank's code and stops the others",
          "[ch05][ddprun]") {
  // Ranks 0 and 2 would sleep for 60 s; rank 1 exits with 3 at once. The sleepers say
  // when SIGTERM reaches them (not SIGKILL after the grace period: that cannot be
  // trapped). `sleep & wait`: sh runs a trap only between commands.
  const Result r = run_ddprun(
      {"--nproc-per-node", "3", "sh", "-c",
       "if [ \"$RANK\" = 1 ]; then exit 3; fi; "
       "trap 'echo stopped by TERM; exit 0' TERM; sleep 60 & wait $!"});
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  CHECK(contains(r.err, "rank 1 failed first (exit code 3)"));
  CHECK(contains(r.out, "[rank 0] stopped by TERM"));
  CHECK(contains(r.out, "[rank 2] stopped by TERM"));
}

TEST_CASE("ddprun reports a rank killed by a signal as 128 + signal", "[ch05][ddprun]") {
  const Result r = run_ddprun({"--nproc-per-node", "2", "sh", "-c",
                               "if [ \"$RANK\" = 0 ]; then kill -KILL $$; fi; sleep 60"});
  INFO(r.out << r.err);
  CHECK(r.code == 128 + SIGKILL);
  CHECK(contains(r.err, "rank 0 failed first (killed by signal 9"));
}

TEST_CASE("ddprun forwards SIGTERM and SIGHUP to every rank", "[ch05][ddprun]") {
  // Each rank reports the signal it receives and exits cleanly. (The ranks have process
  // groups of their own: a closed terminal's SIGHUP reaches them only through ddprun.)
  for (const auto& [sig, name] : {std::pair{SIGTERM, "TERM"}, std::pair{SIGHUP, "HUP"}}) {
    const std::string trap = std::string("trap 'echo got ") + name + "; exit 0' " + name;
    const Result r = run_ddprun(
        {"--nproc-per-node", "2", "sh", "-c", trap + "; echo ready; while :; do sleep 0.1; done"},
        "ready", 2, sig);
    INFO(name << "\n" << r.out << r.err);
    CHECK(contains(r.out, std::string("[rank 0] got ") + name));
    CHECK(contains(r.out, std::string("[rank 1] got ") + name));
    CHECK(r.code == 128 + sig);
  }
}

TEST_CASE("a rank that stops on request (75) alone makes ddprun stop the others",
          "[ch05][ddprun]") {
  // Rank 0 stops on its own, as a rank signalled alone while the ranks still meet does
  // (ddp-train, chapter 08); rank 1 would wait for it for ever. ddprun passes SIGTERM on.
  const auto began = Clock::now();
  const Result r = run_ddprun(
      {"--nproc-per-node", "2", "sh", "-c",
       "if [ \"$RANK\" = 0 ]; then sleep 0.3; exit 75; fi; "
       "trap 'echo got TERM; exit 75' TERM; while :; do sleep 0.1; done"});
  const double seconds =
      std::chrono::duration<double>(Clock::now() - began).count();
  INFO(r.out << r.err);
  CHECK(r.code == 75);
  CHECK(contains(r.err, "rank 0 stopped on request (exit code 75); passing SIGTERM on"));
  CHECK(contains(r.out, "[rank 1] got TERM"));
  CHECK(seconds < 10 * ddp::test::time_scale());  // not kStopGracePeriod's 60 s
}

TEST_CASE("a rank that dies of the SIGTERM ddprun passed on after a 75 has not failed",
          "[ch05][ddprun]") {
  // Rank 1 has no handler: the SIGTERM ends it. That is the stop it was asked for, not a
  // failure to blame (or, with --max-restarts, to restart).
  const Result r = run_ddprun({"--nproc-per-node", "2", "--max-restarts", "1", "sh", "-c",
                               "if [ \"$RANK\" = 0 ]; then exit 75; fi; exec sleep 30"});
  INFO(r.out << r.err);
  CHECK(r.code == 75);
  CHECK_FALSE(contains(r.err, "failed"));
  CHECK_FALSE(contains(r.err, "restart"));
}

TEST_CASE("ranks do not outlive a ddprun that is killed outright", "[ch05][ddprun]") {
  // SIGKILL gives ddprun no chance to stop the ranks; PR_SET_PDEATHSIG makes the kernel
  // kill them. Each rank prints its pid, then sleeps as `sleep` (exec keeps the pid).
  const Result r = run_ddprun(
      {"--nproc-per-node", "2", "sh", "-c", "echo ready $$; exec sleep 20"}, "ready", 2, SIGKILL);
  INFO(r.out << r.err);
  CHECK(r.code == 128 + SIGKILL);
  for (const std::string rank : {"[rank 0] ready ", "[rank 1] ready "}) {
    const std::size_t at = r.out.find(rank);
    REQUIRE(at != std::string::npos);
    const pid_t pid = std::stoi(r.out.substr(at + rank.size()));
    INFO(rank << "pid " << pid);
    CHECK(sleep_ends_soon(pid));
  }
}

TEST_CASE("what a failed rank started does not outlive the job", "[ch05][ddprun]") {
  // Rank 0 starts a background sleep, names it, and fails; its process group (signalled
  // even though rank 0 itself is already reaped) takes the sleep with it.
  const Result r = run_ddprun(
      {"--nproc-per-node", "2", "sh", "-c",
       "if [ \"$RANK\" = 0 ]; then sleep 30 & echo child $!; sleep 0.3; exit 3; fi; "
       "exec sleep 30"});
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  const std::size_t at = r.out.find("[rank 0] child ");
  REQUIRE(at != std::string::npos);
  CHECK(sleep_ends_soon(std::stoi(r.out.substr(at + 15))));
}

TEST_CASE("a rank inherits no file descriptor of ddprun's but 0, 1 and 2", "[ch05][ddprun]") {
  // run_ddprun starts ddprun with 0, 1 and 2 only; `test -e` opens nothing itself.
  const Result r = run_ddprun(
      {"--nproc-per-node", "1", "sh", "-c",
       "fd=3; while [ $fd -lt 64 ]; do [ -e /proc/$$/fd/$fd ] && echo open fd $fd; "
       "fd=$((fd + 1)); done; echo checked"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "[rank 0] checked"));
  CHECK_FALSE(contains(r.out, "open fd"));
}

TEST_CASE("ddprun stops a job that runs past --timeout", "[ch05][ddprun]") {
  const Result r = run_ddprun({"--timeout", "1", "--nproc-per-node", "2", "sleep", "60"});
  INFO(r.out << r.err);
  CHECK(r.code == 124);
  CHECK(contains(r.err, "--timeout"));
}

TEST_CASE("ddprun rejects bad flags with exit code 2", "[ch05][ddprun]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--nproc-per-node", "0", "true"}, "--nproc-per-node expects an integer"},
      {{"--nproc-per-node", "two", "true"}, "--nproc-per-node expects an integer"},
      {{"--bogus", "1", "true"}, "unknown flag '--bogus'"},
      {{"--nproc-per-node", "2"}, "no PROGRAM"},
      {{"true"}, "--nproc-per-node N is required"},
      {{"--nproc-per-node", "1", "--nnodes", "2", "true"},
       "needs --master-addr and --master-port"},
      {{"--nproc-per-node", "1", "--nnodes", "2", "--master-port", "29500", "true"},
       "needs --master-addr and --master-port"},  // not loopback for every node
      {{"--nproc-per-node", "1", "--nnodes", "2", "--master-addr", "n1", "true"},
       "needs --master-addr and --master-port"},
      {{"--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "2", "--master-port", "1",
        "true"},
       "--node-rank 2 is not below --nnodes 2"},
      {{"--nproc-per-node"}, "needs a value"},
  };
  for (const Case& c : cases) {
    const Result r = run_ddprun(c.args);
    INFO(c.message << "\n" << r.out << r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, c.message));
  }
  const Result help = run_ddprun({"--help"});
  CHECK(help.code == 0);
  CHECK(contains(help.out, "usage: ddprun --nproc-per-node N"));
}

TEST_CASE("ddprun passes the program's own flags through and reports exec failures",
          "[ch05][ddprun]") {
  // --nproc-per-node after PROGRAM belongs to the program.
  const Result echo = run_ddprun({"--nproc-per-node=1", "echo", "--nproc-per-node", "7"});
  CHECK(echo.code == 0);
  CHECK(echo.out == "[rank 0] --nproc-per-node 7\n");
  const Result missing = run_ddprun({"--nproc-per-node", "1", "/nonexistent/program"});
  CHECK(missing.code == 127);
  CHECK(contains(missing.err, "[rank 0] ddprun: cannot run '/nonexistent/program'"));
}

TEST_CASE("ddprun holds the port it picked until the job ends", "[ch05][ddprun]") {
  // ch05_fault init-port-taken first binds MASTER_PORT itself, without SO_REUSEADDR, as
  // any other program would: refused while ddprun holds the port. (Rank 0's store, which
  // sets SO_REUSEADDR, binds it in every other multi-rank test.) Without the hold, the
  // bind succeeds and the store then fails with "Address already in use" instead.
  const Result r = run_ddprun(
      {"--nproc-per-node", "1", CH05_FAULT_PATH, "init-port-taken", "--timeout-s", "3"});
  CHECK(r.code == 3);
  CHECK(contains(r.out + r.err, "test listener: cannot bind 127.0.0.1:"));
  CHECK_FALSE(contains(r.out + r.err, "Address already in use"));
}
