#include "model/hf_io.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "genemask/tokenizer.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/safetensors.hpp"

namespace genemask::model {

void export_hf(BertForMaskedLM& model, const std::string& dir) {
  std::filesystem::create_directories(dir);
  {
    io::AtomicFile f(dir + "/config.json");
    f.stream() << model->config.to_json();
    f.commit();
  }
  write_vocab(dir + "/vocab.txt");
  std::vector<io::StTensor> tensors;
  for (const auto& p : model->named_parameters()) {
    auto t = p.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    io::StTensor s;
    s.name = p.key();
    s.dtype = "F32";
    s.shape = t.sizes().vec();
    s.data.resize(static_cast<size_t>(t.numel()) * sizeof(float));
    std::memcpy(s.data.data(), t.data_ptr<float>(), s.data.size());
    tensors.push_back(std::move(s));
  }
  io::write_safetensors(dir + "/model.safetensors", tensors);
}

void load_state(BertForMaskedLM& model, const std::string& source,
                const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  torch::NoGradGuard ng;
  auto params = model->named_parameters();
  std::set<std::string> loaded;
  for (const auto& [name, t] : tensors) {
    // Tied copies that HF checkpoints may carry.
    if (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias") continue;
    if (name.find("position_ids") != std::string::npos || name.rfind("bert.pooler.", 0) == 0) continue;
    auto* p = params.find(name);
    if (!p) throw io::InputError(source, fmt::format("unexpected tensor '{}' (not a BertForMaskedLM parameter)", name));
    if (p->sizes() != t.sizes())
      throw io::InputError(source, fmt::format("tensor '{}' has shape {}, the model expects {}", name,
                                               fmt::join(t.sizes().vec(), "x"), fmt::join(p->sizes().vec(), "x")));
    p->copy_(t.to(p->dtype()));
    loaded.insert(name);
  }
  for (const auto& p : params)
    if (!loaded.count(p.key())) throw io::InputError(source, fmt::format("tensor '{}' is missing", p.key()));
}

BertForMaskedLM import_hf(const std::string& dir) {
  const BertConfig c = BertConfig::from_json_file(dir + "/config.json");
  BertForMaskedLM model(c);
  const std::string path = dir + "/model.safetensors";
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (auto& s : io::read_safetensors(path)) {
    torch::ScalarType type;
    if (s.dtype == "F32") type = torch::kFloat32;
    else if (s.dtype == "F16") type = torch::kFloat16;
    else if (s.dtype == "BF16") type = torch::kBFloat16;
    else if (s.dtype == "I64") type = torch::kInt64;
    else throw io::InputError(path, fmt::format("tensor '{}': dtype {} is not supported", s.name, s.dtype));
    auto t = torch::empty(s.shape, torch::TensorOptions().dtype(type));
    std::memcpy(t.data_ptr(), s.data.data(), s.data.size());
    tensors.emplace_back(s.name, t);
  }
  load_state(model, path, tensors);
  return model;
}

}  // namespace genemask::model

#include "model/export.hpp"

namespace genemask::model {

std::string export_run(const std::string& run, const std::string& out_dir) {
  std::string src = run;
  if (!std::filesystem::exists(run + "/model.safetensors")) {
    int64_t best = -1;
    const std::filesystem::path d = std::filesystem::path(run) / "checkpoints";
    if (std::filesystem::exists(d))
      for (const auto& e : std::filesystem::directory_iterator(d)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("step-", 0) == 0 && n.find(".tmp") == std::string::npos && std::filesystem::exists(e.path() / "state.json"))
          best = std::max<int64_t>(best, std::stoll(n.substr(5)));
      }
    if (best < 0) throw io::InputError(run, "no complete checkpoint (checkpoints/step-*/state.json) and no model.safetensors");
    src = fmt::format("{}/checkpoints/step-{:08d}", run, best);
  }
  auto m = import_hf(src);
  export_hf(m, out_dir);
  return src;
}

}  // namespace genemask::model
