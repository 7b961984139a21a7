// Printable text and CSV fields (text.hpp).
#include "common/text.hpp"

#include <fmt/format.h>

namespace trainsim {
namespace {

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

void append_escaped(std::string& out, unsigned char c) {
  switch (c) {
  case '\n': out += "\\n"; break;
  case '\r': out += "\\r"; break;
  case '\t': out += "\\t"; break;
  default: out += fmt::format("\\x{:02x}", c);
  }
}

} // namespace

std::string printable(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_control(c) && !(keep_newlines && ch == '\n'))
      append_escaped(out, c);
    else
      out += ch;
  }
  return out;
}

std::string csv_field(std::string_view text) {
  std::string body;
  bool quote = false;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"') {
      body += "\"\"";
      quote = true;
    } else if (ch == ',' || ch == '\n' || ch == '\r') {
      body += ch;
      quote = true;
    } else if (is_control(c)) {
      append_escaped(body, c);
    } else {
      body += ch;
    }
  }
  return quote ? "\"" + body + "\"" : body;
}

} // namespace trainsim
