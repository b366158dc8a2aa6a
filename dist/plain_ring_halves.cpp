// The plain ring's two halves (see plain_ring.hpp, Note [All-reduce = reduce-scatter +
// all-gather]). This file holds exactly the functions of exercise 09.2: the exercise build
// links the participant's copy in its place (tutorial/EXERCISES.md).
#include <cstdint>
#include <future>
#include <vector>

#include "dist/plain_ring.hpp"
#include "dist/ring_schedule.hpp"

namespace ddp {
namespace {

// Steps [first, last) of the schedule, as plain_ring_all_reduce runs all of them: send a
// chunk to the right while receiving one from the left, then add it into ours (the
// reduce-scatter's steps) or put it in place (the all-gather's).
void run_steps(std::span<float> data, int rank, int size, const RingLinks& links, int first,
               int last) {
  const auto n = static_cast<std::int64_t>(data.size());
  std::vector<float> received;
  for (int step = first; step < last; ++step) {
    const RingStep s = ring_all_reduce_step(rank, size, step);
    const auto [send_begin, send_end] = ring_chunk(n, size, s.send_chunk);
    const auto [recv_begin, recv_end] = ring_chunk(n, size, s.recv_chunk);
    auto sent = std::async(std::launch::async, [&] {
      links.send_right(data.subspan(send_begin, send_end - send_begin));
    });
    received.resize(static_cast<std::size_t>(recv_end - recv_begin));
    links.receive_left(received);
    sent.get();
    const std::span<float> mine = data.subspan(recv_begin, received.size());
    for (std::size_t i = 0; i < received.size(); ++i) {
      mine[i] = s.reduce ? mine[i] + received[i] : received[i];
    }
  }
}

}  // namespace

void plain_ring_reduce_scatter(std::span<float> data, int rank, int size, const RingLinks& links) {
  run_steps(data, rank, size, links, 0, size - 1);
}

void plain_ring_all_gather(std::span<float> data, int rank, int size, const RingLinks& links) {
  run_steps(data, rank, size, links, size - 1, 2 * (size - 1));
}

}  // namespace ddp
