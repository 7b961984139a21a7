// The command line (app.hpp): every subcommand, two checks at the edge that CLI11 does not
// make (unknown command names; NaN and infinities in number flags), and the exit codes.
#include "cli/app.hpp"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/text.hpp"

namespace trainsim::cli {
namespace {

void add_commands(CLI::App& app) {
  add_model(app);
  add_time(app);
  add_memory(app);
  add_estimate(app);
  add_plan(app);
  add_sweep(app);
  add_roofline(app);
  add_collective(app);
  add_validate_published(app);
  add_presets(app);
  add_bench(app);
  add_calibrate(app);
  add_compare(app);
  add_train_step(app);
}

// Every integer flag must be a number its type holds: CLI11 2.1 reads
// "18446744073709551616" into an int64 as 9223372036854775807 (strtoll saturates), a value
// that then passes as given.
void require_integers_in_range(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (!opt->nonpositional() || (type != "INT" && type != "UINT"))
      continue;
    const std::string name = opt->get_name();
    const bool is_unsigned = type == "UINT";
    opt->check(CLI::Validator(
        [name, is_unsigned](std::string& text) {
          errno = 0;
          char* end = nullptr;
          if (is_unsigned && text.find('-') != std::string::npos)
            throw ConfigError(fmt::format("{} = {}: must not be negative", name, text));
          if (is_unsigned)
            (void)std::strtoull(text.c_str(), &end, 0);
          else
            (void)std::strtoll(text.c_str(), &end, 0);
          if (end != text.c_str() && *end == '\0' && errno == ERANGE)
            throw ConfigError(fmt::format("{} = {}: out of range for an integer (at most {})", name,
                                          text, is_unsigned ? "2^64 - 1" : "2^63 - 1"));
          return std::string(); // not a number at all: CLI11's conversion reports it
        },
        "", "in range"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    require_integers_in_range(*sub);
}

// Every floating-point flag of every subcommand must be a finite number: CLI11 reads "nan",
// "inf" and "1e999" as doubles, and a NaN passes any `x < limit` test after it.
void require_finite_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (!opt->nonpositional() || opt->get_type_name() != "FLOAT")
      continue;
    const std::string name = opt->get_name();
    opt->check(CLI::Validator(
        [name](std::string& text) {
          char* end = nullptr;
          const double v = std::strtod(text.c_str(), &end);
          if (end == text.c_str() || *end != '\0')
            return std::string(); // not a number at all: CLI11's conversion reports it
          if (!std::isfinite(v))
            throw ConfigError(fmt::format("{} = {}: must be a finite number", name, text));
          return std::string();
        },
        "", "finite"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    require_finite_numbers(*sub);
}

// An empty argument is never a value trainsim needs, and CLI11 2.1 loops forever on an empty
// positional inside a command with option groups (`trainsim time "" --params 7e9`, found by
// fuzz_cli): refuse it before parsing.
void check_no_empty_argument(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] == '\0')
      throw ConfigError(fmt::format("argument {} is empty (''): give a value, or leave the option "
                                    "out for its default",
                                    i));
}

// "trainsim frobnicate": name the commands instead of CLI11's "A subcommand is required".
void check_command_name(CLI::App& app, int argc, const char* const* argv) {
  if (argc < 2 || argv[1][0] == '-' || argv[1][0] == '\0')
    return;
  std::vector<std::string> names;
  for (const CLI::App* sub :
       app.get_subcommands([](CLI::App* s) { return !s->get_name().empty(); }))
    names.push_back(sub->get_name());
  const std::string given = argv[1];
  if (std::find(names.begin(), names.end(), given) != names.end())
    return;
  const auto near = nearest_names(given, names, 1);
  std::string all;
  for (const auto& n : names)
    all += (all.empty() ? "" : ", ") + n;
  throw ConfigError(
      fmt::format("unknown command '{}'{}; the commands are: {} (`trainsim --help` "
                  "says what each does)",
                  given, near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near[0]), all));
}

} // namespace

int run_cli(int argc, const char* const* argv) {
  CLI::App app{
      "trainsim: how long will LLM training take, does it fit, and is the model right on my "
      "hardware.\nAnalytic cost model (params, FLOPs, memory, step time) with CUDA/NCCL "
      "validation."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trainsim 0.1.0");
  app.footer("Example: trainsim model --model llama3-8b --seq-len 8192");
  add_commands(app);
  require_finite_numbers(app);
  require_integers_in_range(app);
  // Runs after parsing, before the chosen command's callback.
  app.parse_complete_callback([&app] {
    for (const CLI::App* command : app.get_subcommands()) {
      check_outputs_differ(*command);
      for (const CLI::App* sub : command->get_subcommands())
        check_outputs_differ(*sub);
    }
  });
  OutputFiles outputs; // written beside their targets, renamed when the command succeeded
  try {
    check_no_empty_argument(argc, argv);
    check_command_name(app, argc, argv);
    app.parse(argc, argv);
    outputs.commit();
    return 0;
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 1;
  } catch (const ConfigError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", printable(e.what(), /*keep_newlines=*/true));
    return 1;
  } catch (const DeviceError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "device error: {}\n", printable(e.what(), /*keep_newlines=*/true));
    return 2;
  } catch (const CheckFailed& e) {
    std::fflush(stdout);
    fmt::print(stderr, "check failed: {}\n", printable(e.what(), /*keep_newlines=*/true));
    return 3;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "internal error: {}\n", printable(e.what(), /*keep_newlines=*/true));
    return 2;
  }
}

} // namespace trainsim::cli
