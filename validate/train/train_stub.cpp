// run_train_step without CUDA: the subcommand exists but says how to get the real thing.
#include "common/errors.hpp"
#include "validate/train/train.hpp"

namespace trainsim::val::train {

TrainResult run_train_step(const TrainOptions& o) {
  validate(o);
  throw DeviceError("built without CUDA; install the CUDA toolkit and rebuild");
}

} // namespace trainsim::val::train
