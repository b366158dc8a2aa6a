// Starting the ranks of ddprun (see rank_process.hpp). Chapter 05.
#include "tools/ddprun/rank_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/errno_text.hpp"
#include "base/error.hpp"
#include "tools/ddprun/signal_pipe.hpp"

extern char** environ;

namespace ddp::run {
namespace {

// ddprun's own environment with rank r's variables (rank_environment) over it, as the
// "KEY=VALUE" strings that exec takes.
std::vector<std::string> child_environment(const Options& o, int local_rank, int master_port,
                                           int restart) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (auto& [key, value] : rank_environment(o, local_rank, master_port, restart)) {
    vars[key] = value;
  }
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : vars) env_strings.push_back(key + "=" + value);
  return env_strings;
}

// The child's side of start_rank, from fork() to exec(): a process group of its own,
// stdin from /dev/null, stdout and stderr into the pipes (their write ends `out`, `err`),
// the default signal handlers back, then the signal mask from before the fork
// (`previous`). Only simple system calls here (ddprun has one thread, so a few libc
// calls on the error path are safe too). Never returns: exec, or _exit(127).
[[noreturn]] void become_rank(pid_t parent, const sigset_t& previous, int out, int err,
                              char* const* argv, char* const* envp) {
  setpgid(0, 0);
  // If ddprun itself dies without a chance to stop the ranks (SIGKILL, a ctest
  // timeout), the kernel kills the rank processes too (not what they started
  // themselves) instead of leaving them on the ports and GPUs. Checked after setting
  // it: ddprun may already have died in between.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);  // not left open in the rank
  dup2(null_fd, STDIN_FILENO);
  dup2(out, STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copy
  dup2(err, STDERR_FILENO);
  for (int sig : kForwarded) signal(sig, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);  // an ignored signal would stay ignored across exec
  sigprocmask(SIG_SETMASK, &previous, nullptr);  // a pending SIGTERM now kills it
  execvpe(argv[0], argv, envp);
  const char* why = std::strerror(errno);  // (no std::string between fork and _exit)
  dprintf(STDERR_FILENO, "ddprun: cannot run '%s': %s\n", argv[0], why);
  _exit(127);  // what a shell answers for "command not found"
}

}  // namespace

std::map<std::string, std::string> rank_environment(const Options& o, int local_rank,
                                                    int master_port, int restart) {
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  return {
      {"DDPRUN_RESTART_COUNT", std::to_string(restart)},
      {"DDPRUN_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
  };
}

Rank start_rank(const Options& o, int local_rank, int master_port, int restart) {
  int out[2], err[2];
  DDP_CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0,
            "pipe2: ", errno_text());
  // Our read ends never block: at the end, a pipe that something the rank started in
  // the background still holds open must not keep ddprun waiting (the write ends, the
  // rank's stdout and stderr, stay blocking, as programs expect).
  for (int fd : {out[0], err[0]}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  // Everything the child needs is built before fork(): the child should only make
  // simple system calls between fork and exec (become_rank).
  std::vector<std::string> env_strings = child_environment(o, local_rank, master_port, restart);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o.program;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  // Signals are blocked across fork(): until the child has put back the default
  // handlers, a SIGTERM meant for it would run ddprun's handler in the child and look,
  // to the supervisor, like a SIGTERM sent to ddprun itself.
  sigset_t all, previous;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &previous);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) become_rank(parent, previous, out[1], err[1], argv.data(), envp.data());
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  DDP_CHECK(pid >= 0, "fork: ", errno_text(fork_errno));
  setpgid(pid, pid);  // also here: whichever runs first, the group exists before kill()
  close(out[1]);
  close(err[1]);
  Rank r;
  r.rank = o.node_rank * o.nproc_per_node + local_rank;
  r.pid = pid;
  r.out_fd = out[0];
  r.err_fd = err[0];
  return r;
}

void signal_all(std::vector<Rank>& ranks, int sig) {
  for (const Rank& r : ranks) {
    if (r.pid > 0) kill(-r.pid, sig);  // (kill(-(-1)) would be kill(1): init)
  }
}

}  // namespace ddp::run
