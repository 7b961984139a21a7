// Text from input files made safe to print: names and values read from a file reach a
// terminal, a table or a CSV cell, and none of them may carry a control sequence or forge a line.
#pragma once

#include <string>
#include <string_view>

namespace trainsim {

/// `text` with every control character (below 0x20, and DEL) written as a visible escape:
/// "\n", "\r", "\t", or "\x1b"; other bytes as they are. With keep_newlines, "\n" stays a line
/// break (multi-line messages whose parts were made printable already).
[[nodiscard]] std::string printable(std::string_view text, bool keep_newlines = false);

/// One CSV field per RFC 4180: quoted when it holds a comma, a quote, CR or LF, quotes doubled.
/// Control characters other than CR and LF are escaped as printable() does.
[[nodiscard]] std::string csv_field(std::string_view text);

} // namespace trainsim
