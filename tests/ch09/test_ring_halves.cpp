// Chapter 09, exercise 09.2: the plain ring's two halves (dist/plain_ring.hpp), run by
// threads that stand for the ranks, joined by in-memory links. Against naive sums, by the
// elements each rank sends (a half, not a whole all-reduce), and against chapter 05's
// plain_ring_all_reduce, which must be the two halves run in a row, bit for bit. (ch09.zero2 and ch09.fsdp under DDP_TCP_RING=plain run them through the
// tcp group's reduce_scatter and all_gather.)
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dist/plain_ring.hpp"
#include "dist/ring_schedule.hpp"
#include "tensor/random.hpp"

namespace {

// One direction of one link: what rank r sends right, rank r + 1 receives from its left.
struct Channel {
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<std::vector<float>> chunks;
};

// `world` threads, rank r running body(r, its links); returns when all are done, with the
// number of elements each rank sent. What a rank throws (an unwritten exercise's pointer,
// a receive that waited 10 s in vain) fails the test.
std::vector<std::int64_t> run_ring(int world,
                                   const std::function<void(int, const ddp::RingLinks&)>& body) {
  std::vector<Channel> channels(static_cast<std::size_t>(world));
  std::vector<std::int64_t> sent(static_cast<std::size_t>(world), 0);
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      Channel& right = channels[static_cast<std::size_t>(r)];
      Channel& left = channels[static_cast<std::size_t>((r + world - 1) % world)];
      const ddp::RingLinks links{
          [&right, &sent, r](std::span<const float> chunk) {
            sent[static_cast<std::size_t>(r)] += static_cast<std::int64_t>(chunk.size());
            const std::lock_guard lock(right.mutex);
            right.chunks.emplace_back(chunk.begin(), chunk.end());
            right.arrived.notify_one();
          },
          [&left, r](std::span<float> chunk) {
            std::unique_lock lock(left.mutex);
            if (!left.arrived.wait_for(lock, std::chrono::seconds(10),
                                       [&] { return !left.chunks.empty(); })) {
              throw std::runtime_error("rank " + std::to_string(r) +
                                       ": nothing came from the left within 10 s");
            }
            const std::vector<float> got = std::move(left.chunks.front());
            left.chunks.pop_front();
            if (got.size() != chunk.size()) {
              throw std::runtime_error("rank " + std::to_string(r) + ": received " +
                                       std::to_string(got.size()) + " elements into a chunk of " +
                                       std::to_string(chunk.size()));
            }
            std::copy(got.begin(), got.end(), chunk.begin());
          }};
      try {
        body(r, links);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& error : errors) {
    if (!error.empty()) FAIL(error);
  }
  return sent;
}

// The size of chunk c of n elements over `world` ranks.
std::int64_t chunk_size(std::int64_t n, int world, int c) {
  const auto [begin, end] = ddp::ring_chunk(n, world, c);
  return end - begin;
}

// Rank r's element i: small integers, whose float sums are exact in any order.
float value(int rank, std::int64_t i) { return static_cast<float>((rank + 1) * 1000 + i % 997); }

}  // namespace

TEST_CASE("The ring's first half is a reduce-scatter: rank r ends with chunk r summed",
          "[ring][ch09][ex09.2]") {
  for (int world : {1, 2, 3, 4}) {
    for (std::int64_t n : {0, 1, 7, 12, 1001}) {
      INFO("world " << world << ", n " << n);
      std::vector<std::vector<float>> data(static_cast<std::size_t>(world));
      for (int r = 0; r < world; ++r) {
        for (std::int64_t i = 0; i < n; ++i) data[r].push_back(value(r, i));
      }
      const std::vector<std::int64_t> sent = run_ring(world, [&](int r, const ddp::RingLinks& links) {
        ddp::plain_ring_reduce_scatter(data[r], r, world, links);
      });
      for (int r = 0; r < world; ++r) {
        const auto [begin, end] = ddp::ring_chunk(n, world, r);
        for (std::int64_t i = begin; i < end; ++i) {
          float sum = 0;  // naive: every rank's element i
          for (int q = 0; q < world; ++q) sum += value(q, i);
          REQUIRE(data[r][i] == sum);
        }
        // Half an all-reduce, not a whole one: every chunk but its own, once.
        if (world > 1) CHECK(sent[r] == n - chunk_size(n, world, r));
      }
    }
  }
}

TEST_CASE("The ring's second half is an all-gather: every rank ends with every chunk",
          "[ring][ch09][ex09.2]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int world : {1, 2, 3, 4}) {
    for (std::int64_t n : {0, 1, 7, 12, 1001}) {
      INFO("world " << world << ", n " << n);
      // Rank r holds only its own chunk r; the rest is NaN, which must all be overwritten.
      std::vector<std::vector<float>> data(static_cast<std::size_t>(world),
                                           std::vector<float>(static_cast<std::size_t>(n), nan));
      for (int r = 0; r < world; ++r) {
        const auto [begin, end] = ddp::ring_chunk(n, world, r);
        for (std::int64_t i = begin; i < end; ++i) data[r][i] = value(r, i);
      }
      const std::vector<std::int64_t> sent = run_ring(world, [&](int r, const ddp::RingLinks& links) {
        ddp::plain_ring_all_gather(data[r], r, world, links);
      });
      for (int r = 0; r < world; ++r) {
        for (int owner = 0; owner < world; ++owner) {
          const auto [begin, end] = ddp::ring_chunk(n, world, owner);
          for (std::int64_t i = begin; i < end; ++i) REQUIRE(data[r][i] == value(owner, i));
        }
        // Every finished chunk but the one its right neighbour finished, once.
        if (world > 1) CHECK(sent[r] == n - chunk_size(n, world, (r + 1) % world));
      }
    }
  }
}

TEST_CASE("The two halves in a row are chapter 05's all-reduce, bit for bit",
          "[ring][ch09][ex09.2]") {
  for (int world : {2, 3, 4}) {
    const std::int64_t n = 10007;  // random floats: the order of the additions shows
    std::vector<std::vector<float>> halves(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) {
      ddp::Generator gen(100 + static_cast<std::uint64_t>(r));
      const ddp::Tensor t = ddp::randn({n}, gen);
      halves[r].assign(t.data<float>(), t.data<float>() + n);
    }
    std::vector<std::vector<float>> whole = halves;
    run_ring(world, [&](int r, const ddp::RingLinks& links) {
      ddp::plain_ring_reduce_scatter(halves[r], r, world, links);
      ddp::plain_ring_all_gather(halves[r], r, world, links);
    });
    run_ring(world, [&](int r, const ddp::RingLinks& links) {
      ddp::plain_ring_all_reduce(whole[r], r, world, links);
    });
    for (int r = 0; r < world; ++r) {
      INFO("world " << world << ", rank " << r);
      CHECK(std::memcmp(halves[r].data(), whole[r].data(), n * sizeof(float)) == 0);
    }
  }
}
