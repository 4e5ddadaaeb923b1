#include "model/embed.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <numeric>
#include <thread>

#include "genemask/tokenizer.hpp"
#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/fasta.hpp"
#include "io/h5.hpp"
#include "io/task_table.hpp"
#include "io/text_source.hpp"
#include "model/hf_io.hpp"
#include "model/runtime.hpp"

namespace genemask::model {
namespace {

struct Inputs {
  std::vector<std::string> ids, seqs;
  std::vector<uint64_t> lines;  // table rows: line in the file (0 for FASTA records)
};

Inputs read_inputs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw io::InputError(path, "cannot open");
  char c = 0;
  while (in.get(c) && (c == '\n' || c == '\r' || c == ' ')) {
  }
  Inputs out;
  if (c == '>' || io::probe_file(path).compression != io::Compression::none) {
    for (auto& [name, seq] : io::read_fasta_all(path)) {
      out.ids.push_back(name);
      out.seqs.push_back(std::move(seq));
      out.lines.push_back(0);
    }
  } else {
    for (auto& r : io::read_task_table(path)) {
      out.ids.push_back(fmt::format("line{}", r.line));
      out.seqs.push_back(std::move(r.sequence));
      out.lines.push_back(r.line);
    }
  }
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    if (out.seqs[i].size() >= 6) continue;
    const std::string msg =
        fmt::format("sequence '{}' has {} bases; at least 6 (one 6-mer) are needed", out.ids[i], out.seqs[i].size());
    if (out.lines[i]) throw io::InputError(path, out.lines[i], msg);
    throw io::InputError(path, msg);
  }
  return out;
}

}  // namespace

EmbedSummary embed(const EmbedOptions& o, MPI_Comm comm) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rank = hpc::comm_rank(comm), world = hpc::comm_size(comm);
  const auto [local_rank, local_size] = hpc::local_rank_size(comm);
  set_intra_op_threads(o.threads, local_size);
  const bool bf16 = wants_bf16(o.precision, o.device);
  const torch::Device dev = pick_rank_device(o.device, local_rank);
  use_device(dev, /*tf32=*/false);  // full fp32: outputs match the CPU's within 1e-4
  EmbedSummary s;
  s.model_dir = resolve_model_dir(o.model);
  auto m = import_hf(s.model_dir);
  m->to(dev);
  m->eval();
  const int64_t H = m->config.hidden_size;
  s.hidden = static_cast<uint64_t>(H);
  const Inputs in = read_inputs(o.input);  // every rank parses; each embeds its share
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(rank); i < in.seqs.size(); i += static_cast<size_t>(world)) mine.push_back(i);
  std::sort(mine.begin(), mine.end(), [&](size_t a, size_t b) { return in.seqs[a].size() < in.seqs[b].size(); });
  std::vector<float> cls(mine.size() * static_cast<size_t>(H)), mean(cls.size());
  torch::NoGradGuard ng;
  uint64_t truncated = 0;
  for (size_t b = 0; b < mine.size(); b += static_cast<size_t>(o.batch)) {
    const size_t e = std::min(mine.size(), b + static_cast<size_t>(o.batch));
    std::vector<std::vector<uint16_t>> toks;
    size_t longest = 0;
    for (size_t j = b; j < e; ++j) {
      auto t = tokenize(in.seqs[mine[j]]);
      if (t.size() > static_cast<size_t>(kMaxTokens)) {
        t.resize(static_cast<size_t>(kMaxTokens));
        ++truncated;
      }
      longest = std::max(longest, t.size());
      toks.push_back(std::move(t));
    }
    const int64_t rows = static_cast<int64_t>(toks.size()), cols = static_cast<int64_t>(longest + 2);
    auto ids = torch::zeros({rows, cols}, torch::kLong);
    auto mask = torch::zeros({rows, cols}, torch::kLong);
    auto tokmask = torch::zeros({rows, cols}, torch::kFloat32);  // 6-mer positions only
    auto ia = ids.accessor<int64_t, 2>();
    auto ma = mask.accessor<int64_t, 2>();
    auto ta = tokmask.accessor<float, 2>();
    for (int64_t r = 0; r < rows; ++r) {
      const auto& t = toks[static_cast<size_t>(r)];
      ia[r][0] = kCls;
      ma[r][0] = 1;
      for (size_t k = 0; k < t.size(); ++k) {
        ia[r][static_cast<int64_t>(k) + 1] = t[k];
        ma[r][static_cast<int64_t>(k) + 1] = 1;
        ta[r][static_cast<int64_t>(k) + 1] = 1;
      }
      ia[r][static_cast<int64_t>(t.size()) + 1] = kSep;
      ma[r][static_cast<int64_t>(t.size()) + 1] = 1;
    }
    torch::Tensor h;
    {
      Autocast autocast(bf16);
      h = m->bert(ids.to(dev), mask.to(dev)).to(torch::kCPU, torch::kFloat32);
    }
    auto c = h.select(1, 0).contiguous();
    auto mn = ((h * tokmask.unsqueeze(-1)).sum(1) / tokmask.sum(1, true)).contiguous();
    std::memcpy(cls.data() + b * static_cast<size_t>(H), c.data_ptr<float>(), static_cast<size_t>(c.numel()) * sizeof(float));
    std::memcpy(mean.data() + b * static_cast<size_t>(H), mn.data_ptr<float>(), static_cast<size_t>(mn.numel()) * sizeof(float));
  }
  // Gather: (index, cls, mean) of every rank onto rank 0, placed in input order.
  auto pack = [&](const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); };
  std::string idx_bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(size_t));
  auto all_idx = hpc::gather_bytes(idx_bytes, 0, comm);
  auto all_cls = hpc::gather_bytes(pack(cls), 0, comm);
  auto all_mean = hpc::gather_bytes(pack(mean), 0, comm);
  s.truncated = static_cast<uint64_t>(hpc::allreduce_sum_double(static_cast<double>(truncated), comm));
  s.sequences = in.seqs.size();
  s.ranks = world;
  if (rank == 0) {
    const size_t N = in.seqs.size(), Hs = static_cast<size_t>(H);
    std::vector<float> out_cls(N * Hs), out_mean(N * Hs);
    for (size_t r = 0; r < all_idx.size(); ++r) {
      const auto* ix = reinterpret_cast<const size_t*>(all_idx[r].data());
      const size_t n = all_idx[r].size() / sizeof(size_t);
      const auto* pc = reinterpret_cast<const float*>(all_cls[r].data());
      const auto* pm = reinterpret_cast<const float*>(all_mean[r].data());
      for (size_t j = 0; j < n; ++j) {
        std::memcpy(out_cls.data() + ix[j] * Hs, pc + j * Hs, Hs * sizeof(float));
        std::memcpy(out_mean.data() + ix[j] * Hs, pm + j * Hs, Hs * sizeof(float));
      }
    }
    const std::string tmp = io::temp_name_for(o.out);
    try {
      io::h5::Handle f = io::h5::create_file(tmp);
      io::h5::write_f32_2d(f, "cls", out_cls.data(), N, Hs);
      io::h5::write_f32_2d(f, "mean", out_mean.data(), N, Hs);
      io::h5::write_strings(f, "ids", in.ids);
      io::h5::set_attr(f, "format", std::string("genemask-embeddings"));
      io::h5::set_attr(f, "format_version", uint64_t{1});
      io::h5::set_attr(f, "model", s.model_dir);
      io::h5::set_attr(f, "input", o.input);
      io::h5::set_attr(f, "mean_over", std::string("6-mer tokens (not [CLS], [SEP] or padding)"));
      io::h5::set_attr(f, "command_line", o.command_line);
    } catch (...) {
      std::remove(tmp.c_str());
      throw;
    }
    io::rename_or_throw(tmp, o.out);
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.seq_per_s = s.seconds > 0 ? static_cast<double>(s.sequences) / s.seconds : 0;
  return s;
}

}  // namespace genemask::model
