// Test helper for chapter 05: run a function in N forked processes, as N ranks of a job
// on one host, and collect their exit codes. The parent keeps Catch2; a child never
// touches it (it reports through its exit code and stderr).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <vector>

#include "tests/support/test_scale.hpp"

namespace ddp::test {

// Each child runs body(i) for i in [0, n) and exits with its return value (1 when it
// throws, after printing the error). A child still alive after `alarm_s` is killed by
// SIGALRM, so an orphan never outlives a hung test for long (alarm_s times the build's
// time scale: tests/support/test_scale.hpp).
inline std::vector<int> run_forked(int n, const std::function<int(int)>& body,
                                   unsigned alarm_s = 60) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::alarm(alarm_s * time_scale());  // longer in sanitizer builds
      int code = 1;
      try {
        code = body(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[child %d] %s\n", i, e.what());
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

}  // namespace ddp::test
