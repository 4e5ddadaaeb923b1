#include "model/step_profile.hpp"

#include "model/cuda_graph.hpp"

#include <ATen/DeviceAccelerator.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace genemask::model {

namespace {
bool contains_any(const std::string& s, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (s.find(p) != std::string::npos) return true;
  return false;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
/// An operator with its inputs: "aten::add(float[16384, 768], c10::BFloat16[16384, 768])".
std::string described(const torch::autograd::profiler::KinetoEvent& e) {
  std::string out = e.name();
  if (!e.hasShapes() && !e.hasTypes()) return out;
  const auto shapes = e.hasShapes() ? e.shapes() : c10::ArrayRef<std::vector<int64_t>>();
  const auto types = e.hasTypes() ? e.dtypes() : c10::ArrayRef<std::string>();
  out += "(";
  for (size_t i = 0; i < std::max(shapes.size(), types.size()); ++i) {
    if (i) out += ", ";
    if (i < types.size()) out += types[i];
    if (i < shapes.size() && !shapes[i].empty()) out += fmt::format("[{}]", fmt::join(shapes[i], ", "));
  }
  return out + ")";
}
}  // namespace

std::string profile_class(const std::string& raw, bool cuda) {
  const std::string n = lower(raw);
  if (cuda) {
    // Attention first: flash and memory-efficient kernels are built from CUTLASS too.
    if (contains_any(n, {"flash", "fmha", "attention", "attn", "sdpa"})) return "attention";
    if (contains_any(n, {"gemm", "nvjet", "xmma", "cutlass", "cublas", "gemv", "splitk"})) return "matmul";
    if (contains_any(n, {"adam", "multi_tensor_apply"})) return "optimizer";
    if (contains_any(n, {"memcpy", "memset", "copy"})) return "copies_casts";
    return "elementwise_norm";
  }
  // ATen's operators, and oneDNN's (mkldnn::, onednn::, aten::mkldnn_*): a bf16 product on a
  // CPU with AVX-512 runs as mkldnn::_linear_pointwise (model/linear_cpu.cpp), a product all
  // the same.
  std::string op = n;
  bool onednn = false;
  for (const std::string ns : {"aten::", "mkldnn::", "onednn::"})
    if (op.rfind(ns, 0) == 0) {
      onednn = ns != "aten::";
      op = op.substr(ns.size());
      break;
    }
  onednn = onednn || op.rfind("mkldnn_", 0) == 0 || op.rfind("_mkldnn_", 0) == 0 || op.rfind("onednn_", 0) == 0;
  if (contains_any(op, {"attention", "sdpa", "flash"})) return "attention";
  if (op == "mm" || op == "addmm" || op == "_addmm_activation" || op == "bmm" || op == "baddbmm" || op == "matmul" ||
      op == "linear" || op == "addmv" || op == "mv" || (onednn && contains_any(op, {"linear", "matmul", "gemm", "_mm"})))
    return "matmul";
  if (contains_any(op, {"adam", "_foreach"})) return "optimizer";
  if (op == "copy_" || op == "to" || op == "_to_copy" || op == "clone" || op == "contiguous" || op == "empty_strided" ||
      op == "cat" || contains_any(op, {"memcpy", "memset"}))
    return "copies_casts";
  return "elementwise_norm";
}

namespace {
void synchronize(const torch::Device& dev) {
  if (dev.is_cuda()) at::accelerator::synchronizeDevice(dev.index());
}
std::set<torch::profiler::impl::ActivityType> activities(const torch::Device& dev) {
  std::set<torch::profiler::impl::ActivityType> acts = {torch::profiler::impl::ActivityType::CPU};
  if (dev.is_cuda()) acts.insert(torch::profiler::impl::ActivityType::CUDA);
  return acts;
}
// Input shapes and dtypes: each costly entry then says which operator, on what, ran it.
torch::profiler::impl::ProfilerConfig profiler_config() {
  return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO,
                                               /*report_input_shapes=*/true);
}
StepProfile sort_events(const torch::autograd::profiler::ProfilerResult& result, bool cuda, int steps, double wall);
}  // namespace

ProfileWindow::ProfileWindow(const torch::Device& dev) : dev_(dev) {
  namespace kin = torch::autograd::profiler;
  kin::prepareProfiler(profiler_config(), activities(dev_));
  synchronize(dev_);
  kin::enableProfiler(profiler_config(), activities(dev_));
  open_ = true;
  t0_ = std::chrono::steady_clock::now();
  syncs_ = std::make_unique<HostSyncCounter>(dev_);
}

ProfileWindow::~ProfileWindow() {
  if (!open_) return;
  try {
    torch::autograd::profiler::disableProfiler();
  } catch (...) {  // a destructor on an early return (an error already on its way) does not throw
  }
}

StepProfile ProfileWindow::finish(int steps) {
  const int64_t syncs = syncs_->count();
  syncs_.reset();
  synchronize(dev_);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  open_ = false;
  auto result = torch::autograd::profiler::disableProfiler();
  StepProfile p = sort_events(*result, dev_.is_cuda(), std::max(1, steps), wall);
  if (syncs >= 0) p.host_syncs_per_step = static_cast<double>(syncs) / p.steps;
  return p;
}

StepProfile profile_steps(const std::function<void()>& step, int steps, const torch::Device& dev) {
  ProfileWindow w(dev);
  for (int i = 0; i < std::max(1, steps); ++i) step();
  return w.finish(steps);
}

namespace {
StepProfile sort_events(const torch::autograd::profiler::ProfilerResult& result, bool cuda, int steps, double wall) {
  namespace kin = torch::autograd::profiler;
  StepProfile p;
  p.cuda = cuda;
  p.steps = steps;
  p.step_s = wall / p.steps;

  std::map<std::string, double> by_class, by_name;
  for (const auto& c : profile_classes()) by_class[c] = 0;
  double busy = 0, count = 0;
  if (p.cuda) {
    // Device activity: kernels, copies, memsets (one stream: they do not overlap, but the
    // union is taken anyway). Idle = the wall time not covered by any of them. Each kernel
    // is named with the operator that launched it (by correlation id) and its inputs.
    std::map<uint64_t, const kin::KinetoEvent*> ops;
    for (const auto& e : result.events())
      if (e.deviceType() == c10::DeviceType::CPU && e.correlationId() != 0) ops[e.correlationId()] = &e;
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& e : result.events()) {
      if (e.deviceType() != c10::DeviceType::CUDA || e.endNs() <= e.startNs()) continue;
      const double s = static_cast<double>(e.durationNs()) * 1e-9;
      const std::string name = e.name();
      by_class[profile_class(name, true)] += s;
      const auto op = e.linkedCorrelationId() != 0 ? ops.find(e.linkedCorrelationId()) : ops.end();
      by_name[op == ops.end() ? name : name + "  <-  " + described(*op->second)] += s;
      spans.emplace_back(e.startNs(), e.endNs());
      count += 1;
    }
    std::sort(spans.begin(), spans.end());
    uint64_t end = 0;
    for (const auto& [a, b] : spans) {
      if (a >= end) busy += static_cast<double>(b - a) * 1e-9;
      else if (b > end) busy += static_cast<double>(b - end) * 1e-9;
      end = std::max(end, b);
    }
    by_class["idle"] = std::max(0.0, wall - busy);
  } else {
    // CPU operators: exclusive time (an operator's span less its children's on its thread).
    std::map<uint64_t, std::vector<const kin::KinetoEvent*>> threads;
    for (const auto& e : result.events())
      if (e.deviceType() == c10::DeviceType::CPU && e.endNs() > e.startNs()) threads[e.startThreadId()].push_back(&e);
    for (auto& [tid, evs] : threads) {
      std::sort(evs.begin(), evs.end(), [](auto* a, auto* b) {
        return a->startNs() != b->startNs() ? a->startNs() < b->startNs() : a->endNs() > b->endNs();
      });
      std::vector<std::pair<const kin::KinetoEvent*, double>> stack;  // event, children's time
      auto close = [&](uint64_t until) {
        while (!stack.empty() && stack.back().first->endNs() <= until) {
          const auto [e, kids] = stack.back();
          stack.pop_back();
          const double span = static_cast<double>(e->durationNs()) * 1e-9;
          const double own = std::max(0.0, span - kids);
          by_class[profile_class(e->name(), false)] += own;
          by_name[described(*e)] += own;
          if (!stack.empty()) stack.back().second += span;
          else busy += span;
          count += 1;
        }
      };
      for (const auto* e : evs) {
        close(e->startNs());
        stack.emplace_back(e, 0.0);
      }
      close(UINT64_MAX);
    }
    by_class["idle"] = 0;  // host threads overlap: no idle figure on the CPU
  }
  for (const auto& c : profile_classes()) p.seconds.emplace_back(c, by_class[c] / p.steps);
  std::vector<std::pair<std::string, double>> names(by_name.begin(), by_name.end());
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < names.size() && i < 15; ++i) p.top.emplace_back(names[i].first, names[i].second / p.steps);
  p.kernels_per_step = count / p.steps;
  return p;
}
}  // namespace

std::string StepProfile::to_json() const {
  nlohmann::ordered_json j;
  j["source"] = cuda ? "GPU kernels, copies and memsets (Kineto)" : "CPU operators' own time (Kineto)";
  j["steps"] = steps;
  j["step_s"] = step_s;
  j["events_per_step"] = kernels_per_step;
  j["host_syncs_per_step"] = host_syncs_per_step >= 0 ? nlohmann::ordered_json(host_syncs_per_step) : nullptr;
  nlohmann::ordered_json c = nlohmann::ordered_json::object();
  for (const auto& [k, v] : seconds) c[k] = v;
  j["seconds_per_step"] = c;
  nlohmann::ordered_json t = nlohmann::ordered_json::array();
  for (const auto& [k, v] : top) {
    // "kernel  <-  operator(inputs)": each part kept whole enough to read (kernel names are long).
    const auto cut = k.find("  <-  ");
    const std::string name = cut == std::string::npos ? k : k.substr(0, cut);
    nlohmann::ordered_json e = {{"name", name.size() > 200 ? name.substr(0, 200) : name}};
    if (cut != std::string::npos) {
      const std::string op = k.substr(cut + 6);
      e["op"] = op.size() > 400 ? op.substr(0, 400) : op;
    }
    e["s"] = v;
    t.push_back(e);
  }
  j["top"] = t;
  return j.dump();
}

}  // namespace genemask::model
