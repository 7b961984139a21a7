// JSON parsing with positions, strict object reading and name suggestions (json_io.hpp).
#include "common/json_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

#include "common/text.hpp"

#ifdef TRAINSIM_HAVE_ZLIB
#include <zlib.h>
#endif

namespace trainsim {

namespace {

// The parser's callback sees every container start and end and every key: it keeps one entry
// per open container (the keys seen, for an object) to refuse nesting and duplicate keys.
class StructureGuard {
 public:
  // Messages name "source" for a whole file, "source:line" for a line of a JSON-lines file.
  StructureGuard(std::string_view source, std::int64_t jsonl_line)
      : source_(jsonl_line > 0 ? fmt::format("{}:{}", source, jsonl_line) : std::string(source)) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
    case Event::object_start:
    case Event::array_start:
      if (open_.size() >= static_cast<std::size_t>(kMaxJsonDepth))
        throw ConfigError(fmt::format("{}: arrays and objects nested deeper than {} levels "
                                      "(under {}): input files are limited to that",
                                      source_, kMaxJsonDepth, path()));
      open_.push_back({event == Event::object_start, {}, {}});
      break;
    case Event::key: {
      Level& level = open_.back();
      level.key = parsed.get<std::string>();
      if (!level.keys.insert(level.key).second)
        throw ConfigError(fmt::format("{}: {}: key given twice in one object (JSON does not "
                                      "say which one counts; give it once)",
                                      source_, path()));
      break;
    }
    case Event::object_end:
    case Event::array_end:
      if (!open_.empty())
        open_.pop_back();
      break;
    case Event::value: break;
    }
    return true;
  }

 private:
  struct Level {
    bool is_object = false;
    std::set<std::string, std::less<>> keys;
    std::string key; // the last key read, for the path in messages
  };
  // "a.b.c": the keys leading to the current position (array levels not named).
  [[nodiscard]] std::string path() const {
    std::string p;
    for (const Level& l : open_) {
      if (!l.is_object || l.key.empty())
        continue;
      if (p.size() > 120)
        return printable(p) + "...";
      p += (p.empty() ? "" : ".") + (l.key.size() > 40 ? l.key.substr(0, 40) + "..." : l.key);
    }
    return p.empty() ? "the top level" : printable(p);
  }

  std::string source_;
  std::vector<Level> open_;
};

} // namespace

nlohmann::json parse_json_text(std::string_view text, std::string_view source,
                               std::int64_t jsonl_line) {
  try {
    return nlohmann::json::parse(text.begin(), text.end(), StructureGuard(source, jsonl_line),
                                 /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the last byte read; convert it to line and column.
    std::int64_t line = std::max<std::int64_t>(jsonl_line, 1);
    std::size_t column = 1;
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
    throw ConfigError(
        fmt::format("{}:{}:{}: malformed JSON: {}", source, line, column, printable(reason)));
  } catch (const nlohmann::json::exception& e) {
    // Other parser failures, e.g. out_of_range.406 for a number beyond a double ("4e4444").
    throw ConfigError(fmt::format("{}{}: malformed JSON: {}", source,
                                  jsonl_line > 0 ? fmt::format(":{}", jsonl_line) : "",
                                  printable(e.what())));
  }
}

std::string json_brief(const nlohmann::json& value) {
  constexpr std::size_t kMaxChars = 80;
  switch (value.type()) {
  case nlohmann::json::value_t::object:
  case nlohmann::json::value_t::array: {
    // A small container as written (values from files nest at most kMaxJsonDepth deep, so the
    // recursive dump is bounded); a large one by its size.
    if (value.size() <= 8) {
      const std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (text.size() <= kMaxChars)
        return text;
    }
    return fmt::format("{} of {} {}", value.is_object() ? "an object" : "an array", value.size(),
                       value.is_object() ? "keys" : "values");
  }
  case nlohmann::json::value_t::string: {
    const auto& s = value.get_ref<const std::string&>();
    if (s.size() <= kMaxChars)
      return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return nlohmann::json(s.substr(0, kMaxChars))
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        .insert(kMaxChars + 1, "...");
  }
  default: return value.dump(); // a number, a boolean or null: one token
  }
}

namespace {

// The text of a gzip stream (RFC 1952), at most kMaxInputFileBytes of it: a small file that
// would inflate past the limit is refused like a large one.
std::string gunzip(const std::string& data, const std::string& path) {
#ifdef TRAINSIM_HAVE_ZLIB
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    throw ConfigError(fmt::format("{}: cannot start reading it as gzip", path));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string text;
  char chunk[65536];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      throw ConfigError(fmt::format("{}: not a valid gzip stream ({})", path,
                                    rc == Z_BUF_ERROR ? "cut short" : "corrupt data"));
    }
    text.append(chunk, sizeof chunk - z.avail_out);
    if (text.size() > kMaxInputFileBytes) {
      inflateEnd(&z);
      throw ConfigError(fmt::format("{}: inflates to more than {:.0f} MiB: input files are "
                                    "limited to that",
                                    path, static_cast<double>(kMaxInputFileBytes) / (1 << 20)));
    }
  }
  inflateEnd(&z);
  return text;
#else
  (void)data;
  throw ConfigError(fmt::format("{}: gzip-compressed, and this build has no zlib (install "
                                "zlib1g-dev and rebuild)",
                                path));
#endif
}

} // namespace

std::string read_input_file(const std::string& path, bool regular_only) {
  namespace fs = std::filesystem;
  constexpr double kMiB = 1024.0 * 1024.0;
  const double limit_mib = static_cast<double>(kMaxInputFileBytes) / kMiB;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    throw ConfigError(fmt::format("{}: no such file", path));
  if (st.type() == fs::file_type::directory)
    throw ConfigError(fmt::format("{}: is a directory, expected a file", path));
  if (regular_only && st.type() != fs::file_type::regular)
    throw ConfigError(
        fmt::format("{}: not a regular file (a FIFO, a device or a socket): refused", path));
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
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b) // gzip's magic number
    return gunzip(text, path);
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
  problems_.add(fmt::format("{} = {}: expected an integer", key, json_brief(*v)));
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
  problems_.add(fmt::format("{} = {}: expected a finite number", key, json_brief(*v)));
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
  problems_.add(fmt::format("{} = {}: expected true or false", key, json_brief(*v)));
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
  problems_.add(fmt::format("{} = {}: expected a string", key, json_brief(*v)));
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
