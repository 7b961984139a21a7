#include "simulate/alloc_program.hpp"

#include <array>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "model/load.hpp"

namespace trainsim::sim {

namespace {

using Kind = LayerAllocProgram::Kind;
using Until = LayerAllocProgram::Until;

constexpr std::array<const char*, LayerAllocProgram::num_parts> kPartNames{
    "embedding_forward", "head_forward", "head_backward", "embedding_backward"};

// A size's product: "1", or letters of B (micro-batch), S, D, F, H, V, P (one layer's
// parameters: 4 D x D + 3 D x F + 2 D) and R (the root unit's: 2 V x D + D).
bool valid_product(const std::string& product) {
  return !product.empty() && product.size() <= 8 &&
         product.find_first_not_of(product == "1" ? "1" : "BSDFHVPR") == std::string::npos;
}
constexpr const char* kProductRule = "must be \"1\" or letters of B, S, D, F, H, V, P, R";

// `part` >= 0: one of the parts around the layers, whose events may also be f_part, f_casts,
// f_last, and allocations affine in a product (["a", c, product, offset]).
AllocProgram::Pass
read_pass(const nlohmann::json* j, const std::string& what, Problems& p, int part = -1,
          std::vector<std::pair<std::int32_t, std::int32_t>>* top_prev = nullptr) {
  AllocProgram::Pass pass;
  if (j == nullptr || !j->is_object()) {
    p.add(fmt::format("{}: missing or not an object", what));
    return pass;
  }
  JsonObjectReader r(*j, p);
  const auto* events = r.take("events");
  const auto* kept = r.take("kept");
  const auto* top = top_prev ? r.take("top_prev") : nullptr;
  r.finish();
  if (top != nullptr) {
    if (!top->is_array()) {
      p.add(what + ".top_prev: must be an array of [block, head_backward block]");
    } else {
      for (const auto& pair : *top) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() ||
            !pair[1].is_number_integer() || pair[0].get<std::int64_t>() < 0 ||
            pair[1].get<std::int64_t>() < 0 || pair[0].get<std::int64_t>() > 1'000'000 ||
            pair[1].get<std::int64_t>() > 1'000'000) {
          p.add(what + ".top_prev: each entry is [block >= 0, head_backward block >= 0]");
          continue;
        }
        top_prev->emplace_back(static_cast<std::int32_t>(pair[0].get<std::int64_t>()),
                               static_cast<std::int32_t>(pair[1].get<std::int64_t>()));
      }
    }
  }
  if (events == nullptr || !events->is_array() || events->empty()) {
    p.add(fmt::format("{}.events: must be a non-empty array", what));
    return pass;
  }
  std::vector<char> alive; // per block: 1 made and not freed
  for (std::size_t i = 0; i < events->size(); ++i) {
    const auto& e = (*events)[i];
    const std::string at = fmt::format("{}.events[{}]", what, i);
    if (!e.is_array() || e.empty() || !e[0].is_string()) {
      p.add(at + ": must be [\"a\", coefficient, product], [\"f\", block], "
                 "[\"f_prev\", block] or [\"f_input\"]");
      continue;
    }
    const std::string op = e[0].get<std::string>();
    AllocProgram::Event ev;
    if (op == "a") {
      const bool affine = e.size() >= 4, streamed = e.size() == 5;
      if ((e.size() < 3 || e.size() > 5) || !e[1].is_number() || !e[2].is_string() ||
          !(e[1].get<double>() > 0 && e[1].get<double>() <= 1e10) ||
          (affine && (!e[3].is_number() || !(std::abs(e[3].get<double>()) <= 1e12))) ||
          (streamed && (!e[4].is_number_integer() || e[4].get<std::int64_t>() < 0 ||
                        e[4].get<std::int64_t>() > 1023))) {
        p.add(at + ": an allocation is [\"a\", coefficient in (0, 1e10], product], optionally "
                   "with an offset in [-1e12, 1e12] and a stream in [0, 1023] after it");
        continue;
      }
      ev.coefficient = e[1].get<double>();
      ev.product = e[2].get<std::string>();
      ev.offset = affine ? e[3].get<double>() : 0.0;
      ev.stream = streamed ? e[4].get<std::int64_t>() : 0;
      if (!valid_product(ev.product))
        p.add(fmt::format("{}: product \"{}\" {}", at, ev.product, kProductRule));
      ev.block = static_cast<std::int32_t>(alive.size());
      alive.push_back(1);
    } else if (op == "f" || (op == "f_prev" && part < 0)) {
      if (e.size() != 2 || !e[1].is_number_integer() || e[1].get<std::int64_t>() < 0 ||
          e[1].get<std::int64_t>() > 1'000'000) {
        p.add(at + ": a free is [\"" + op + "\", block number >= 0]");
        continue;
      }
      ev.kind = op == "f" ? Kind::free : Kind::free_prev;
      ev.block = static_cast<std::int32_t>(e[1].get<std::int64_t>());
      if (ev.kind == Kind::free) {
        if (static_cast<std::size_t>(ev.block) >= alive.size() ||
            !alive[static_cast<std::size_t>(ev.block)]) {
          p.add(
              fmt::format("{}: block {} is not alive here (not yet made, or freed)", at, ev.block));
          continue;
        }
        alive[static_cast<std::size_t>(ev.block)] = 0;
      }
    } else if (part >= 0 && op == "f_part") {
      if (e.size() != 3 || !e[1].is_string() || !e[2].is_number_integer() ||
          e[2].get<std::int64_t>() < 0 || e[2].get<std::int64_t>() > 1'000'000) {
        p.add(at + ": [\"f_part\", part name, block number >= 0]");
        continue;
      }
      const std::string name = e[1].get<std::string>();
      int which = -1;
      for (int k = 0; k < part; ++k)
        if (name == kPartNames[static_cast<std::size_t>(k)])
          which = k;
      if (which < 0) {
        p.add(fmt::format("{}: \"{}\" is not a part played before {}", at, name, what));
        continue;
      }
      ev.kind = Kind::free_part;
      ev.part = static_cast<std::int8_t>(which);
      ev.block = static_cast<std::int32_t>(e[2].get<std::int64_t>());
    } else if (part >= 0 && (op == "f_casts" || op == "f_last")) {
      if (op == "f_casts"
              ? e.size() != 1
              : (e.size() != 2 || !e[1].is_number_integer() || e[1].get<std::int64_t>() < 0 ||
                 e[1].get<std::int64_t>() > 1'000'000)) {
        p.add(at + ": [\"f_casts\"] or [\"f_last\", block number >= 0]");
        continue;
      }
      ev.kind = op == "f_casts" ? Kind::free_casts : Kind::free_last;
      if (op == "f_last")
        ev.block = static_cast<std::int32_t>(e[1].get<std::int64_t>());
    } else if ((op == "f_input_head" && part == LayerAllocProgram::head_forward) ||
               (op == "f_input_top" && part == LayerAllocProgram::head_backward)) {
      if (e.size() != 1) {
        p.add(at + ": [\"" + op + "\"] takes nothing more");
        continue;
      }
      ev.kind = op == "f_input_head" ? Kind::free_input_head : Kind::free_input_top;
    } else if (op == "f_input" && part < 0) {
      if (e.size() != 1) {
        p.add(at + ": [\"f_input\"] takes nothing more");
        continue;
      }
      ev.kind = Kind::free_input;
    } else {
      p.add(fmt::format("{}: unknown event \"{}\" (a, f, f_prev, f_input)", at, op));
      continue;
    }
    pass.events.push_back(std::move(ev));
  }
  pass.blocks = static_cast<std::int32_t>(alive.size());
  std::size_t inputs = 0;
  for (const auto& ev : pass.events)
    inputs += ev.kind == Kind::free_input ? 1 : 0;
  if (inputs > 1)
    p.add(fmt::format("{}: {} f_input events; a layer frees its input once", what, inputs));
  for (const auto& ev : pass.events)
    if (ev.kind == Kind::free_prev && ev.block >= pass.blocks)
      p.add(fmt::format("{}: f_prev of block {}, but the pass makes {} blocks", what, ev.block,
                        pass.blocks));
  if (kept == nullptr || !kept->is_array()) {
    p.add(fmt::format("{}.kept: must be an array", what));
    return pass;
  }
  static const std::map<std::string, Until, std::less<>> untils{{"forward_end", Until::forward_end},
                                                                {"layer_input", Until::layer_input},
                                                                {"next_layer", Until::next_layer},
                                                                {"step_end", Until::step_end}};
  for (std::size_t i = 0; i < kept->size(); ++i) {
    const auto& k = (*kept)[i];
    const std::string at = fmt::format("{}.kept[{}]", what, i);
    if (!k.is_object()) {
      p.add(at + ": must be {\"block\": N, \"until\": ...}");
      continue;
    }
    JsonObjectReader kr(k, p);
    std::int64_t block = -1;
    std::string until;
    kr.get("block", block, true);
    kr.get("until", until, true);
    kr.finish();
    const auto u = untils.find(until);
    if (u == untils.end()) {
      p.add(fmt::format("{}.until: \"{}\" is not forward_end, layer_input, next_layer or "
                        "step_end",
                        at, until));
      continue;
    }
    if (block < 0 || block >= pass.blocks || !alive[static_cast<std::size_t>(block)]) {
      p.add(fmt::format("{}.block: {} is not a block the pass makes and keeps", at, block));
      continue;
    }
    pass.kept.push_back({static_cast<std::int32_t>(block), u->second});
  }
  std::size_t kept_alive = 0;
  for (char c : alive)
    kept_alive += c ? 1 : 0;
  if (part < 0 && kept_alive != pass.kept.size())
    p.add(fmt::format("{}: {} blocks outlive the pass, {} listed in kept", what, kept_alive,
                      pass.kept.size()));
  return pass;
}

double product_value(const std::string& product, double b, double s, double d, double f, double h,
                     double v_size) {
  double v = 1;
  for (char c : product)
    v *= c == 'B'   ? b
         : c == 'S' ? s
         : c == 'D' ? d
         : c == 'F' ? f
         : c == 'H' ? h
         : c == 'V' ? v_size
         : c == 'P' ? 4 * d * d + 3 * d * f + 2 * d
         : c == 'R' ? 2 * v_size * d + d
                    : 1.0;
  return v;
}

} // namespace

const AllocProgram& load_alloc_program(const std::string& name_or_path) {
  // Read once per name (the generated step asks for it at every evaluation of a plan search);
  // entries of a std::map stay where they are, so the reference outlives later insertions.
  static std::mutex mu;
  static std::map<std::string, AllocProgram, std::less<>> cache;
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(name_or_path); it != cache.end())
      return it->second;
  }
  const std::string path = resolve_preset("alloc-programs", name_or_path, "allocation_program");
  AllocProgram prog = alloc_program_from_json(load_json_file(path), path);
  std::lock_guard lock(mu);
  return cache.emplace(name_or_path, std::move(prog)).first->second;
}

AllocProgram alloc_program_from_json(const nlohmann::json& j, const std::string& path) {
  Problems p(path);
  AllocProgram prog;
  if (!j.is_object()) {
    p.add("must be a JSON object");
    p.throw_if_any();
  }
  JsonObjectReader r(j, p);
  r.get("name", prog.name, true);
  r.get("source", prog.source, true);
  (void)r.take("fixed"); // the derivation's constant-sized blocks (documentation)
  const auto* applies = r.take("applies_to");
  const auto* fwd = r.take("forward");
  const auto* bwd = r.take("backward");
  const auto* first = r.take("first_step_blocks");
  const auto* init = r.take("init_blocks");
  // Eager programs: checked by the script (the reverse of making); FSDP2's: a recorded sequence.
  const auto* zero_grad = r.take("zero_grad_order");
  const auto* batch = r.take("batch_block");
  const auto* init_seq = r.take("init_sequence");
  std::string backward_windows = "all", forward_kept = "input";
  r.get("backward_windows", backward_windows);
  r.get("forward_kept", forward_kept);
  std::array<const nlohmann::json*, LayerAllocProgram::num_parts> parts{};
  for (std::size_t k = 0; k < parts.size(); ++k)
    parts[k] = r.take(kPartNames[k]);
  r.finish();
  if (applies == nullptr || !applies->is_object()) {
    p.add("applies_to: missing or not an object");
  } else {
    JsonObjectReader a(*applies, p);
    std::string framework, precision, attention, recompute;
    a.get("framework", framework, true);
    a.get("precision", precision, true);
    a.get("attention", attention, true);
    a.get("recompute", recompute, true);
    if (a.get("layer_like_model", prog.layer_like_model, true))
      check_data_preset_name(p, "layer_like_model", prog.layer_like_model);
    a.get("ffn_over_hidden", prog.ffn_over_hidden, Interval{0.01, 1e3, {}, false}, true);
    double head_dim = 0;
    a.get("head_dim", head_dim, Interval{1, 1e5, {}, false}, true);
    prog.head_dim = static_cast<std::int64_t>(head_dim);
    (void)a.take("models_recorded");
    double vocab = 0;
    if (a.get("vocab_size", vocab, Interval{1, 1e8, {}, false}))
      prog.vocab_size = static_cast<std::int64_t>(vocab);
    a.finish();
    if (framework != "pytorch" && framework != "fsdp")
      p.add(fmt::format("applies_to.framework: \"{}\"; programs are recorded for \"pytorch\" "
                        "or \"fsdp\"",
                        framework));
    prog.framework = framework;
    // The configurations a program may be recorded for (the generated step plays only these).
    if (precision != "bf16-mixed")
      p.add(fmt::format("applies_to.precision: \"{}\" (only \"bf16-mixed\")", precision));
    if (attention == "naive" || attention == "flash")
      prog.attention =
          attention == "naive" ? model::AttentionImpl::naive : model::AttentionImpl::flash;
    else
      p.add(fmt::format("applies_to.attention: \"{}\" (\"naive\" or \"flash\")", attention));
    if (recompute != "full")
      p.add(fmt::format("applies_to.recompute: \"{}\" (only \"full\")", recompute));
  }
  if (backward_windows != "all" && backward_windows != "middle")
    p.add(fmt::format("backward_windows: \"{}\" (\"all\" or \"middle\")", backward_windows));
  if (forward_kept != "input" && forward_kept != "output")
    p.add(fmt::format("forward_kept: \"{}\" (\"input\" or \"output\")", forward_kept));
  prog.middle_backward = backward_windows == "middle";
  prog.forward_keeps_output = forward_kept == "output";
  if (prog.middle_backward != prog.forward_keeps_output ||
      prog.middle_backward != (prog.framework == "fsdp"))
    p.add("backward_windows \"middle\" and forward_kept \"output\" come together, in the "
          "programs of framework fsdp only");
  if (zero_grad != nullptr && zero_grad->is_object() && zero_grad->contains("sequence")) {
    const auto& seq = (*zero_grad)["sequence"];
    bool ok = seq.is_array() && !seq.empty();
    for (std::size_t i = 0; ok && i < seq.size(); ++i) {
      const auto& x = seq[i];
      ok = x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_number_integer() &&
           x[1].get<std::int64_t>() >= 0 && x[1].get<std::int64_t>() <= 1'000'000;
      if (!ok)
        break;
      const std::string where = x[0].get<std::string>();
      LayerAllocProgram::ZeroGradFree z{-1, static_cast<std::int32_t>(x[1].get<std::int64_t>())};
      if (where != "window") {
        for (std::size_t k = 0; k < kPartNames.size(); ++k)
          if (where == kPartNames[k])
            z.part = static_cast<std::int8_t>(k);
        ok = z.part >= 0;
      }
      prog.zero_grad_sequence.push_back(z);
    }
    if (!ok)
      p.add("zero_grad_order.sequence: a non-empty array of [\"window\" or a part's name, "
            "block >= 0]");
  }
  if (init_seq != nullptr) {
    // Sections in play order; a free names a block of its own section or an earlier one
    // (create and shard are per layer: the same layer's block).
    static constexpr std::array<const char*, 5> kSections{"before", "create", "between", "shard",
                                                          "after"};
    std::array<std::vector<char>, 5> alive;
    if (!init_seq->is_object() || init_seq->size() != kSections.size())
      p.add("init_sequence: an object of before, create, between, shard and after event lists");
    for (std::size_t sec = 0; sec < kSections.size() && init_seq->is_object(); ++sec) {
      const std::string at_sec = fmt::format("init_sequence.{}", kSections[sec]);
      if (!init_seq->contains(kSections[sec]) || !(*init_seq)[kSections[sec]].is_array()) {
        p.add(at_sec + ": must be an array of events");
        continue;
      }
      const auto& list = (*init_seq)[kSections[sec]];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto& e = list[i];
        const std::string at = fmt::format("{}[{}]", at_sec, i);
        AllocProgram::InitEvent ev;
        if (e.is_array() && (e.size() == 3 || e.size() == 4) && e[0] == "a" && e[1].is_number() &&
            e[1].get<double>() > 0 && e[1].get<double>() <= 1e10 && e[2].is_string() &&
            valid_product(e[2].get<std::string>()) &&
            (e.size() == 3 || (e[3].is_number() && std::abs(e[3].get<double>()) <= 1e12))) {
          ev.size = {e[1].get<double>(), e[2].get<std::string>()};
          ev.offset = e.size() == 4 ? e[3].get<double>() : 0.0;
          alive[sec].push_back(1);
        } else if (e.is_array() && e.size() == 3 && e[0] == "f" && e[1].is_string() &&
                   e[2].is_number_integer()) {
          ev.alloc = false;
          const auto name = e[1].get<std::string>();
          for (std::size_t k = 0; k <= sec; ++k)
            if (name == kSections[k])
              ev.section = static_cast<std::int8_t>(k);
          const std::int64_t block = e[2].get<std::int64_t>();
          auto& owner = alive[static_cast<std::size_t>(std::max<std::int8_t>(ev.section, 0))];
          if (ev.section < 0 || block < 0 || static_cast<std::size_t>(block) >= owner.size() ||
              !owner[static_cast<std::size_t>(block)]) {
            p.add(fmt::format("{}: frees a block not alive (a section up to this one, a block "
                              "made and not freed)",
                              at));
            continue;
          }
          owner[static_cast<std::size_t>(block)] = 0;
          ev.block = static_cast<std::int32_t>(block);
        } else {
          p.add(at + ": [\"a\", coefficient in (0, 1e10], product(, offset)] or [\"f\", "
                     "section, block]");
          continue;
        }
        prog.init_sequence[sec].push_back(std::move(ev));
      }
    }
  }
  prog.forward = read_pass(fwd, "forward", p);
  prog.backward = read_pass(bwd, "backward", p, -1, &prog.top_prev);
  // The parts around the layers: all four or none, at a stated vocabulary.
  std::size_t given = 0;
  for (const auto* part : parts)
    given += part != nullptr ? 1 : 0;
  if (given != 0 && given != parts.size())
    p.add("the parts around the layers (embedding_forward, head_forward, head_backward, "
          "embedding_backward) come all four or not at all");
  if (given == parts.size()) {
    if (prog.vocab_size <= 0)
      p.add("applies_to.vocab_size: required with the parts around the layers");
    for (std::size_t k = 0; k < parts.size(); ++k)
      prog.around[k] = read_pass(parts[k], kPartNames[k], p, static_cast<int>(k));
    for (std::size_t k = 0; k < parts.size(); ++k) {
      for (const auto& e : prog.around[k].events) {
        if (e.kind == Kind::free_part &&
            e.block >= prog.around[static_cast<std::size_t>(e.part)].blocks)
          p.add(fmt::format("{}: f_part of block {} of {}, which makes {}", kPartNames[k], e.block,
                            kPartNames[static_cast<std::size_t>(e.part)],
                            prog.around[static_cast<std::size_t>(e.part)].blocks));
        if (e.kind == Kind::free_last && e.block >= prog.backward.blocks)
          p.add(fmt::format("{}: f_last of block {}, but a layer's backward makes {}",
                            kPartNames[k], e.block, prog.backward.blocks));
      }
      for (const auto& kept : prog.around[k].kept)
        if (kept.until != Until::step_end)
          p.add(fmt::format("{}.kept: only step_end (freed by zero_grad)", kPartNames[k]));
    }
    for (const auto& [k, j] : prog.top_prev)
      if (k >= prog.backward.blocks || j >= prog.around[LayerAllocProgram::head_backward].blocks)
        p.add(fmt::format("backward.top_prev: [{}, {}] names a block that is not made", k, j));
  } else if (!prog.top_prev.empty()) {
    p.add("backward.top_prev: only with the parts around the layers");
  }
  if (init != nullptr) {
    if (!init->is_object() || given != parts.size()) {
      p.add("init_blocks: an object of embedding, layer and rest lists, with the parts around "
            "the layers");
    } else {
      JsonObjectReader ir(*init, p);
      for (auto [key, into] :
           {std::pair{"embedding", &prog.init_embedding}, std::pair{"layer", &prog.init_layer},
            std::pair{"rest", &prog.init_rest}}) {
        const auto* list = ir.take(key);
        if (list == nullptr || !list->is_array()) {
          p.add(fmt::format("init_blocks.{}: must be an array of [coefficient, product]", key));
          continue;
        }
        for (const auto& x : *list) {
          if (!x.is_array() || x.size() != 2 || !x[0].is_number() || !x[1].is_string() ||
              !(x[0].get<double>() > 0 && x[0].get<double>() <= 1e12) ||
              !valid_product(x[1].get<std::string>())) {
            p.add(fmt::format("init_blocks.{}: each entry is [coefficient in (0, 1e12], product], "
                              "the product {}",
                              key, kProductRule));
            continue;
          }
          into->push_back({x[0].get<double>(), x[1].get<std::string>()});
        }
      }
      ir.finish();
    }
  }
  if (batch != nullptr && !batch->is_null()) {
    if (!batch->is_array() || batch->size() != 4 || !(*batch)[0].is_number() ||
        !(*batch)[1].is_string() || !(*batch)[2].is_number() || !(*batch)[3].is_string() ||
        (*batch)[1].get<std::string>() != "BS" || (*batch)[3].get<std::string>() != "B" ||
        !((*batch)[0].get<double>() > 0 && (*batch)[0].get<double>() <= 64) ||
        !((*batch)[2].get<double>() >= 0 && (*batch)[2].get<double>() <= 64)) {
      p.add("batch_block: [bytes per token id in (0, 64], \"BS\", the same per sequence, \"B\"]");
    } else {
      prog.batch_bytes_per_token = (*batch)[0].get<double>();
      prog.batch_bytes_per_sequence = (*batch)[2].get<double>();
    }
  }
  if (first != nullptr) {
    if (!first->is_array() || given != parts.size()) {
      p.add("first_step_blocks: an array of [part, before event, coefficient, product], with "
            "the parts around the layers");
    } else {
      for (std::size_t i = 0; i < first->size(); ++i) {
        const auto& f = (*first)[i];
        const std::string at = fmt::format("first_step_blocks[{}]", i);
        if (!f.is_array() || f.size() != 4 || !f[0].is_string() || !f[1].is_number_integer() ||
            !f[2].is_number() || !f[3].is_string() || f[1].get<std::int64_t>() < 0 ||
            !(f[2].get<double>() > 0 && f[2].get<double>() <= 1e12)) {
          p.add(at + ": [\"forward\" or a part, event >= 0, coefficient in (0, 1e12], product]");
          continue;
        }
        AllocProgram::FirstStepBlock b;
        const std::string where = f[0].get<std::string>();
        b.part = -2;
        if (where == "forward")
          b.part = -1;
        for (std::size_t k = 0; k < kPartNames.size(); ++k)
          if (where == kPartNames[k])
            b.part = static_cast<std::int8_t>(k);
        const auto& events = b.part == -1  ? prog.forward.events
                             : b.part >= 0 ? prog.around[static_cast<std::size_t>(b.part)].events
                                           : prog.forward.events;
        if (b.part == -2 || f[1].get<std::int64_t>() >= static_cast<std::int64_t>(events.size())) {
          p.add(fmt::format("{}: \"{}\" event {} is not an event of the forward or a part", at,
                            where, f[1].get<std::int64_t>()));
          continue;
        }
        b.before = static_cast<std::int32_t>(f[1].get<std::int64_t>());
        b.coefficient = f[2].get<double>();
        b.product = f[3].get<std::string>();
        if (!valid_product(b.product))
          p.add(fmt::format("{}: product \"{}\" {}", at, b.product, kProductRule));
        prog.first_step.push_back(std::move(b));
      }
    }
  }
  std::size_t inputs = 0;
  for (const auto& k : prog.forward.kept)
    inputs += k.until == Until::layer_input ? 1 : 0;
  if (inputs > 1)
    p.add("forward.kept: more than one layer_input block");
  for (const auto& k : prog.forward.kept)
    if (k.until == Until::next_layer)
      p.add("forward.kept: next_layer is a backward's (the gradient handed down)");
  for (const auto& k : prog.backward.kept)
    if (k.until == Until::layer_input || k.until == Until::forward_end)
      p.add("backward.kept: layer_input and forward_end are a forward's");
  for (const auto& e : prog.forward.events)
    if (e.kind == Kind::free_prev || e.kind == Kind::free_input)
      p.add("forward.events: a forward frees only its own blocks");
  p.throw_if_any();
  return prog;
}

std::optional<LayerAllocProgram> layer_alloc_program(const AllocProgram& program,
                                                     const model::ModelSpec& model,
                                                     const model::ParallelPlan& plan,
                                                     const model::TrainingSetup& setup) {
  if (setup.precision != program.precision || setup.attention != program.attention ||
      plan.recompute != program.recompute || plan.tp != 1 || plan.pp != 1 || plan.cp != 1 ||
      plan.ep != 1 || model.num_heads <= 0 || model.hidden_size <= 0)
    return std::nullopt;
  // An FSDP2 program was recorded on one GPU (its flat buffers are whole layers): world size 1.
  if (program.framework == "fsdp" && plan.num_gpus() != 1)
    return std::nullopt;
  if (std::abs(static_cast<double>(model.ffn_hidden_size) / static_cast<double>(model.hidden_size) -
               program.ffn_over_hidden) > 1e-9 ||
      model.hidden_size != program.head_dim * model.num_heads)
    return std::nullopt;
  // The layer's op roles, kinds and dtypes must be the recorded model's (one layer kind), and
  // so must what changes a layer's blocks without changing its ops: keys and values at every
  // query head's width, biases, the head width, RoPE over whole heads.
  auto roles_of = [&](const model::ModelSpec& m) {
    const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
    std::vector<std::array<int, 3>> r;
    if (ops.layers.size() != 1)
      return r;
    for (const auto& op : ops.layers[0].ops)
      r.push_back(
          {static_cast<int>(op.role), static_cast<int>(op.kind), static_cast<int>(op.dtype)});
    return r;
  };
  // The recorded model and its layer's roles, once per process and recorded configuration
  // (the roles depend on the attention and precision the program was recorded with, which
  // are this call's by the checks above; std::map entries stay put).
  struct Recorded {
    model::ModelSpec spec;
    std::vector<std::array<int, 3>> roles;
  };
  static std::mutex mu;
  static std::map<std::string, Recorded, std::less<>> recorded;
  const Recorded* like = nullptr;
  {
    std::lock_guard lock(mu);
    const std::string key =
        fmt::format("{}/{}/{}/{}", program.layer_like_model, static_cast<int>(program.attention),
                    static_cast<int>(program.precision), static_cast<int>(program.recompute));
    auto it = recorded.find(key);
    if (it == recorded.end()) {
      Recorded r{model::load_model(program.layer_like_model), {}};
      r.roles = roles_of(r.spec);
      it = recorded.emplace(key, std::move(r)).first;
    }
    like = &it->second;
  }
  auto kv_width = [](const model::ModelSpec& m) {
    return m.num_kv_heads > 0
               ? static_cast<double>(m.num_kv_heads) / static_cast<double>(m.num_heads)
               : 1.0;
  };
  const model::ModelSpec& l = like->spec;
  if (kv_width(model) != kv_width(l) || model.qkv_bias != l.qkv_bias ||
      model.out_bias != l.out_bias || model.mlp_bias != l.mlp_bias ||
      model.rotary_fraction != l.rotary_fraction || model.is_moe() || model.sliding_window != 0 ||
      (model.head_dim > 0 && model.head_dim != program.head_dim))
    return std::nullopt;
  const auto& want = like->roles;
  const auto have = roles_of(model);
  if (have.empty() || have != want)
    return std::nullopt;
  const double b = static_cast<double>(setup.micro_batch_size);
  const double s = static_cast<double>(setup.seq_len);
  const double d = static_cast<double>(model.hidden_size);
  const double f = static_cast<double>(model.ffn_hidden_size);
  const double h = static_cast<double>(model.num_heads);
  const double v = static_cast<double>(model.vocab_size);
  const bool around = program.vocab_size > 0 && model.vocab_size == program.vocab_size &&
                      !program.around[0].events.empty();
  // Middle windows alone leave out the top and bottom layers, which the parts hold (two
  // different layers: a one-layer model has no such step).
  if (program.middle_backward && (!around || model.num_layers < 2))
    return std::nullopt;
  auto bytes = [&](const AllocProgram::Event& e) {
    return e.coefficient * product_value(e.product, b, s, d, f, h, v) + e.offset;
  };
  // A block beyond what the allocator model takes (a configuration far outside any GPU): the
  // coarse step handles it.
  for (const auto* pass : {&program.forward, &program.backward})
    for (const auto& e : pass->events)
      if (e.kind == Kind::alloc && !(bytes(e) < kMaxTraceBlockBytes))
        return std::nullopt;
  if (around)
    for (const auto& pass : program.around)
      for (const auto& e : pass.events)
        if (e.kind == Kind::alloc && !(bytes(e) < kMaxTraceBlockBytes))
          return std::nullopt;
  LayerAllocProgram out;
  auto fill = [&](const AllocProgram::Pass& pass, std::vector<LayerAllocProgram::Event>& events) {
    events.reserve(pass.events.size());
    for (const auto& e : pass.events)
      events.push_back({e.kind, e.block, e.kind == Kind::alloc ? std::max(bytes(e), 1.0) : 0.0,
                        e.part, e.stream});
  };
  fill(program.forward, out.forward);
  fill(program.backward, out.backward);
  if (around) {
    for (std::size_t k = 0; k < out.around.size(); ++k) {
      fill(program.around[k], out.around[k].events);
      out.around[k].kept = program.around[k].kept;
      out.around[k].blocks = program.around[k].blocks;
    }
    out.top_prev = program.top_prev;
    // Before the first step: parameters (their sizes involve D, F or V) as the model registers
    // them; anything else made then is kept apart.
    auto init_list = [&](const std::vector<AllocProgram::Size>& from, std::vector<double>& params) {
      for (const auto& x : from) {
        const double bytes =
            std::max(x.coefficient * product_value(x.product, b, s, d, f, h, v), 1.0);
        if (x.product.find_first_of("DFVPR") != std::string::npos)
          params.push_back(bytes);
        else
          out.init_other.push_back(bytes);
      }
    };
    init_list(program.init_embedding, out.init_embedding);
    init_list(program.init_layer, out.init_layer);
    init_list(program.init_rest, out.init_rest);
    out.batch_bytes = program.batch_bytes_per_token * b * s + program.batch_bytes_per_sequence * b;
    for (const auto& fs : program.first_step)
      out.first_step.push_back(
          {fs.part, fs.before,
           std::max(fs.coefficient * product_value(fs.product, b, s, d, f, h, v), 1.0)});
  }
  if (around)
    for (std::size_t sec = 0; sec < program.init_sequence.size(); ++sec)
      for (const auto& e : program.init_sequence[sec])
        out.init_sequence[sec].push_back(
            {e.alloc,
             e.alloc
                 ? std::max(e.size.coefficient * product_value(e.size.product, b, s, d, f, h, v) +
                                e.offset,
                            1.0)
                 : 0.0,
             e.section, e.block});
  out.middle_backward = program.middle_backward;
  out.forward_keeps_output = program.forward_keeps_output;
  out.zero_grad_sequence = program.zero_grad_sequence;
  out.forward_kept = program.forward.kept;
  out.backward_kept = program.backward.kept;
  out.forward_blocks = program.forward.blocks;
  out.backward_blocks = program.backward.blocks;
  return out;
}

} // namespace trainsim::sim
