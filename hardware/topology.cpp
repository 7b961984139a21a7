// GPU-to-GPU links from `nvidia-smi topo -m` (topology.hpp).
#include "hardware/topology.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/errors.hpp"

namespace trainsim::hw {

std::vector<std::string> topology_links(const std::string& text, const std::string& file) {
  std::string clean; // drop ANSI escapes (nvidia-smi underlines the header)
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {
      while (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i])))
        ++i;
      continue;
    }
    clean += text[i];
  }
  auto is_device = [](const std::string& tok, const char* prefix) {
    const std::string p(prefix);
    return tok.size() > p.size() && tok.rfind(p, 0) == 0 &&
           std::all_of(tok.begin() + static_cast<std::ptrdiff_t>(p.size()), tok.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  std::vector<std::string> columns;
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream lines(clean);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> tok;
    for (std::string w; words >> w;)
      tok.push_back(w);
    if (tok.empty())
      continue;
    if (columns.empty() && is_device(tok[0], "GPU")) {
      for (const auto& t : tok) {
        if (!is_device(t, "GPU") && !is_device(t, "NIC"))
          break;
        columns.push_back(t);
      }
    } else if (!columns.empty() && is_device(tok[0], "GPU") && tok.size() > columns.size()) {
      rows[tok[0]] = std::vector<std::string>(
          tok.begin() + 1, tok.begin() + 1 + static_cast<std::ptrdiff_t>(columns.size()));
    }
  }
  std::vector<std::string> links;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const auto row = rows.find(columns[i]);
    if (row == rows.end())
      continue;
    for (std::size_t j = i + 1; j < columns.size(); ++j)
      if (is_device(columns[j], "GPU"))
        links.push_back(fmt::format("{}<->{} {}", columns[i], columns[j], row->second[j]));
  }
  if (links.empty())
    throw ConfigError(fmt::format("--topology {}: no GPU rows under a 'GPU0 GPU1 ...' header "
                                  "(expected the output of `nvidia-smi topo -m` on a machine "
                                  "with 2 or more GPUs)",
                                  file));
  return links;
}

} // namespace trainsim::hw
