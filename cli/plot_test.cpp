// Hostile strings never leave a gnuplot string literal or a data column:
// every input of the corpus below must come back as one inert token.
#include <doctest/doctest.h>
#include <string>
#include <vector>

#include "cli/plot.hpp"
#include "common/errors.hpp"

using namespace trainsim::cli;

namespace {

// The corpus: quotes, newlines, carriage returns, backslashes, gnuplot's command
// substitution and system(), macros, shell pipes, NUL and other control bytes, invalid UTF-8.
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> c{
      "plain name",
      "it's",
      "'",
      "''",
      "a'\nsystem(\"touch /tmp/trainsim-pwned\")\n'",
      "x\r\nset output '|touch /tmp/trainsim-pwned'",
      "`touch /tmp/trainsim-pwned`",
      "@macro",
      "back\\slash\\",
      "\"double\" quotes",
      std::string("nul\0byte", 8),
      "\x1b[31mescape",
      "\xff\xfe invalid utf-8 \xc3",
      "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", // valid UTF-8 survives
      "e",
      "\ne\n",
      "# comment",
      "tab\there",
  };
  return c;
}

// A gnuplot single-quoted literal is inert when it opens and closes with a quote, every inner
// quote is doubled, and it holds no control byte (a newline would end the command).
bool is_inert_literal(const std::string& q) {
  if (q.size() < 2 || q.front() != '\'' || q.back() != '\'')
    return false;
  for (std::size_t i = 1; i + 1 < q.size(); ++i) {
    const auto c = static_cast<unsigned char>(q[i]);
    if (c < 0x20 || c == 0x7f)
      return false;
    if (q[i] == '\'') {
      if (i + 2 >= q.size() || q[i + 1] != '\'')
        return false;
      ++i; // a doubled quote
    }
  }
  return true;
}

} // namespace

TEST_CASE("gnuplot_string: every hostile string stays one inert literal") {
  for (const auto& s : corpus()) {
    CAPTURE(s);
    CHECK(is_inert_literal(gnuplot_string(s)));
  }
  CHECK(gnuplot_string("it's") == "'it''s'");
  CHECK(gnuplot_string("a\nb") == "'a b'");
  CHECK(gnuplot_string("\xc3\xa9t\xc3\xa9") == "'\xc3\xa9t\xc3\xa9'"); // valid UTF-8 kept
  CHECK(gnuplot_string("\xff") == "'?'");                              // invalid byte
}

TEST_CASE("data_token: one column, never a data terminator or a comment") {
  for (const auto& s : corpus()) {
    CAPTURE(s);
    const std::string t = data_token(s);
    CHECK(!t.empty());
    CHECK(t.find_first_of(" \t\r\n\"'#`") == std::string::npos);
    for (unsigned char c : t)
      CHECK(c >= 0x20);
  }
  CHECK(data_token("") == "-");
  CHECK(data_token("\ne\n") == "_e_");
}

TEST_CASE("check_plot_file: extension, control characters, missing or unwritable directory") {
  CHECK_THROWS_WITH_AS(check_plot_file("out.pdf"), doctest::Contains("must end in .png or .svg"),
                       trainsim::ConfigError);
  CHECK_THROWS_WITH_AS(check_plot_file("a\nb.png"), doctest::Contains("control characters"),
                       trainsim::ConfigError);
  CHECK_THROWS_WITH_AS(check_plot_file("/nonexistent-dir/x.png"),
                       doctest::Contains("does not exist"), trainsim::ConfigError);
  CHECK_THROWS_WITH_AS(check_plot_file("/proc/x.png"), doctest::Contains("cannot write in /proc"),
                       trainsim::ConfigError);
  CHECK_THROWS_WITH_AS(check_plot_file("|touch x/y.png"), doctest::Contains("does not exist"),
                       trainsim::ConfigError);
  CHECK_NOTHROW(check_plot_file("plot-test-ok.png")); // the build directory is writable
}
