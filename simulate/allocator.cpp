// The caching allocator model and the step's allocation sequence (allocator.hpp).
#include "simulate/allocator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "common/errors.hpp"
#include "common/json_io.hpp"

namespace trainsim::sim {

std::int64_t CachingAllocatorModel::round_request(std::int64_t bytes) {
  if (bytes < kMinBlockBytes)
    return kMinBlockBytes;
  return (bytes + kMinBlockBytes - 1) / kMinBlockBytes * kMinBlockBytes;
}

std::int64_t CachingAllocatorModel::segment_bytes(std::int64_t rounded) {
  if (rounded <= kSmallRequestBytes)
    return kSmallSegmentBytes;
  if (rounded < kMinLargeAllocBytes)
    return kLargeSegmentBytes;
  return (rounded + kLargeRoundingBytes - 1) / kLargeRoundingBytes * kLargeRoundingBytes;
}

void* CachingAllocatorModel::NodeRecycler::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (node_bytes_ == 0)
    node_bytes_ = bytes;
  if (bytes == node_bytes_ && !free_.empty()) {
    void* p = free_.back();
    free_.pop_back();
    return p;
  }
  return buffer_.allocate(bytes, alignment);
}

void CachingAllocatorModel::NodeRecycler::do_deallocate(void* p, std::size_t bytes,
                                                        std::size_t /*alignment*/) {
  if (bytes == node_bytes_)
    free_.push_back(p); // other sizes stay in the buffer until the model goes
}

// A free block's neighbours are blocks in use (free neighbours are merged), so whether it is a
// whole segment does not change while it is in its pool.
void CachingAllocatorModel::insert(Pool& p, const Key& k) {
  Block& b = blocks_[static_cast<std::size_t>(k[3])];
  b.at = p.insert(k).first;
  b.pooled = true;
  if (b.prev < 0 && b.next < 0)
    whole_free_.push_back(k[3]);
}

void CachingAllocatorModel::erase(BlockId id) {
  Block& b = blocks_[static_cast<std::size_t>(id)];
  if (!b.pooled)
    throw std::logic_error("CachingAllocatorModel: free block missing from its pool");
  pool(b.small).erase(b.at);
  b.pooled = false;
}

CachingAllocatorModel::BlockId CachingAllocatorModel::allocate(std::int64_t bytes,
                                                               std::int64_t stream) {
  const std::int64_t size = round_request(bytes);
  const bool small = size <= kSmallRequestBytes;
  auto& p = pool(small);
  BlockId id;
  auto it = p.lower_bound(Key{stream, size, std::numeric_limits<std::int64_t>::min(), 0});
  if (it != p.end() && (*it)[0] == stream) {
    id = (*it)[3];
    erase(id);
  } else {
    const std::int64_t seg = segment_bytes(size);
    if (cap_ > 0 && reserved_ + seg > cap_) {
      empty_cache();
      oom_ = oom_ || reserved_ + seg > cap_;
    }
    id = static_cast<BlockId>(blocks_.size());
    std::int64_t addr = 0;
    if (placement_ == SegmentPlacement::below) {
      below_addr_ -= seg;
      addr = below_addr_;
    } else {
      addr = above_addr_;
      above_addr_ += seg;
    }
    blocks_.push_back(Block{addr, seg, -1, -1, small, false, stream});
    reserved_ += seg;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    if (oom_ && stop_at_oom_)
      throw OutOfMemoryStop{}; // served beyond the cap, as the verdict reads it
  }
  Block& b = blocks_[static_cast<std::size_t>(id)];
  const std::int64_t rest = b.size - size;
  if ((small && rest >= kMinBlockBytes) || (!small && rest > kSmallRequestBytes)) {
    const auto rid = static_cast<BlockId>(blocks_.size());
    Block r{b.addr + size, rest, id, b.next, small, true, stream};
    if (b.next >= 0)
      blocks_[static_cast<std::size_t>(b.next)].prev = rid;
    b.next = rid;
    b.size = size;
    blocks_.push_back(r); // invalidates b
    insert(p, Key{stream, rest, r.addr, rid});
  }
  Block& got = blocks_[static_cast<std::size_t>(id)];
  got.free = false;
  allocated_ += got.size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  if (trace_)
    *trace_ += fmt::format("a {} {} {}\n", bytes, id, stream);
  return id;
}

void CachingAllocatorModel::empty_cache() {
  // An entry counts if its block is still a free whole segment in its pool (it may have been
  // taken since, or listed twice).
  for (const BlockId id : whole_free_) {
    const Block& b = blocks_[static_cast<std::size_t>(id)];
    if (b.pooled && b.prev < 0 && b.next < 0) {
      erase(id);
      reserved_ -= b.size;
    }
  }
  whole_free_.clear();
}

void CachingAllocatorModel::release(BlockId id) {
  if (id < 0 || static_cast<std::size_t>(id) >= blocks_.size() ||
      blocks_[static_cast<std::size_t>(id)].free)
    throw std::logic_error(fmt::format("CachingAllocatorModel: release of block {} not held", id));
  if (trace_)
    *trace_ += fmt::format("f {}\n", id);
  Block* b = &blocks_[static_cast<std::size_t>(id)];
  allocated_ -= b->size;
  auto& p = pool(b->small);
  // Merge with a free previous neighbour (which then stands for the merged block) and a free
  // next one.
  if (b->prev >= 0 && blocks_[static_cast<std::size_t>(b->prev)].free) {
    const BlockId pid = b->prev;
    Block& pb = blocks_[static_cast<std::size_t>(pid)];
    erase(pid);
    pb.size += b->size;
    pb.next = b->next;
    if (b->next >= 0)
      blocks_[static_cast<std::size_t>(b->next)].prev = pid;
    b->size = 0;
    id = pid;
    b = &pb;
  }
  if (b->next >= 0 && blocks_[static_cast<std::size_t>(b->next)].free) {
    const BlockId nid = b->next;
    Block& nb = blocks_[static_cast<std::size_t>(nid)];
    erase(nid);
    b->size += nb.size;
    b->next = nb.next;
    if (nb.next >= 0)
      blocks_[static_cast<std::size_t>(nb.next)].prev = id;
    nb.size = 0;
  }
  b->free = true;
  insert(p, Key{b->stream, b->size, b->addr, id});
}

TraceReplay replay_allocator_trace(const std::string& path, std::int64_t cap_bytes,
                                   bool empty_cache_at_start) {
  return replay_allocator_trace_text(read_input_file(path), path, cap_bytes, empty_cache_at_start);
}

TraceReplay replay_allocator_trace_text(std::string_view text, const std::string& path,
                                        std::int64_t cap_bytes, bool empty_cache_at_start) {
  std::istringstream in{std::string(text)};
  TraceReplay r;
  r.measured_peak_allocated_bytes = r.measured_peak_reserved_bytes =
      std::numeric_limits<double>::quiet_NaN();
  // As the driver placed the segments of the recorded steps (docs/frameworks.md, "The caching
  // allocator"), unless the header says otherwise (a generated step written by `trainsim memory
  // --allocator-trace-out` carries the placement it was played with; the header comes first).
  auto placement = CachingAllocatorModel::SegmentPlacement::below;
  if (text.starts_with("#")) {
    const auto end = text.find('\n');
    const auto doc =
        parse_json_text(text.substr(1, end == std::string_view::npos ? end : end - 1), path, 1);
    if (doc.is_object() && doc.contains("segment_placement")) {
      const auto& sp = doc["segment_placement"];
      if (!sp.is_string() || (sp != "above" && sp != "below"))
        throw ConfigError(
            fmt::format("{}:1: segment_placement must be \"above\" or \"below\"", path));
      if (sp == "above")
        placement = CachingAllocatorModel::SegmentPlacement::above;
    }
  }
  CachingAllocatorModel model(std::max<std::int64_t>(cap_bytes, 0), placement);
  std::unordered_map<std::int64_t, CachingAllocatorModel::BlockId> live;
  std::string line;
  std::int64_t n = 0, requested_bytes = 0;
  bool tried_failed_request = false;
  std::array<std::int64_t, 2> peaks_before_failed_request{};
  while (std::getline(in, line)) {
    ++n;
    if (line.empty())
      continue;
    auto bad = [&](const char* rule) {
      return ConfigError(fmt::format("{}:{}: '{}': {}", path, n, line.substr(0, 60), rule));
    };
    if (line[0] == '#') {
      const auto doc = parse_json_text(line.substr(1), path, n);
      if (!doc.is_object())
        throw bad("header must be '# ' and a JSON object");
      if (doc.contains("oom_request_bytes")) {
        // The request PyTorch could not serve under its cap (the trace ends there): under a
        // cap the model tries it too, and its verdict is whether it could; the peaks reported
        // are those before it, as PyTorch's are.
        const auto& q = doc["oom_request_bytes"];
        if (!q.is_number_integer() || q.get<std::int64_t>() < 0 ||
            q.get<std::int64_t>() > kMaxTraceBlockBytes)
          throw bad("oom_request_bytes must be an integer in [0, 2^50]");
        if (cap_bytes > 0 && !tried_failed_request) {
          tried_failed_request = true;
          peaks_before_failed_request = {model.peak_allocated_bytes(), model.peak_reserved_bytes()};
          (void)model.allocate(q.get<std::int64_t>());
        }
        continue;
      }
      if (doc.contains("id") && doc["id"].is_string())
        r.id = doc["id"].get<std::string>();
      if (doc.contains("phases") && doc["phases"].is_array() && !doc["phases"].empty()) {
        const auto& last = doc["phases"].back();
        if (last.contains("max_allocated_bytes") && last["max_allocated_bytes"].is_number())
          r.measured_peak_allocated_bytes = last["max_allocated_bytes"].get<double>();
        if (last.contains("max_reserved_bytes") && last["max_reserved_bytes"].is_number())
          r.measured_peak_reserved_bytes = last["max_reserved_bytes"].get<double>();
      }
      if (doc.contains("memory_cap_bytes")) {
        const auto& c = doc["memory_cap_bytes"];
        if (!c.is_number() || !(c.get<double>() > 0) ||
            c.get<double>() > static_cast<double>(kMaxTraceBlockBytes))
          throw bad("memory_cap_bytes must be a number in (0, 2^50]");
        r.recorded_cap_bytes = c.get<double>();
        if (doc.contains("out_of_memory")) {
          const auto& oom = doc["out_of_memory"];
          r.measured_out_of_memory = oom.is_null() ? 0 : 1;
          // The peaks when the step failed (past the last phase boundary it reached).
          if (oom.is_object() && oom.contains("max_allocated_bytes") &&
              oom["max_allocated_bytes"].is_number() && oom.contains("max_reserved_bytes") &&
              oom["max_reserved_bytes"].is_number()) {
            r.measured_peak_allocated_bytes = oom["max_allocated_bytes"].get<double>();
            r.measured_peak_reserved_bytes = oom["max_reserved_bytes"].get<double>();
          }
        }
      }
      continue;
    }
    std::istringstream s(line);
    char kind = 0;
    s >> kind;
    if (kind == 'a') {
      std::int64_t size = -1, id = -1, stream = 0;
      if (!(s >> size >> id) || size < 0 || id < 0 || size > kMaxTraceBlockBytes)
        throw bad("expected 'a SIZE ID [STREAM]' with 0 <= SIZE <= 2^50 (1 PiB) and ID >= 0");
      if (!(s >> stream)) {
        if (!s.eof())
          throw bad("STREAM must be an integer 0..1023");
        stream = 0; // older traces: one stream
      } else if (stream < 0 || stream > 1023) {
        throw bad("STREAM must be an integer 0..1023");
      } else {
        r.streams_recorded = true;
      }
      if (!(s >> std::ws).eof())
        throw bad("unexpected text after 'a SIZE ID [STREAM]'");
      if (live.count(id))
        throw bad("block ID allocated twice");
      // Sums stay far from overflow: what is live at once is a GPU's memory (at most 1 PiB),
      // and all the requests of one trace at most 2^61 bytes.
      if (model.allocated_bytes() + size > kMaxTraceBlockBytes)
        throw bad("the blocks live at once would exceed 2^50 bytes (1 PiB): not a GPU's memory");
      requested_bytes += size;
      if (requested_bytes > (std::int64_t{1} << 61))
        throw bad("the trace requests more than 2^61 bytes in all");
      live[id] = model.allocate(size, stream);
      ++r.events;
    } else if (kind == 'f') {
      std::int64_t id = -1;
      if (!(s >> id) || !(s >> std::ws).eof())
        throw bad("expected 'f ID'");
      auto it = live.find(id);
      if (it == live.end())
        throw bad("free of a block ID not allocated");
      model.release(it->second);
      live.erase(it);
      ++r.events;
    } else if (kind == 'm') {
      // A phase boundary "m STEP PHASE": the first step's start is where a probe's cache was
      // emptied.
      std::int64_t step = -1;
      std::string phase;
      if (!(s >> step >> phase) || step < 0 || !(s >> std::ws).eof())
        throw bad("expected 'm STEP PHASE' with STEP >= 0");
      if (empty_cache_at_start && !r.cache_emptied && step == 0 && phase == "start") {
        model.empty_cache();
        r.cache_emptied = true;
      }
    } else if (kind == 's' || kind == 'x') {
      // A segment PyTorch mapped ('s') or returned ('x'), as recorded: read for its form only
      // (the model places its own segments).
      std::int64_t size = -1;
      if (!(s >> size) || size < 0 || size > kMaxTraceBlockBytes || !(s >> std::ws).eof())
        throw bad("expected 's SIZE' or 'x SIZE' with 0 <= SIZE <= 2^50");
    } else {
      throw bad("a line is '#', 'a', 'f', 'm', 's' or 'x'");
    }
  }
  const auto peaks =
      tried_failed_request
          ? peaks_before_failed_request
          : std::array<std::int64_t, 2>{model.peak_allocated_bytes(), model.peak_reserved_bytes()};
  r.model_peak_allocated_bytes = static_cast<double>(peaks[0]);
  r.model_peak_reserved_bytes = static_cast<double>(peaks[1]);
  r.out_of_memory = model.out_of_memory();
  return r;
}

namespace {

// FNV-1a over every field: the plan search asks for the same tensors many times (plans that
// differ only in what does not change one GPU's tensors).
std::uint64_t fingerprint(const StepTensors& t) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 8; ++i) {
      h ^= (bits >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  auto mix_list = [&](const std::vector<double>& v) {
    mix(static_cast<double>(v.size()));
    for (double x : v)
      mix(x);
  };
  for (const auto* v :
       {&t.emb_params, &t.head_params, &t.layer_params, &t.emb_saved, &t.layer_saved, &t.head_saved,
        &t.layer_recomputed, &t.persistent, &t.layer_saved_plain})
    mix_list(*v);
  for (double x :
       {static_cast<double>(t.num_layers), t.weight_bytes_per_param, t.grad_bytes_per_param,
        t.state_bytes_per_param, static_cast<double>(t.num_states), t.transient_bytes_per_param,
        t.activation_grad_bytes, static_cast<double>(t.micro_batches_in_flight),
        static_cast<double>(t.steps), t.cap_bytes, t.layer_bwd_transient,
        t.layer_bwd_transient_block, static_cast<double>(t.fsdp2), t.unsharded_bytes_per_param,
        t.reduce_bytes_per_param, static_cast<double>(t.cast_on_gather),
        static_cast<double>(t.stop_at_out_of_memory), static_cast<double>(t.recomputed_layers),
        static_cast<double>(t.empty_cache_before_steps)})
    mix(x);
  return h;
}

// The step's requests through the allocator model, phase by phase (docs/frameworks.md, "The
// caching allocator"): the parameters, then per step the forward of every micro-batch in flight,
// the backward of the head and of each layer, and the optimizer step.
class StepPlayer {
 public:
  using Id = CachingAllocatorModel::BlockId;

  StepPlayer(CachingAllocatorModel& a, const StepTensors& t)
      : a_(a), t_(t), layers_(static_cast<std::size_t>(std::max<std::int64_t>(t.num_layers, 0))),
        in_flight_(std::max<std::int64_t>(t.micro_batches_in_flight, 1)),
        w_(t.unsharded_bytes_per_param), layer_unit_(sum(t.layer_params)),
        root_unit_(sum(t.emb_params) + sum(t.head_params)) {}

  void play() {
    parameters();
    for (std::int64_t step = 0; step < t_.steps; ++step) {
      Step s(in_flight_, layers_);
      forward(s);
      backward(s);
      optimizer(s);
      release_all(s.grads); // zero_grad(set_to_none=True)
    }
  }

 private:
  // What one step holds across its phases.
  struct Step {
    std::vector<Id> grads, root_grads;       // freed by zero_grad at the step's end
    std::vector<std::vector<Id>> emb, saved; // saved tensors, from forward to backward
    std::vector<Id> root; // FSDP2: the root unit's unsharded parameters, forward to backward
    Step(std::int64_t in_flight, std::size_t layers)
        : emb(static_cast<std::size_t>(in_flight)),
          saved(static_cast<std::size_t>(in_flight) * layers) {}
  };

  static double sum(const std::vector<double>& v) {
    double x = 0;
    for (double p : v)
      x += p;
    return x;
  }
  Id alloc(double bytes, std::int64_t stream = 0) {
    return a_.allocate(static_cast<std::int64_t>(std::ceil(bytes)), stream);
  }
  void alloc_all(const std::vector<double>& sizes, double per, std::vector<Id>& into) {
    for (double s : sizes)
      if (s * per > 0)
        into.push_back(alloc(s * per));
  }
  void release_all(std::vector<Id>& ids) {
    for (auto it = ids.rbegin(); it != ids.rend(); ++it)
      a_.release(*it);
    ids.clear();
  }
  // Whether layer l runs the policy's saved and re-made tensors (else layer_saved_plain).
  [[nodiscard]] bool policy(std::size_t l) const {
    return t_.recomputed_layers < 0 || l < static_cast<std::size_t>(t_.recomputed_layers);
  }
  // FSDP2: a unit's parameters gathered into unsharded tensors (each cast first when mixed).
  void gather(const std::vector<double>& sizes, std::vector<Id>& into) {
    for (double p : sizes) {
      if (p * w_ <= 0)
        continue;
      const Id cast = t_.cast_on_gather ? alloc(p * w_) : -1;
      into.push_back(alloc(p * w_));
      if (cast >= 0)
        a_.release(cast);
    }
  }
  // FSDP2: a unit's unsharded gradients copied into the reduce-scatter input, then its sharded
  // gradient made on the reduce-scatter stream.
  void reduce_scatter(double unit, std::vector<Id>& unsharded_grads, std::vector<Id>& into) {
    if (rs_input_ >= 0)
      a_.release(rs_input_);
    rs_input_ = unit * t_.reduce_bytes_per_param > 0 ? alloc(unit * t_.reduce_bytes_per_param) : -1;
    release_all(unsharded_grads);
    if (unit * t_.grad_bytes_per_param > 0)
      into.push_back(alloc(unit * t_.grad_bytes_per_param, 1));
  }

  // Parameters in model order, then persistent buffers.
  void parameters() {
    alloc_all(t_.emb_params, t_.weight_bytes_per_param, keep_);
    for (std::int64_t l = 0; l < t_.num_layers; ++l)
      alloc_all(t_.layer_params, t_.weight_bytes_per_param, keep_);
    alloc_all(t_.head_params, t_.weight_bytes_per_param, keep_);
    alloc_all(t_.persistent, 1.0, keep_);
    if (t_.empty_cache_before_steps)
      a_.empty_cache();
  }

  // Forward of every micro-batch in flight: saved tensors stay until backward.
  void forward(Step& s) {
    if (t_.fsdp2) {
      gather(t_.emb_params, s.root);
      gather(t_.head_params, s.root);
    }
    for (std::int64_t mb = 0; mb < in_flight_; ++mb) {
      alloc_all(t_.emb_saved, 1.0, s.emb[static_cast<std::size_t>(mb)]);
      for (std::size_t l = 0; l < layers_; ++l) {
        std::vector<Id> unsharded;
        if (t_.fsdp2)
          gather(t_.layer_params, unsharded);
        alloc_all(policy(l) ? t_.layer_saved : t_.layer_saved_plain, 1.0,
                  s.saved[static_cast<std::size_t>(mb) * layers_ + l]);
        release_all(unsharded);
      }
    }
  }

  // Backward of the newest micro-batch first: the head, then the layers in reverse, each
  // freeing its tensors as its gradients appear; the gradient between layers is handed down.
  void backward(Step& s) {
    std::vector<Id> head;
    alloc_all(t_.head_saved, 1.0, head);
    if (t_.fsdp2)
      alloc_all(t_.head_params, w_, s.root_grads);
    else
      alloc_all(t_.head_params, t_.grad_bytes_per_param, s.grads);
    flowing_ = t_.activation_grad_bytes > 0 ? alloc(t_.activation_grad_bytes) : -1;
    release_all(head);
    for (std::int64_t mb = in_flight_ - 1; mb >= 0; --mb) {
      for (std::size_t l = layers_; l-- > 0;)
        layer_backward(s, mb, l);
      release_all(s.emb[static_cast<std::size_t>(mb)]);
    }
    if (flowing_ >= 0)
      a_.release(flowing_);
    flowing_ = -1;
    if (t_.fsdp2) {
      alloc_all(t_.emb_params, w_, s.root_grads);
      reduce_scatter(root_unit_, s.root_grads, s.grads);
      if (rs_input_ >= 0)
        a_.release(rs_input_);
      rs_input_ = -1;
      release_all(s.root);
    } else {
      alloc_all(t_.emb_params, t_.grad_bytes_per_param, s.grads);
    }
  }

  void layer_backward(Step& s, std::int64_t mb, std::size_t l) {
    std::vector<Id> unsharded, unsharded_grads;
    if (t_.fsdp2)
      gather(t_.layer_params, unsharded);
    std::vector<Id> remade;
    if (policy(l))
      alloc_all(t_.layer_recomputed, 1.0, remade);
    if (t_.fsdp2)
      alloc_all(t_.layer_params, w_, unsharded_grads);
    else if (mb == in_flight_ - 1)
      alloc_all(t_.layer_params, t_.grad_bytes_per_param, s.grads);
    if (t_.layer_bwd_transient > 0) {
      std::vector<Id> transient;
      const double block =
          t_.layer_bwd_transient_block > 0 ? t_.layer_bwd_transient_block : t_.layer_bwd_transient;
      for (double left = t_.layer_bwd_transient; left > 0; left -= block)
        transient.push_back(alloc(std::min(left, block)));
      release_all(transient);
    }
    const Id next = t_.activation_grad_bytes > 0 ? alloc(t_.activation_grad_bytes) : -1;
    if (flowing_ >= 0)
      a_.release(flowing_);
    flowing_ = next;
    release_all(remade);
    release_all(s.saved[static_cast<std::size_t>(mb) * layers_ + l]);
    if (t_.fsdp2) {
      if (mb == 0) // FSDP2 reduces once, after the last micro-batch's backward
        reduce_scatter(layer_unit_, unsharded_grads, s.grads);
      else
        release_all(unsharded_grads); // accumulated into the unsharded gradient
      release_all(unsharded);
    }
  }

  // Optimizer step: states at the first step, then the temporaries of every tensor at once.
  void optimizer(Step&) {
    auto each_param = [&](auto&& f) {
      for (double p : t_.emb_params)
        f(p);
      for (std::size_t l = 0; l < layers_; ++l)
        for (double p : t_.layer_params)
          f(p);
      for (double p : t_.head_params)
        f(p);
    };
    if (!states_) {
      each_param([&](double p) {
        for (std::int64_t k = 0; k < t_.num_states; ++k)
          if (p * t_.state_bytes_per_param > 0)
            keep_.push_back(alloc(p * t_.state_bytes_per_param));
      });
      states_ = true;
    }
    std::vector<Id> temps;
    each_param([&](double p) {
      if (p * t_.transient_bytes_per_param > 0)
        temps.push_back(alloc(p * t_.transient_bytes_per_param));
    });
    release_all(temps);
  }

  CachingAllocatorModel& a_;
  const StepTensors& t_;
  const std::size_t layers_;
  const std::int64_t in_flight_;
  const double w_;                      // FSDP2: bytes per unsharded parameter
  const double layer_unit_, root_unit_; // FSDP2: parameters of a layer's unit and the root's
  std::vector<Id> keep_;                // parameters, buffers and optimizer states: kept
  bool states_ = false;                 // the optimizer states were made
  Id rs_input_ = -1; // FSDP2: the last reduce-scatter input, alive until the next unit's
  Id flowing_ = -1;  // the gradient handed from layer to layer
};

void play_step(CachingAllocatorModel& a, const StepTensors& t) { StepPlayer(a, t).play(); }

AllocatorPeaks run_step_allocator(const StepTensors& t, std::string* trace = nullptr) {
  CachingAllocatorModel a(static_cast<std::int64_t>(std::max(t.cap_bytes, 0.0)),
                          CachingAllocatorModel::SegmentPlacement::above);
  a.record_to(trace);
  a.stop_at_out_of_memory(t.stop_at_out_of_memory);
  try {
    play_step(a, t);
  } catch (const CachingAllocatorModel::OutOfMemoryStop&) {
    // the verdict is known: the step does not fit under the cap
  }
  return {static_cast<double>(a.peak_allocated_bytes()),
          static_cast<double>(a.peak_reserved_bytes()), a.out_of_memory()};
}

} // namespace

std::string step_allocator_trace(const StepTensors& t) {
  std::string trace;
  (void)run_step_allocator(t, &trace);
  return trace;
}

namespace {
// A per-thread cache keyed by the tensors' fingerprint (a collision would need two different
// tensor lists with one 64-bit FNV hash): fits ask for the same step many times.
std::unordered_map<std::uint64_t, AllocatorPeaks>& peaks_cache() {
  thread_local std::unordered_map<std::uint64_t, AllocatorPeaks> cache;
  return cache;
}
} // namespace

void clear_allocator_cache() { peaks_cache().clear(); }

AllocatorPeaks simulate_step_allocator(const StepTensors& t) {
  auto& cache = peaks_cache();
  const std::uint64_t key = fingerprint(t);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  if (cache.size() > 4096)
    cache.clear();
  const AllocatorPeaks p = run_step_allocator(t);
  cache.emplace(key, p);
  return p;
}

} // namespace trainsim::sim
