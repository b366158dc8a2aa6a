// Chapter 05, SLURM hostlists: every form the launch-environment code meets (ranges, lists,
// zero padding, several bracket groups, commas outside brackets) expanded against lists
// written out by hand, and each syntax error reported with the expression and the position.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "dist/launch_env.hpp"
#include "base/error.hpp"

using Catch::Contains;
using Hosts = std::vector<std::string>;

TEST_CASE("hostlist: a range in brackets", "[ch05][hostlist]") {
  CHECK(ddp::expand_hostlist("node[1-2]") == Hosts{"node1", "node2"});
  CHECK(ddp::expand_hostlist("x[5]") == Hosts{"x5"});
  CHECK(ddp::expand_hostlist("n[9-11]") == Hosts{"n9", "n10", "n11"});
}

TEST_CASE("hostlist: plain names and commas outside brackets", "[ch05][hostlist]") {
  CHECK(ddp::expand_hostlist("login1") == Hosts{"login1"});
  CHECK(ddp::expand_hostlist("a,b.cluster,c_3-x") == Hosts{"a", "b.cluster", "c_3-x"});
  CHECK(ddp::expand_hostlist("gnodee[2-5],gnoded1") ==
        Hosts{"gnodee2", "gnodee3", "gnodee4", "gnodee5", "gnoded1"});
  CHECK(ddp::expand_hostlist("gnode[10,20,25,37]") ==
        Hosts{"gnode10", "gnode20", "gnode25", "gnode37"});
}

TEST_CASE("hostlist: zero padding follows the lower bound", "[ch05][hostlist]") {
  CHECK(ddp::expand_hostlist("a[01-03,7]b") == Hosts{"a01b", "a02b", "a03b", "a7b"});
  CHECK(ddp::expand_hostlist("gpu[08-10]") == Hosts{"gpu08", "gpu09", "gpu10"});
  CHECK(ddp::expand_hostlist("gpu[007]") == Hosts{"gpu007"});
  CHECK(ddp::expand_hostlist("n[98-100]") == Hosts{"n98", "n99", "n100"});
}

TEST_CASE("hostlist: several bracket groups give every combination", "[ch05][hostlist]") {
  CHECK(ddp::expand_hostlist("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(ddp::expand_hostlist("rack[1,3]-gpu[01-02],head") ==
        Hosts{"rack1-gpu01", "rack1-gpu02", "rack3-gpu01", "rack3-gpu02", "head"});
}

TEST_CASE("hostlist: syntax errors name the expression and the position", "[ch05][hostlist]") {
  struct Bad {
    std::string expression;
    std::string position;
    std::string what;
  };
  const std::vector<Bad> bad = {
      {"node[1-", "position 7", "expected a number, found the end"},
      {"node[1-2", "position 8", "missing ']'"},
      {"node[3-1]", "position 5", "runs backwards"},
      {"a,,b", "position 2", "empty host name"},
      {"a,", "position 2", "empty host name"},
      {"", "position 0", "empty host name"},
      {"node]1", "position 4", "']' without a '['"},
      {"node[a]", "position 5", "expected a number, found 'a'"},
      {"no de", "position 2", "unexpected ' '"},
      {"a[[1]]", "position 2", "expected a number, found '['"},
      {"a[1;2]", "position 3", "expected ',' or ']'"},
      {"n[1-2000000]", "position 11", "more than"},
      {"n[1234567890]", "position 12", "more than 9 digits"},
  };
  for (const Bad& b : bad) {
    INFO("expression \"" << b.expression << "\"");
    CHECK_THROWS_AS(ddp::expand_hostlist(b.expression), ddp::Error);
    CHECK_THROWS_WITH(ddp::expand_hostlist(b.expression),
                      Contains("\"" + b.expression + "\" at " + b.position) && Contains(b.what) &&
                          Contains("hint:"));
  }
}
