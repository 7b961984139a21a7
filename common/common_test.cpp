// Tests of unit parsing, JSON error positions, name suggestions, range checks and input files.
#include <cmath>
#include <cstdio>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

#include "common/checks.hpp"
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

TEST_CASE("range checks name the field, the value and the rule; NaN and infinities fail") {
  const Interval bucket{0.001, 1e5, "MiB"};
  CHECK(require_range("--bucket-mb", 25.0, bucket) == 25.0);
  CHECK_THROWS_WITH_AS((void)require_range("--bucket-mb", 1e-6, bucket),
                       "--bucket-mb = 1e-06: must be in [0.001, 100000] MiB", ConfigError);
  CHECK_THROWS_WITH_AS((void)require_range("--usd", std::nan(""), Interval{0, 1e6, "USD"}),
                       "--usd = nan: must be a finite number in [0, 1e+06] USD", ConfigError);
  CHECK_THROWS_AS((void)require_range("--x", HUGE_VAL, Interval{0, 1e300, ""}), ConfigError);
  CHECK_THROWS_AS((void)require_range("--x", -HUGE_VAL, Interval{-1e300, 0, ""}), ConfigError);
  const Interval optional{1, 10, "GB/s", true};
  CHECK(optional.contains(0));
  CHECK_FALSE(optional.contains(0.5));
  Problems p("f.json");
  CHECK_FALSE(check_range(p, "nvlink", 0.5, optional));
  CHECK_THROWS_WITH_AS(p.throw_if_any(), "f.json: nvlink = 0.5: must be 0 or in [1, 10] GB/s",
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)require_range("--threads", std::int64_t{-1}, 0, 1024),
                       "--threads = -1: must be in 0..1024", ConfigError);
}

TEST_CASE("input files: the reason a file cannot be read, and a size limit") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("trainsim-io-{}", ::getpid());
  fs::create_directories(dir);
  CHECK_THROWS_WITH_AS((void)read_input_file((dir / "missing.json").string()),
                       doctest::Contains("missing.json: no such file"), ConfigError);
  CHECK_THROWS_WITH_AS((void)load_json_file(dir.string()),
                       doctest::Contains(": is a directory, expected a file"), ConfigError);
  // One byte over the limit is refused before parsing (issue 18, row 12: a 200 MB config was
  // parsed for 14 s in 1.8 GB). Sparse: no disk is written.
  const fs::path big = dir / "big.json";
  { std::ofstream(big.string()) << "{}"; }
  fs::resize_file(big, kMaxInputFileBytes + 1);
  CHECK_THROWS_WITH_AS(
      (void)load_json_file(big.string()),
      doctest::Contains("big.json: is 16.0 MiB: input files are limited to 16 MiB"), ConfigError);
  fs::resize_file(big, 2);
  CHECK(load_json_file(big.string()).is_object());
  // A device without a size is read up to the limit, not forever.
  CHECK_THROWS_WITH_AS((void)read_input_file("/dev/zero"),
                       doctest::Contains("/dev/zero: more than 16 MiB"), ConfigError);
  // Permission denied is reported as such (root reads anything: checked only when it applies).
  const fs::path locked = dir / "locked.json";
  { std::ofstream(locked.string()) << "{}"; }
  fs::permissions(locked, fs::perms::none);
  if (std::FILE* f = std::fopen(locked.c_str(), "rb"))
    std::fclose(f);
  else
    CHECK_THROWS_WITH_AS((void)read_input_file(locked.string()),
                         doctest::Contains("locked.json: cannot open: Permission denied"),
                         ConfigError);
  fs::remove_all(dir);
}
