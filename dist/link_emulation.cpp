// LinkEmulation and EmulatedLink (see link_emulation.hpp): the grammar of DDP_TCP_LINK,
// then the wire.
#include "dist/link_emulation.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/error.hpp"

namespace ddp {

// ==== The grammar =======================================================================

namespace {

// "50us" -> {50, "us"}; nullopt when it does not start with a finite number.
std::optional<std::pair<double, std::string>> number_and_unit(const std::string& text) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) {
    return std::nullopt;  // no sign, no "inf", no "nan", no leading space
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value)) return std::nullopt;
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::pair{value, unit};
}

}  // namespace

LinkEmulation parse_link_emulation(const std::string& text, const char* variable) {
  auto fail = [&](const std::string& why) {
    DDP_FAIL(variable, "=\"", text, "\": ", why, "\nexpected ", kLinkGrammar);
  };
  const std::size_t comma = text.find(',');
  if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos) {
    fail("expected a rate and a latency separated by one comma");
  }
  LinkEmulation link;
  const std::string rate_text = text.substr(0, comma);
  const auto rate = number_and_unit(rate_text);
  if (!rate) fail("the rate \"" + rate_text + "\" does not start with a number");
  static constexpr std::pair<std::string_view, double> kRates[] = {
      {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8}, {"gbit", 1e9 / 8},
      {"kb/s", 1e3},     {"mb/s", 1e6},     {"gb/s", 1e9}};
  const auto* r = std::find_if(std::begin(kRates), std::end(kRates),
                               [&](const auto& u) { return u.first == rate->second; });
  if (r == std::end(kRates)) fail("the rate \"" + rate_text + "\" has no known unit");
  link.bytes_per_second = rate->first * r->second;
  if (!(link.bytes_per_second >= 1)) fail("the rate \"" + rate_text + "\" is below 1 byte/s");

  const std::string delay_text = text.substr(comma + 1);
  const auto delay = number_and_unit(delay_text);
  if (!delay) fail("the latency \"" + delay_text + "\" does not start with a number");
  double ns_per_unit = 0;
  if (delay->second == "us") ns_per_unit = 1e3;
  if (delay->second == "ms") ns_per_unit = 1e6;
  if (ns_per_unit == 0) fail("the latency \"" + delay_text + "\" has no known unit");
  const double ns = delay->first * ns_per_unit;
  if (ns > 60e9) fail("the latency \"" + delay_text + "\" is over a minute");
  link.latency = std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(ns)));
  return link;
}

std::optional<LinkEmulation> link_emulation_from_env() {
  const char* value = std::getenv(kLinkVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  LinkEmulation link = parse_link_emulation(value);
  if (const char* scope = std::getenv(kLinkScopeVariable); scope != nullptr && *scope != '\0') {
    const std::string text = scope;
    DDP_CHECK(text == "all" || text == "between-hosts", kLinkScopeVariable, "=\"", text,
              "\": expected all (every link of the ring, the default) or between-hosts (only "
              "the links to a rank on another host)");
    link.between_hosts_only = text == "between-hosts";
  }
  return link;
}

std::string describe_link(double bytes_per_second, double latency_s) {
  const double bits = bytes_per_second * 8;
  char rate[32];
  if (std::isinf(bits)) {
    std::snprintf(rate, sizeof rate, "unlimited");
  } else if (bits >= 1e9) {
    std::snprintf(rate, sizeof rate, "%g Gbit/s", bits / 1e9);
  } else if (bits >= 1e6) {
    std::snprintf(rate, sizeof rate, "%g Mbit/s", bits / 1e6);
  } else {
    std::snprintf(rate, sizeof rate, "%g kbit/s", bits / 1e3);
  }
  const double us = latency_s * 1e6;
  char delay[32];
  if (us >= 1000) {
    std::snprintf(delay, sizeof delay, "%g ms", us / 1e3);
  } else {
    std::snprintf(delay, sizeof delay, "%g us", us);
  }
  return std::string(rate) + ", " + delay;
}

std::string LinkEmulation::describe() const {
  return describe_link(bytes_per_second, std::chrono::duration<double>(latency).count()) +
         (between_hosts_only ? ", between hosts" : "");
}

// ==== The wire ==========================================================================
//
// Note [Link model]
// -----------------
// A link of rate B and one-way latency L: the sender puts bytes on the wire one after
// the other, B a second, in frames of F bytes, and a frame arrives whole, L after its
// last byte went on. So byte k of a stretch put on the wire from time t0 (the wire idle
// before) arrives at t0 + min(size, (k/F + 1)·F)/B + L (k/F rounded down), and the next
// stretch starts when the wire has finished this one. The frames are small (10 us of
// wire time, EmulatedLink::kFrameTime): a rank passes on the first frames of a chunk
// while the rest still comes in, as over a real link.
//
// We emulate it at the sender: the ring's loop puts bytes on an EmulatedLink instead of
// the socket, up to kWireBytes ahead as into a socket's send buffer, and writes them to
// the socket (loopback: there at once) when they are due. The wire books its time when
// it takes the bytes, so a sender that is descheduled for a while (a loaded host) does
// not leave it idle. Bytes are copied onto the wire: the sender may change its memory
// afterwards (the ring overwrites a chunk it sent once the finished one comes round),
// the wire must not.
//
// In a ring collective a rank passes on what it received, so every dependent step pays
// L and the rate caps every link. k dependent steps of c bytes, one after the other,
// cost k(L + c/B): for the ring all-reduce of S bytes over W ranks, 2(W-1) steps of S/W,
// 2(W-1)·L + 2(W-1)/W·S/B, the model of chapter 07. The ring overlaps its steps (Note
// [One stream] in pipelined_ring.cpp), so it can come in under that, but never under
// max(kL + c/B, kc/B + L): the last chunk must cross k links, and each link carries
// the whole stream. tests/ch07/tcp_link asserts that bound; bench/README.md compares.

EmulatedLink::EmulatedLink(LinkEmulation link)
    : link_(link),
      frame_bytes_(std::max(
          kMinFrameBytes, static_cast<std::size_t>(
                              link.bytes_per_second *
                              std::chrono::duration<double>(kFrameTime).count()))) {}

// (In whole nanoseconds, rounded: whole microseconds at whole bytes a microsecond stay
// exact, as the tests count them.)
EmulatedLink::Clock::duration EmulatedLink::wire_time(std::size_t bytes) const {
  return std::chrono::nanoseconds(
      std::llround(static_cast<double>(bytes) * 1e9 / link_.bytes_per_second));
}

std::size_t EmulatedLink::arrived(const Segment& s, Clock::time_point now) const {
  const auto on_wire = std::chrono::duration_cast<std::chrono::nanoseconds>(
      now - s.start - link_.latency).count();
  if (on_wire <= 0) return 0;
  const double sent = std::floor(static_cast<double>(on_wire) * link_.bytes_per_second / 1e9);
  if (sent >= static_cast<double>(s.bytes.size())) return s.bytes.size();
  const auto whole = static_cast<std::size_t>(sent);
  return whole / frame_bytes_ * frame_bytes_;
}

std::size_t EmulatedLink::accept(const std::byte* data, std::size_t n, Clock::time_point now) {
  // Only while half the wire is free: fewer, larger stretches (a copy and a turn of the
  // sender's loop each).
  if (n == 0 || held_ > kWireBytes / 2) return 0;
  const std::size_t take = std::min(n, kWireBytes - held_);
  const Clock::time_point start = std::max(now, free_at_);
  segments_.push_back(Segment{start, std::vector<std::byte>(data, data + take), 0});
  held_ += take;
  free_at_ = start + wire_time(take);
  return take;
}

std::span<const std::byte> EmulatedLink::due(Clock::time_point now) const {
  if (segments_.empty()) return {};
  const Segment& s = segments_.front();
  return {s.bytes.data() + s.handed_on, arrived(s, now) - s.handed_on};
}

void EmulatedLink::delivered(std::size_t n) {
  Segment& s = segments_.front();
  s.handed_on += n;
  held_ -= n;
  if (s.handed_on == s.bytes.size()) segments_.pop_front();
}

EmulatedLink::Clock::time_point EmulatedLink::next_arrival(Clock::time_point now) const {
  if (segments_.empty()) return Clock::time_point::max();
  const Segment& s = segments_.front();
  const std::size_t next = std::min(s.bytes.size(), arrived(s, now) + frame_bytes_);
  return s.start + link_.latency + wire_time(next);
}

}  // namespace ddp
