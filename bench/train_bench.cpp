// One MLM training step of a named config on CPU (forward, backward, AdamW), timed.
// Usage: train_bench CONFIG THREADS BATCH SEQ STEPS   -> one JSON line
#include <chrono>
#include <cstdio>
#include <string>

#include "model/bert.hpp"

using namespace genemask::model;

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "logo";
  const int threads = argc > 2 ? std::stoi(argv[2]) : 1;
  const int64_t batch = argc > 3 ? std::stoll(argv[3]) : 10, seq = argc > 4 ? std::stoll(argv[4]) : 512;
  const int steps = argc > 5 ? std::stoi(argv[5]) : 5;
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  BertConfig cfg = BertConfig::named(name);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  m->train();
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(4e-4).betas({0.9, 0.98}).eps(1e-6).weight_decay(0.01));
  auto ids = torch::randint(5, 4101, {batch, seq}, torch::kLong);
  auto mask = torch::ones({batch, seq}, torch::kLong);
  auto labels = torch::where(torch::rand({batch, seq}) < 0.15, ids, torch::full({batch, seq}, -100, torch::kLong));
  auto step = [&] {
    opt.zero_grad();
    // The trainer's loss: the decoder on the masked positions only (HF: on every position).
    auto loss = m->masked_lm_loss_sum(ids, mask, labels) / (labels != -100).sum();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(m->parameters(), 1.0);
    opt.step();
  };
  step();  // warm-up
  double best = 1e9;
  for (int i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("{\"impl\":\"genemask\",\"config\":\"%s\",\"threads\":%d,\"step_s\":%.4f,\"tokens_per_s\":%.0f}\n",
              name.c_str(), threads, best, static_cast<double>(batch * seq) / best);
  return 0;
}
