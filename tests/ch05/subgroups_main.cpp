// ch05_subgroups: new_group (dist/new_group.hpp) at world size 4, checked across real
// processes against a reference computed from the parent's ranks. Chapter 05.
//
//   ddprun --nproc-per-node 4 build/<dir>/tests/ch05_subgroups --backend tcp
//   mpirun -np 4 --oversubscribe build/<dir>/tests/ch05_subgroups --backend mpi
//
// Groups: the pairs [0, 1] and [2, 3], odd/even [0, 2] and [1, 3], one rank [2], and the
// whole world. Each member runs all_reduce (sum, avg, max; float32 and int64), broadcast
// from every sub-group rank, all_gather, reduce_scatter and barrier on its groups; what it
// expects is written with the parent's ranks (rank j of group R is the parent's R[j]),
// never with another collective. Besides: collectives of two sub-groups queued at once in
// opposite orders, a pair that finishes while the other pair sits in a parent collective,
// the stand-in's errors, the whole world's results bit for bit the parent's, bad lists
// refused on every rank, and (tcp) sub-groups' "done" keys under their own prefix.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.hpp"
#include "base/who.hpp"
#include "dist/init.hpp"
#include "dist/new_group.hpp"
#include "dist/process_group.hpp"
#include "tensor/tensor.hpp"

namespace {

using ddp::DType;
using ddp::ProcessGroup;
using ddp::ReduceOp;
using ddp::Tensor;

// What parent rank g puts at index i: which rank holds the maximum changes with i, and a
// value from another index or rank differs (as in collectives_main.cpp's pattern).
// Integers below 2^24: exact in float32 in any order of summation.
std::int64_t value(int g, std::int64_t i) { return ((g + i) % 4) * 100 + g + 10 * (i % 7); }

template <typename T>
Tensor filled(std::int64_t n, int g, std::int64_t first = 0) {
  Tensor t = ddp::empty({n}, ddp::TensorOptions{ddp::dtype_of<T>()});
  for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>(value(g, first + i));
  return t;
}

// The reduction over the parent's ranks `ranks` of value(g, i).
double reference(ReduceOp op, const std::vector<int>& ranks, std::int64_t i) {
  std::int64_t sum = 0, hi = INT64_MIN;
  for (const int g : ranks) {
    sum += value(g, i);
    hi = std::max(hi, value(g, i));
  }
  if (op == ReduceOp::Max) return static_cast<double>(hi);
  if (op == ReduceOp::Avg) return static_cast<double>(sum) / static_cast<double>(ranks.size());
  return static_cast<double>(sum);
}

class Checks {
 public:
  Checks(ProcessGroup& world, std::chrono::milliseconds timeout)
      : world_(world), timeout_(timeout) {}

  // Compares t[i] with want(i) for every i (within 1e-6 relative for float averages).
  template <typename T, typename Want>
  void expect(const Tensor& t, const std::string& name, Want&& want) {
    const T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const double w = want(i);
      const bool same = std::is_same_v<T, float>
                            ? std::abs(static_cast<double>(p[i]) - w) <= 1e-6 * std::abs(w)
                            : static_cast<double>(p[i]) == w;
      DDP_CHECK(same, world_.who(), ": ", name, ": index ", i, " of ", t.numel(), ": got ", p[i],
                ", expected ", w);
    }
    count(name);
  }

  void count(const std::string& name) {
    ++checks_;
    if (verbose_) std::printf("rank %d: ok  %s\n", world_.rank(), name.c_str());
  }

  // Every collective on `group` (made from `ranks`), n elements a rank.
  template <typename T>
  void collectives(ProcessGroup& group, const std::vector<int>& ranks, std::int64_t n) {
    const int g = world_.rank();
    const int k = static_cast<int>(ranks.size());
    const std::string tag = ddp::list_ranks(ranks) + " " +
                            std::string(ddp::dtype_name(ddp::dtype_of<T>())) +
                            " n=" + std::to_string(n) + " ";
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      Tensor t = filled<T>(n, g);
      group.all_reduce(t, op)->wait(timeout_);
      expect<T>(t, tag + "all_reduce " + ddp::to_string(op), [&](std::int64_t i) {
        const double want = reference(op, ranks, i);
        return std::is_same_v<T, float> ? want
                                        : static_cast<double>(static_cast<std::int64_t>(want));
      });
    }
    for (int root = 0; root < k; ++root) {  // root: a rank of the sub-group
      Tensor t = filled<T>(n, g);
      group.broadcast(t, root)->wait(timeout_);
      expect<T>(t, tag + "broadcast from group rank " + std::to_string(root),
                [&](std::int64_t i) { return static_cast<double>(value(ranks[root], i)); });
    }
    {
      Tensor out = ddp::full({k * n}, -7.0, ddp::TensorOptions{ddp::dtype_of<T>()});
      group.all_gather(out, filled<T>(n, g))->wait(timeout_);
      expect<T>(out, tag + "all_gather",
                [&](std::int64_t j) { return static_cast<double>(value(ranks[j / n], j % n)); });
    }
    {
      Tensor out = ddp::full({n}, -7.0, ddp::TensorOptions{ddp::dtype_of<T>()});
      group.reduce_scatter(out, filled<T>(k * n, g), ReduceOp::Sum)->wait(timeout_);
      const std::int64_t first = group.rank() * n;
      expect<T>(out, tag + "reduce_scatter sum",
                [&](std::int64_t i) { return reference(ReduceOp::Sum, ranks, first + i); });
    }
    group.barrier()->wait(timeout_);
    count(tag + "barrier");
  }

  // Every collective of a stand-in throws, naming this rank and the group.
  void refused(ProcessGroup& group, const std::vector<int>& ranks) {
    DDP_CHECK(group.rank() == -1 && group.size() == static_cast<int>(ranks.size()) &&
                  group.in_parent().ranks == ranks,
              world_.who(), ": the stand-in for ", ddp::list_ranks(ranks), " says rank ",
              group.rank(), " of ", group.size());
    Tensor t = filled<float>(4, 0);
    Tensor out = filled<float>(4 * static_cast<std::int64_t>(ranks.size()), 0);
    const std::string expected = ddp::detail::concat(
        "rank ", world_.rank(), " is not a member of group ", ddp::list_ranks(ranks));
    auto expect_refusal = [&](const char* collective, auto&& call) {
      try {
        call();
      } catch (const ddp::Error& e) {
        const std::string what = e.what();
        DDP_CHECK(
            what.find(expected) != std::string::npos && what.find(collective) != std::string::npos,
            world_.who(), ": ", collective, " on a stand-in said:\n", what,
            "\nexpected it to name the collective and say '", expected, "'");
        return;
      }
      DDP_FAIL(world_.who(), ": ", collective, " on the stand-in for ", ddp::list_ranks(ranks),
               " did not throw");
    };
    expect_refusal("all_reduce", [&] { group.all_reduce(t); });
    expect_refusal("broadcast", [&] { group.broadcast(t, 0); });
    expect_refusal("all_gather", [&] { group.all_gather(out, t); });
    expect_refusal("reduce_scatter", [&] { group.reduce_scatter(t, out); });
    expect_refusal("barrier", [&] { group.barrier(); });
    count("stand-in for " + ddp::list_ranks(ranks) + " refuses every collective");
  }

  // new_group(world, ranks) must throw on every rank with `expected` in the message.
  void bad_list(const std::vector<int>& ranks, const std::string& expected,
                const std::string& name) {
    try {
      ddp::new_group(world_, ranks);
    } catch (const ddp::Error& e) {
      const std::string what = e.what();
      DDP_CHECK(what.find(expected) != std::string::npos, world_.who(), ": ", name,
                ": new_group said:\n", what, "\nexpected '", expected, "' in it");
      count(name + " refused");
      return;
    }
    DDP_FAIL(world_.who(), ": ", name, ": new_group(", ddp::list_ranks(ranks), ") did not throw");
  }

  int checks() const { return checks_; }
  void set_verbose(bool v) { verbose_ = v; }

 private:
  ProcessGroup& world_;
  std::chrono::milliseconds timeout_;
  int checks_ = 0;
  bool verbose_ = false;
};

bool contains(const std::vector<int>& ranks, int r) {
  return std::find(ranks.begin(), ranks.end(), r) != ranks.end();
}

void run(ProcessGroup& world, std::chrono::milliseconds timeout, Checks& c) {
  const int g = world.rank();
  DDP_CHECK(world.size() == 4, "ch05_subgroups runs at world size 4, not ", world.size());

  // ---- bad lists, on every rank; the parent goes on working afterwards ----
  c.bad_list({}, "the list is empty", "empty list");
  c.bad_list({0, 4}, "rank 4 (at index 1) is not a rank of the parent", "rank out of range");
  c.bad_list({-1, 2}, "rank -1 (at index 0) is not a rank of the parent", "negative rank");
  c.bad_list({1, 0}, "expected the ranks sorted and each once, but 1 comes before 0",
             "unsorted list");
  c.bad_list({2, 2}, "expected the ranks sorted and each once, but 2 comes before 2",
             "a rank twice");
  // Rank 3 passes another list than the others: every rank names it.
  c.bad_list(g == 3 ? std::vector<int>{0, 2} : std::vector<int>{0, 1},
             "rank 3 passed another list than rank 0's [0, 1] (rank 3: [0, 2])",
             "rank 3 disagrees");
  // Rank 1 passes a bad list: it says why, the others name it instead of waiting.
  c.bad_list(g == 1 ? std::vector<int>{0, 9} : std::vector<int>{0, 1},
             g == 1 ? "rank 9 (at index 1) is not a rank of the parent"
                    : "rank 1 passed a list that is not valid",
             "rank 1's list is bad");

  // ---- pairs and odd/even: each rank is in one of each ----
  const std::vector<std::vector<int>> lists = {{0, 1}, {2, 3}, {0, 2}, {1, 3}};
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  for (const auto& ranks : lists) groups.push_back(ddp::new_group(world, ranks));
  for (std::size_t k = 0; k < lists.size(); ++k) {
    ProcessGroup& group = *groups[k];
    if (!contains(lists[k], g)) {
      c.refused(group, lists[k]);
      continue;
    }
    const auto index = std::find(lists[k].begin(), lists[k].end(), g) - lists[k].begin();
    const std::string who = group.who();
    DDP_CHECK(group.rank() == index && group.size() == 2 && group.timeout() == world.timeout() &&
                  group.backend_name() == world.backend_name() &&
                  who.find("of group " + ddp::list_ranks(lists[k])) != std::string::npos &&
                  who.find(ddp::detail::concat("parent rank ", g, "/4")) != std::string::npos,
              world.who(), ": sub-group ", ddp::list_ranks(lists[k]), " is rank ", group.rank(),
              " of ", group.size(), ", says '", who, "'");
    for (const std::int64_t n : {7, 20001}) {  // tcp: the small all-reduce, then the ring
      c.collectives<float>(group, lists[k], n);
    }
    c.collectives<std::int64_t>(group, lists[k], 1001);
  }
  ProcessGroup& pair = *groups[g / 2];        // [0, 1] or [2, 3]
  ProcessGroup& parity = *groups[2 + g % 2];  // [0, 2] or [1, 3]
  const std::vector<int>& pair_ranks = lists[g / 2];
  const std::vector<int>& parity_ranks = lists[2 + g % 2];

  // ---- two sub-groups at once, queued in opposite orders on even and odd ranks ----
  {
    const std::int64_t n = 30001;
    Tensor a = filled<float>(n, g), b = filled<float>(n, g);
    std::shared_ptr<ddp::Work> wa, wb;
    if (g % 2 == 0) {
      wa = pair.all_reduce(a);
      wb = parity.all_reduce(b);
    } else {
      wb = parity.all_reduce(b);
      wa = pair.all_reduce(a);
    }
    wb->wait(timeout);
    wa->wait(timeout);
    c.expect<float>(a, "pair all_reduce queued with odd/even's, in either order",
                    [&](std::int64_t i) { return reference(ReduceOp::Sum, pair_ranks, i); });
    c.expect<float>(b, "odd/even all_reduce queued with the pair's, in either order",
                    [&](std::int64_t i) { return reference(ReduceOp::Sum, parity_ranks, i); });
  }

  // ---- a pair finishes while the other pair waits in a parent collective ----
  // Ranks 2 and 3 sit in a broadcast from rank 0 that rank 0 starts only after [0, 1]
  // has finished five all-reduces: if those needed ranks 2 or 3, nothing would move.
  {
    Tensor token = ddp::full({1}, 0.0, ddp::TensorOptions{DType::Int64});
    if (g < 2) {
      for (int k = 0; k < 5; ++k) {
        Tensor t = filled<float>(1001, g);
        pair.all_reduce(t)->wait(timeout);
        c.expect<float>(t, "pair [0, 1] all_reduce while [2, 3] wait elsewhere",
                        [&](std::int64_t i) {
                          return reference(ReduceOp::Sum, {0, 1}, i);
                        });
      }
      if (g == 0) token.data<std::int64_t>()[0] = 5;
    }
    world.broadcast(token, 0)->wait(timeout);
    DDP_CHECK(token.item<std::int64_t>() == 5, world.who(), ": the parent's broadcast gave ",
              token.item<std::int64_t>());
    c.count("[0, 1] finished alone; the parent's broadcast came after");
  }

  // ---- one rank: [2] ----
  {
    auto single = ddp::new_group(world, {2});
    if (g == 2) {
      DDP_CHECK(single->rank() == 0 && single->size() == 1, world.who(), ": [2] is rank ",
                single->rank(), " of ", single->size());
      c.collectives<float>(*single, {2}, 1001);
    } else {
      c.refused(*single, {2});
    }
    single->destroy();
  }

  // ---- the whole world: the parent's results, bit for bit ----
  {
    auto all = ddp::new_group(world, {0, 1, 2, 3});
    DDP_CHECK(all->rank() == g && all->size() == 4, world.who(), ": [0, 1, 2, 3] is rank ",
              all->rank(), " of ", all->size());
    const std::int64_t n = 30001;
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      Tensor mine = filled<float>(n, g), theirs = filled<float>(n, g);
      mine.mul_(1.0f / 3.0f);  // fractions: the order of the sums shows in the bits
      theirs.mul_(1.0f / 3.0f);
      all->all_reduce(mine, op)->wait(timeout);
      world.all_reduce(theirs, op)->wait(timeout);
      DDP_CHECK(std::memcmp(mine.data<float>(), theirs.data<float>(), n * sizeof(float)) == 0,
                world.who(), ": all_reduce ", ddp::to_string(op),
                " on [0, 1, 2, 3] differs from the parent's");
      c.count(std::string("[0, 1, 2, 3] all_reduce ") + ddp::to_string(op) +
              " equals the parent's, bit for bit");
    }
    c.collectives<float>(*all, {0, 1, 2, 3}, 1001);
    all->barrier()->wait(timeout);
    all->destroy();
  }

  // ---- ending sub-groups ends neither the parent nor each other ----
  pair.barrier()->wait(timeout);
  pair.destroy();
  {
    Tensor t = filled<float>(7, g);
    parity.all_reduce(t)->wait(timeout);
    c.expect<float>(t, "odd/even all_reduce after the pairs were destroyed",
                    [&](std::int64_t i) { return reference(ReduceOp::Sum, parity_ranks, i); });
  }
  parity.barrier()->wait(timeout);
  parity.destroy();
  for (auto& group : groups) group->destroy();  // the stand-ins; a second destroy() is a no-op
  {
    Tensor t = filled<float>(1001, g);
    world.all_reduce(t)->wait(timeout);
    c.expect<float>(t, "the parent's all_reduce after every sub-group was destroyed",
                    [&](std::int64_t i) {
                      return reference(ReduceOp::Sum, {0, 1, 2, 3}, i);
                    });
  }
  // tcp: each sub-group said "done" under its own prefix "tcp/group<N>" (the bad lists
  // made none: the pairs and odd/even are N = 0..3, [2] is 4, the whole world 5), and
  // the parent, not destroyed yet, has not.
  if (auto store = world.store(); store && world.backend_name() == "tcp") {
    world.barrier()->wait(timeout);  // every rank's destroy() has returned
    const std::vector<std::pair<std::string, int>> done = {
        {"tcp/group0/done", 2}, {"tcp/group1/done", 2}, {"tcp/group2/done", 2},
        {"tcp/group3/done", 2}, {"tcp/group4/done", 1}, {"tcp/group5/done", 4},
        {"tcp/done", 0}};
    for (const auto& [key, want] : done) {
      const std::int64_t got = store->add(key, 0);
      DDP_CHECK(got == want, world.who(), ": the store's ", key, " is ", got, ", expected ", want);
    }
    c.count("tcp: each sub-group's 'done' under its own prefix; the parent's untouched");
  }
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "ch05_subgroups: %s\nusage: ch05_subgroups --backend tcp|mpi [--timeout-s 30] "
               "[--verbose]\n",
               message.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "tcp";
  int timeout_s = 30;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--verbose") {
      verbose = true;
      continue;
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--backend") {
      backend = v;
    } else if (flag == "--timeout-s") {
      timeout_s = std::atoi(v.c_str());
      if (timeout_s <= 0) usage_error("--timeout-s '" + v + "': expected seconds > 0");
    } else {
      usage_error("unknown flag " + flag);
    }
  }
  try {
    ddp::InitOptions init;
    init.backend = backend;
    init.timeout = std::chrono::seconds(timeout_s);
    std::unique_ptr<ProcessGroup> world = ddp::init_process_group(init);
    Checks checks(*world, init.timeout);
    checks.set_verbose(verbose);
    run(*world, init.timeout, checks);
    world->barrier()->wait();
    std::printf("ch05_subgroups: rank %d: ok: %d checks (%s)\n", world->rank(), checks.checks(),
                backend.c_str());
    std::fflush(stdout);
    world->destroy();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch05_subgroups: FAIL: %s\n", e.what());
    std::fflush(stderr);
    // As ch05_collectives: skip the destructors, whose teardown may wait on stuck peers.
    std::_Exit(1);
  }
}
