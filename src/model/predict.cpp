#include "io/table_text.hpp"
#include "model/predict.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>

#include "genemask/corpus/tokenizer.hpp"
#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "model/classifier.hpp"
#include "model/inputs.hpp"
#include "model/runtime.hpp"

namespace genemask::model {

PredictSummary predict(const PredictOptions& o, MPI_Comm comm) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rank = hpc::comm_rank(comm), world = hpc::comm_size(comm);
  const auto [local_rank, local_size] = hpc::local_rank_size(comm);
  if (o.batch <= 0) throw std::invalid_argument(fmt::format("--batch must be positive, got {}", o.batch));
  set_intra_op_threads(o.threads, local_size, rank == 0);
  const bool bf16 = wants_bf16(o.precision, o.device);
  const torch::Device dev = pick_rank_device(o.device, local_rank);
  use_device(dev, /*tf32=*/false);
  std::vector<std::string> names;
  auto model = load_classifier_hf(o.model, &names);
  model->to(dev);
  model->eval();
  const int64_t C = static_cast<int64_t>(names.size());
  const int64_t width = model->config.max_tokens();
  const int64_t stride = window_stride(o.stride, width);
  PredictSummary s;
  s.precision = precision_name(bf16);
  s.window_tokens = width;
  s.stride = stride;
  s.classes = static_cast<uint64_t>(C);

  const SequenceInputs in = read_sequences(o.input);  // every rank parses; each scores its share
  s.unknown_only = in.unknown_only.size();
  if (rank == 0) warn_unknown_only(in, o.input, "probabilities");
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(rank); i < in.seqs.size(); i += static_cast<size_t>(world)) mine.push_back(i);
  // Token ids are made per window from the bases (no copy of a sequence's tokens).
  WindowPlan plan = plan_windows(in.seqs, mine, width, stride);
  std::vector<Window>& windows = plan.windows;
  uint64_t totals[3] = {plan.windows.size(), plan.long_sequences, plan.unknown_only_windows};
  hpc::allreduce_sum_u64(totals, 3, comm);
  s.windows = totals[0];
  s.long_sequences = totals[1];
  s.unknown_only_windows = totals[2];
  if (rank == 0) warn_unknown_only_windows(s.unknown_only_windows, o.input, "probabilities");
  std::stable_sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) { return a.len < b.len; });
  std::vector<double> sums(mine.size() * static_cast<size_t>(C), 0.0);
  std::vector<uint32_t> counts(mine.size(), 0);
  torch::NoGradGuard ng;
  for (size_t b = 0; b < windows.size(); b += static_cast<size_t>(o.batch)) {
    const size_t e = std::min(windows.size(), b + static_cast<size_t>(o.batch));
    const int64_t rows = static_cast<int64_t>(e - b), cols = windows[e - 1].len + 2;
    auto ids = torch::zeros({rows, cols}, torch::kLong);
    auto mask = torch::zeros({rows, cols}, torch::kLong);
    fill_window_rows(in.seqs, mine, &windows[b], rows, cols, ids.data_ptr<int64_t>(), mask.data_ptr<int64_t>());
    torch::Tensor p;
    {
      Autocast autocast(bf16);
      p = torch::softmax(model->forward(ids.to(dev), mask.to(dev)).to(torch::kDouble), -1).to(torch::kCPU).contiguous();
    }
    const double* pp = p.data_ptr<double>();
    for (int64_t r = 0; r < rows; ++r) {
      const size_t j = windows[b + static_cast<size_t>(r)].seq;
      for (int64_t c = 0; c < C; ++c) sums[j * static_cast<size_t>(C) + static_cast<size_t>(c)] += pp[r * C + c];
      ++counts[j];
    }
    if (rank == 0 && o.progress) o.progress(static_cast<double>(e) / static_cast<double>(windows.size()));
  }
  for (size_t j = 0; j < mine.size(); ++j)
    for (int64_t c = 0; c < C; ++c) sums[j * static_cast<size_t>(C) + static_cast<size_t>(c)] /= counts[j];

  // Gather (index, windows, probabilities) onto rank 0, in input order.
  auto bytes = [](const auto& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  const auto all_idx = hpc::gather_bytes(bytes(mine), 0, comm);
  const auto all_counts = hpc::gather_bytes(bytes(counts), 0, comm);
  const auto all_probs = hpc::gather_bytes(bytes(sums), 0, comm);
  s.sequences = in.seqs.size();
  s.ranks = world;
  if (rank == 0) {
    const size_t N = in.seqs.size();
    std::vector<double> probs(N * static_cast<size_t>(C));
    std::vector<uint32_t> nwin(N);
    for (size_t r = 0; r < all_idx.size(); ++r) {
      const auto* ix = reinterpret_cast<const size_t*>(all_idx[r].data());
      const auto* cn = reinterpret_cast<const uint32_t*>(all_counts[r].data());
      const auto* pr = reinterpret_cast<const double*>(all_probs[r].data());
      for (size_t j = 0; j < all_idx[r].size() / sizeof(size_t); ++j) {
        nwin[ix[j]] = cn[j];
        std::memcpy(probs.data() + ix[j] * static_cast<size_t>(C), pr + j * static_cast<size_t>(C),
                    static_cast<size_t>(C) * sizeof(double));
      }
    }
    io::AtomicFile f(o.out);
    auto& out = f.stream();
    out << "id\twindows";
    for (const auto& n : names) out << '\t' << io::tsv_field("prob_" + n);
    out << "\tpredicted\n";
    for (size_t i = 0; i < N; ++i) {
      const double* p = probs.data() + i * static_cast<size_t>(C);
      out << io::tsv_field(in.ids[i]) << '\t' << nwin[i];
      for (int64_t c = 0; c < C; ++c) out << '\t' << fmt::format("{}", p[c]);
      out << '\t' << io::tsv_field(names[static_cast<size_t>(std::max_element(p, p + C) - p)]) << '\n';
    }
    f.commit();
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.seq_per_s = s.seconds > 0 ? static_cast<double>(s.sequences) / s.seconds : 0;
  return s;
}

}  // namespace genemask::model
