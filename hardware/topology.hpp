// GPU-to-GPU links of a machine, from `nvidia-smi topo -m` output: what a collective fit
// records next to its measurements (calibrate --topology). Pure text parsing, no GPU.
#pragma once

#include <string>
#include <vector>

namespace trainsim::hw {

/// The header row names the columns (GPU0, GPU1, ..., NIC0, ...); each GPU row gives its link
/// to every column (X, NV18, PIX, SYS, ...); ANSI escapes (the underlined header) are dropped.
/// Returns "GPU0<->GPU1 NV18" per GPU pair. Throws ConfigError naming `file` when there is no
/// GPU row under such a header.
[[nodiscard]] std::vector<std::string> topology_links(const std::string& text,
                                                      const std::string& file);

} // namespace trainsim::hw
