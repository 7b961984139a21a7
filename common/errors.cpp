// Problems: gather all validation failures of one input into a single ConfigError.
#include "common/errors.hpp"

namespace trainsim {

void Problems::throw_if_any() const {
  if (messages_.empty())
    return;
  std::string text;
  for (std::size_t i = 0; i < messages_.size(); ++i) {
    if (i)
      text += "\n";
    text += source_.empty() ? messages_[i] : source_ + ": " + messages_[i];
  }
  throw ConfigError(text);
}

} // namespace trainsim
