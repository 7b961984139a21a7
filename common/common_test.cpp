// Tests of unit parsing, JSON error positions and name suggestions.
#include <doctest/doctest.h>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/units.hpp"

using namespace trainsim;

TEST_CASE("sizes and counts parse with suffixes") {
  CHECK(parse_bytes("1G", "--bytes") == 1073741824.0);
  CHECK(parse_bytes("25M", "--bytes") == 25.0 * 1048576);
  CHECK(parse_bytes("25MB", "--bytes") == 25.0 * 1048576);
  CHECK(parse_bytes("4096", "--bytes") == 4096.0);
  CHECK(parse_count("15T", "--tokens") == 15e12);
  CHECK(parse_count("70e9", "--params") == 70e9);
  CHECK(parse_count("7.5B", "--params") == 7.5e9);
  CHECK(parse_count("300e9", "--tokens") == 300e9);
  CHECK_THROWS_WITH_AS((void)parse_count("abc", "--tokens"), doctest::Contains("--tokens = 'abc'"),
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)parse_count("-5", "--tokens"),
                       doctest::Contains("must not be negative"), ConfigError);
  CHECK_THROWS_AS((void)parse_bytes("", "--bytes"), ConfigError);
  CHECK_THROWS_AS((void)parse_count("1e999", "--tokens"), ConfigError);
}

TEST_CASE("malformed JSON reports file, line and column") {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": ,\n}";
  CHECK_THROWS_WITH_AS(parse_json_text(text, "x.json"), doctest::Contains("x.json:3:"),
                       ConfigError);
  CHECK_NOTHROW(parse_json_text("{\"a\": 1 // comment\n}", "y.json"));
  // A number beyond a double's range is nlohmann's out_of_range, not a parse_error: still a
  // ConfigError naming the file (found by fuzz_loaders).
  CHECK_THROWS_WITH_AS(parse_json_text("{\"name\": 444e444444440}", "z.json"),
                       doctest::Contains("z.json: malformed JSON"), ConfigError);
}

TEST_CASE("strict object reader reports every problem") {
  const auto j = parse_json_text(R"({"a": "x", "b": 1.5, "c": 2, "extra": 1})", "t.json");
  Problems p("t.json");
  JsonObjectReader r(j, p);
  std::int64_t a = 0, b = 0, c = 0, d = 0;
  r.get("a", a);
  r.get("b", b);
  r.get("c", c);
  r.get("d", d, true);
  r.finish();
  CHECK(c == 2);
  CHECK_THROWS_WITH_AS(p.throw_if_any(), doctest::Contains("a = \"x\": expected an integer"),
                       ConfigError);
  try {
    p.throw_if_any();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("b = 1.5") != std::string::npos);
    CHECK(msg.find("d: missing required field") != std::string::npos);
    CHECK(msg.find("extra: unknown field") != std::string::npos);
  }
}

TEST_CASE("nearest names") {
  const std::vector<std::string> names{"llama3-8b", "llama3-70b", "llama2-7b", "gpt2"};
  const auto near = nearest_names("llama3-8", names);
  REQUIRE_FALSE(near.empty());
  CHECK(near.front() == "llama3-8b");
  CHECK(nearest_names("zzzzzzzzzz", names).empty());
}

TEST_CASE("formatting") {
  CHECK(format_bytes(1.5e9) == "1.50 GB");
  CHECK(format_bytes_binary(8) == "8 B");
  CHECK(format_bytes_binary(65536) == "64 KiB");
  CHECK(format_bytes_binary(4294967296.0) == "4 GiB");
  CHECK(format_bytes_binary(1482911) == "1.41 MiB"); // 1482911 / 2^20 = 1.4142...
  CHECK(format_seconds(143.9 * 86400) == "143.9 days");
  CHECK(format_count(124439808) == "124.44 M");
}
