// JSON parsing with positions, strict object reading and name suggestions (json_io.hpp).
#include "common/json_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

namespace trainsim {

nlohmann::json parse_json_text(std::string_view text, std::string_view source) {
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the last byte read; convert it to line and column.
    std::size_t line = 1, column = 1;
    const std::size_t stop = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    for (std::size_t i = 0; i < stop; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line..";
    // keep only the reason after the last ": ".
    auto pos = what.rfind(": ");
    std::string reason = pos == std::string::npos ? what : what.substr(pos + 2);
    throw ConfigError(fmt::format("{}:{}:{}: malformed JSON: {}", source, line, column, reason));
  } catch (const nlohmann::json::exception& e) {
    // Other parser failures, e.g. out_of_range.406 for a number beyond a double ("4e4444").
    throw ConfigError(fmt::format("{}: malformed JSON: {}", source, e.what()));
  }
}

std::string read_input_file(const std::string& path) {
  namespace fs = std::filesystem;
  constexpr double kMiB = 1024.0 * 1024.0;
  const double limit_mib = static_cast<double>(kMaxInputFileBytes) / kMiB;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    throw ConfigError(fmt::format("{}: no such file", path));
  if (st.type() == fs::file_type::directory)
    throw ConfigError(fmt::format("{}: is a directory, expected a file", path));
  if (st.type() == fs::file_type::regular) {
    const std::uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > kMaxInputFileBytes)
      throw ConfigError(fmt::format("{}: is {:.1f} MiB: input files are limited to {:.0f} MiB",
                                    path, static_cast<double>(size) / kMiB, limit_mib));
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    throw ConfigError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  // Read at most one byte past the limit, so that a pipe or a device cannot run on forever.
  std::string text;
  char chunk[65536];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) {
    text.append(chunk, n);
    if (text.size() > kMaxInputFileBytes) {
      std::fclose(f);
      throw ConfigError(fmt::format("{}: more than {:.0f} MiB: input files are limited to that",
                                    path, limit_mib));
    }
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed)
    throw ConfigError(fmt::format("{}: cannot read: {}", path, std::strerror(err)));
  return text;
}

nlohmann::json load_json_file(const std::string& path) {
  return parse_json_text(read_input_file(path), path);
}

std::string optional_string(const nlohmann::json& j, const std::string& key,
                            const std::string& fallback, std::string_view where) {
  if (!j.is_object() || !j.contains(key))
    return fallback;
  if (!j[key].is_string())
    throw ConfigError(fmt::format("{}: {}: expected a string", where, key));
  return j[key].get<std::string>();
}

double optional_number(const nlohmann::json& j, const std::string& key, double fallback,
                       std::string_view where) {
  if (!j.is_object() || !j.contains(key))
    return fallback;
  if (!j[key].is_number())
    throw ConfigError(fmt::format("{}: {}: expected a number", where, key));
  return j[key].get<double>();
}

JsonObjectReader::JsonObjectReader(const nlohmann::json& object, Problems& problems)
    : object_(object), problems_(problems) {
  if (!object_.is_object())
    problems_.add("expected a JSON object at the top level");
}

const nlohmann::json* JsonObjectReader::find(std::string_view key, bool required) {
  seen_.insert(std::string(key));
  if (!object_.is_object())
    return nullptr;
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) {
    if (required)
      problems_.add(fmt::format("{}: missing required field", key));
    return nullptr;
  }
  return &*it;
}

bool JsonObjectReader::get(std::string_view key, std::int64_t& out, bool required) {
  const auto* v = find(key, required);
  if (!v)
    return false;
  if (v->is_number_integer()) {
    out = v->get<std::int64_t>();
    return true;
  }
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      out = static_cast<std::int64_t>(d);
      return true;
    }
  }
  problems_.add(fmt::format("{} = {}: expected an integer", key, v->dump()));
  return false;
}

bool JsonObjectReader::get(std::string_view key, double& out, bool required) {
  const auto* v = find(key, required);
  if (!v)
    return false;
  if (v->is_number()) {
    out = v->get<double>();
    if (std::isfinite(out))
      return true;
  }
  problems_.add(fmt::format("{} = {}: expected a finite number", key, v->dump()));
  return false;
}

bool JsonObjectReader::get(std::string_view key, double& out, const Interval& range,
                           bool required) {
  double v = 0;
  if (!get(key, v, required))
    return false;
  if (!check_range(problems_, key, v, range))
    return false;
  out = v;
  return true;
}

bool JsonObjectReader::get(std::string_view key, bool& out, bool required) {
  const auto* v = find(key, required);
  if (!v)
    return false;
  if (v->is_boolean()) {
    out = v->get<bool>();
    return true;
  }
  problems_.add(fmt::format("{} = {}: expected true or false", key, v->dump()));
  return false;
}

bool JsonObjectReader::get(std::string_view key, std::string& out, bool required) {
  const auto* v = find(key, required);
  if (!v)
    return false;
  if (v->is_string()) {
    out = v->get<std::string>();
    return true;
  }
  problems_.add(fmt::format("{} = {}: expected a string", key, v->dump()));
  return false;
}

const nlohmann::json* JsonObjectReader::take(std::string_view key) { return find(key, false); }

bool JsonObjectReader::has(std::string_view key) const {
  return object_.is_object() && object_.contains(std::string(key));
}

void JsonObjectReader::finish() {
  if (!object_.is_object())
    return;
  std::vector<std::string> known(seen_.begin(), seen_.end());
  for (const auto& [key, value] : object_.items()) {
    if (seen_.count(key))
      continue;
    auto near = nearest_names(key, known, 1);
    problems_.add(near.empty()
                      ? fmt::format("{}: unknown field", key)
                      : fmt::format("{}: unknown field (did you mean '{}'?)", key, near.front()));
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string>
nearest_names(std::string_view name, const std::vector<std::string>& candidates, std::size_t max) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(name, c);
    bool prefix =
        !name.empty() &&
        c.rfind(std::string(name.substr(0, std::min<std::size_t>(4, name.size()))), 0) == 0;
    if (d <= 3 || prefix)
      scored.emplace_back(prefix ? std::min<std::size_t>(d, 2) : d, c);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < max; ++i)
    out.push_back(scored[i].second);
  return out;
}

} // namespace trainsim
