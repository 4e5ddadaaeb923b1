#include "model/embed.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <numeric>
#include <thread>

#include "genemask/corpus/tokenizer.hpp"
#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/fasta.hpp"
#include "io/h5.hpp"
#include "io/task_table.hpp"
#include "io/text_source.hpp"
#include "model/hf_io.hpp"
#include "model/inputs.hpp"
#include "model/resources.hpp"
#include "model/runtime.hpp"

namespace genemask::model {
EmbedSummary embed(const EmbedOptions& o, MPI_Comm comm) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rank = hpc::comm_rank(comm), world = hpc::comm_size(comm);
  const auto [local_rank, local_size] = hpc::local_rank_size(comm);
  if (o.pooling != "cls" && o.pooling != "mean" && o.pooling != "both")
    throw std::invalid_argument(fmt::format("--pooling must be cls, mean or both, got '{}'", o.pooling));
  if (o.batch <= 0) throw std::invalid_argument(fmt::format("--batch must be positive, got {}", o.batch));
  set_intra_op_threads(o.threads, local_size, rank == 0);
  const bool bf16 = wants_bf16(o.precision, o.device);
  const torch::Device dev = pick_rank_device(o.device, local_rank);
  use_device(dev, /*tf32=*/false);  // full fp32: outputs match the CPU's within 1e-4
  EmbedSummary s;
  s.precision = precision_name(bf16);
  s.model_dir = resolve_model_dir(o.model);
  auto m = import_hf_encoder(s.model_dir);  // any BERT's encoder: a classifier's, a bare BertModel's
  m->to(dev);
  m->eval();
  const int64_t H = m->config.hidden_size, L = m->config.num_hidden_layers;
  if (o.layer < -(L + 1) || o.layer > L)
    throw std::invalid_argument(fmt::format("--layer {}: the model has layers 0 (embeddings) to {} (or -1 to -{})",
                                            o.layer, L, L + 1));
  const int64_t layer = o.layer < 0 ? L + 1 + o.layer : o.layer;
  const int64_t width = m->config.max_tokens();
  const int64_t stride = window_stride(o.stride, width);
  s.hidden = static_cast<uint64_t>(H);
  s.layer = layer;
  s.window_tokens = width;
  s.stride = stride;
  const SequenceInputs in = read_sequences(o.input);  // every rank parses; each embeds its share
  s.unknown_only = in.unknown_only.size();
  if (rank == 0) warn_unknown_only(in, o.input, "embeddings");

  // This rank's sequences by length; their windows in that order, so that a sequence's
  // windows are consecutive and its sums can be finished as soon as its last one is done.
  // Token ids are made per window from the bases (no copy of a sequence's tokens).
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(rank); i < in.seqs.size(); i += static_cast<size_t>(world)) mine.push_back(i);
  std::stable_sort(mine.begin(), mine.end(), [&](size_t a, size_t b) { return in.seqs[a].size() < in.seqs[b].size(); });
  const WindowPlan plan = plan_windows(in.seqs, mine, width, stride);
  const std::vector<Window>& windows = plan.windows;
  const std::vector<uint32_t>& nwin = plan.per_sequence;
  std::vector<uint64_t> ntok(mine.size());
  uint64_t my_tokens = 0, longest = 0;
  for (size_t j = 0; j < mine.size(); ++j) {
    ntok[j] = in.seqs[mine[j]].size() - (kTokenK - 1);
    my_tokens += ntok[j];
    longest = std::max(longest, ntok[j]);
  }
  uint64_t totals[3] = {plan.windows.size(), plan.long_sequences, plan.unknown_only_windows};
  hpc::allreduce_sum_u64(totals, 3, comm);
  s.windows = totals[0];
  s.long_sequences = totals[1];
  s.unknown_only_windows = totals[2];
  if (rank == 0) warn_unknown_only_windows(s.unknown_only_windows, o.input, "embeddings");
  const size_t Hs = static_cast<size_t>(H);
  {
    // What this rank will hold besides the input: one batch of windows through the model
    // (activations, the attention scores of a layer), the pooled vectors of its sequences,
    // and with --per-token every token's vector (twice: made and sent; rank 0 also gathers
    // and orders all of them) and the sums of its longest sequence.
    const double rows = static_cast<double>(std::min<int64_t>(o.batch, static_cast<int64_t>(windows.size())));
    const double positions = static_cast<double>(width + 2), Hd = static_cast<double>(H);
    const double heads = static_cast<double>(m->config.num_attention_heads);
    double need = rows * positions *
                  (4 * 8 * Hd + 4 * 2 * static_cast<double>(m->config.intermediate_size) + 4 * 2 * heads * positions);
    need += static_cast<double>(in.seqs.size()) * Hd * 4 * (rank == 0 ? 6 : 2);
    need += static_cast<double>(windows.size()) * sizeof(Window);
    std::string what = fmt::format("embedding its {} sequence(s) with a model of hidden size {}", in.seqs.size(), H);
    if (o.per_token) {
      uint64_t total_tokens = 0;
      for (const auto& q : in.seqs) total_tokens += q.size() - (kTokenK - 1);
      need += static_cast<double>(my_tokens) * Hd * 4 * 2 + static_cast<double>(longest) * (Hd * 8 + 4);
      if (rank == 0) need += static_cast<double>(total_tokens) * Hd * 4 * 2;
      what = fmt::format("--per-token output of {} token vectors of {} floats", total_tokens, H);
    }
    check_memory(o.input, static_cast<uint64_t>(need), what,
                 o.per_token ? "embed fewer or shorter sequences per run, or use --pooling mean/cls without --per-token "
                               "(their memory does not grow with the sequence length)"
                             : "use a smaller --batch, or embed fewer sequences per run");
  }
  // Per sequence: its [CLS] vector and the mean of its token vectors (a token's vector is
  // the mean over the windows that hold it), summed window by window in O(hidden) memory
  // whatever the sequence's length. --per-token also keeps each token's sum and count.
  std::vector<float> cls(mine.size() * Hs), mean(mine.size() * Hs);
  std::vector<std::vector<float>> token_vecs(o.per_token ? mine.size() : 0);
  std::vector<double> cls_acc(Hs), mean_acc(Hs), tok_acc;
  std::vector<uint32_t> tok_cnt;
  std::vector<int64_t> open_starts;  // window starts of the open sequence
  size_t open = SIZE_MAX, done_windows = 0;
  auto finish = [&](size_t j) {
    const size_t n = ntok[j];
    for (size_t h = 0; h < Hs; ++h) {
      cls[j * Hs + h] = static_cast<float>(cls_acc[h] / nwin[j]);
      mean[j * Hs + h] = static_cast<float>(mean_acc[h] / static_cast<double>(n));
    }
    if (!o.per_token) return;
    token_vecs[j].resize(n * Hs);
    for (size_t k = 0; k < n; ++k)
      for (size_t h = 0; h < Hs; ++h) token_vecs[j][k * Hs + h] = static_cast<float>(tok_acc[k * Hs + h] / tok_cnt[k]);
  };
  torch::NoGradGuard ng;
  for (size_t b = 0; b < windows.size(); b += static_cast<size_t>(o.batch)) {
    const size_t e = std::min(windows.size(), b + static_cast<size_t>(o.batch));
    int64_t widest = 0;
    for (size_t w = b; w < e; ++w) widest = std::max(widest, windows[w].len);
    const int64_t rows = static_cast<int64_t>(e - b), cols = widest + 2;
    auto ids = torch::zeros({rows, cols}, torch::kLong);
    auto mask = torch::zeros({rows, cols}, torch::kLong);
    fill_window_rows(in.seqs, mine, &windows[b], rows, cols, ids.data_ptr<int64_t>(), mask.data_ptr<int64_t>());
    torch::Tensor hid;
    {
      Autocast autocast(bf16);
      hid = m->bert->forward_layers(ids.to(dev), mask.to(dev), layer).to(torch::kCPU, torch::kFloat32).contiguous();
    }
    const float* hp = hid.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const Window& w = windows[b + static_cast<size_t>(r)];
      if (w.seq != open) {  // a new sequence starts here: its windows follow
        open = w.seq;
        std::fill(cls_acc.begin(), cls_acc.end(), 0.0);
        std::fill(mean_acc.begin(), mean_acc.end(), 0.0);
        open_starts = window_starts(static_cast<int64_t>(ntok[w.seq]), width, stride);
        if (o.per_token) {
          tok_acc.assign(ntok[w.seq] * Hs, 0.0);
          tok_cnt.assign(ntok[w.seq], 0);
        }
        done_windows = 0;
      }
      const float* row = hp + static_cast<size_t>(r * cols) * Hs;
      for (size_t h = 0; h < Hs; ++h) cls_acc[h] += row[h];
      for (int64_t k = 0; k < w.len; ++k) {
        const int64_t t = w.start + k;
        // Windows holding token t: those starting in [t - width + 1, t] (all but a lone
        // window are `width` long).
        const auto lo = std::lower_bound(open_starts.begin(), open_starts.end(), t - width + 1);
        const auto hi = std::upper_bound(open_starts.begin(), open_starts.end(), t);
        const double holding = static_cast<double>(hi - lo);
        const float* x = row + static_cast<size_t>(k + 1) * Hs;
        for (size_t h = 0; h < Hs; ++h) mean_acc[h] += x[h] / holding;
        if (o.per_token) {
          const size_t ts = static_cast<size_t>(t);
          ++tok_cnt[ts];
          for (size_t h = 0; h < Hs; ++h) tok_acc[ts * Hs + h] += x[h];
        }
      }
      if (++done_windows == nwin[w.seq]) finish(w.seq);
    }
    if (rank == 0 && o.progress) o.progress(static_cast<double>(e) / static_cast<double>(windows.size()));
  }

  // Gather (index, windows, cls, mean[, tokens]) of every rank onto rank 0, in input order.
  auto bytes = [](const auto& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0])); };
  std::vector<float> flat_tokens;
  for (size_t j = 0; j < mine.size() && o.per_token; ++j) {
    flat_tokens.insert(flat_tokens.end(), token_vecs[j].begin(), token_vecs[j].end());
    std::vector<float>().swap(token_vecs[j]);
  }
  token_vecs.clear();
  const auto all_idx = hpc::gather_bytes(bytes(mine), 0, comm);
  const auto all_win = hpc::gather_bytes(bytes(nwin), 0, comm);
  const auto all_ntok = hpc::gather_bytes(bytes(ntok), 0, comm);
  const auto all_cls = hpc::gather_bytes(bytes(cls), 0, comm);
  const auto all_mean = hpc::gather_bytes(bytes(mean), 0, comm);
  const auto all_tok = hpc::gather_bytes(o.per_token ? bytes(flat_tokens) : std::string(), 0, comm);
  s.sequences = in.seqs.size();
  s.ranks = world;
  if (rank == 0) {
    const size_t N = in.seqs.size();
    std::vector<float> out_cls(N * Hs), out_mean(N * Hs);
    std::vector<uint32_t> out_win(N);
    std::vector<uint64_t> out_ntok(N), offsets(N + 1, 0);
    for (size_t r = 0; r < all_idx.size(); ++r) {
      const auto* ix = reinterpret_cast<const size_t*>(all_idx[r].data());
      const size_t n = all_idx[r].size() / sizeof(size_t);
      for (size_t j = 0; j < n; ++j) {
        out_win[ix[j]] = reinterpret_cast<const uint32_t*>(all_win[r].data())[j];
        out_ntok[ix[j]] = reinterpret_cast<const uint64_t*>(all_ntok[r].data())[j];
        std::memcpy(out_cls.data() + ix[j] * Hs, reinterpret_cast<const float*>(all_cls[r].data()) + j * Hs, Hs * 4);
        std::memcpy(out_mean.data() + ix[j] * Hs, reinterpret_cast<const float*>(all_mean[r].data()) + j * Hs, Hs * 4);
      }
    }
    for (size_t i = 0; i < N; ++i) offsets[i + 1] = offsets[i] + out_ntok[i];
    s.tokens = offsets[N];
    std::vector<float> out_tok(o.per_token ? offsets[N] * Hs : 0);
    if (o.per_token)
      for (size_t r = 0; r < all_idx.size(); ++r) {
        const auto* ix = reinterpret_cast<const size_t*>(all_idx[r].data());
        const auto* src = reinterpret_cast<const float*>(all_tok[r].data());
        for (size_t j = 0; j < all_idx[r].size() / sizeof(size_t); ++j) {
          const size_t n = out_ntok[ix[j]];
          std::memcpy(out_tok.data() + offsets[ix[j]] * Hs, src, n * Hs * 4);
          src += n * Hs;
        }
      }
    io::TempOutput tmp(o.out);
    {
      io::h5::Handle f = io::h5::create_file(tmp.path());
      if (o.pooling != "mean") io::h5::write_f32_2d(f, "cls", out_cls.data(), N, Hs);
      if (o.pooling != "cls") io::h5::write_f32_2d(f, "mean", out_mean.data(), N, Hs);
      if (o.per_token) {
        io::h5::write_f32_2d(f, "tokens", out_tok.data(), offsets[N], Hs);
        io::h5::write_u64(f, "offsets", offsets.data(), N + 1);
      }
      io::h5::write_u32(f, "windows", out_win.data(), N);
      io::h5::write_strings(f, "ids", in.ids);
      io::h5::set_attr(f, "format", std::string("genemask-embeddings"));
      io::h5::set_attr(f, "format_version", uint64_t{2});
      io::h5::set_attr(f, "model", s.model_dir);
      io::h5::set_attr(f, "input", o.input);
      io::h5::set_attr(f, "layer", static_cast<uint64_t>(layer));
      io::h5::set_attr(f, "window_tokens", static_cast<uint64_t>(width));
      io::h5::set_attr(f, "stride", static_cast<uint64_t>(stride));
      io::h5::set_attr(f, "mean_over", std::string("6-mer tokens (not [CLS], [SEP] or padding)"));
      io::h5::set_attr(f, "command_line", o.command_line);
      io::h5::close_file(f);
    }
    tmp.commit();
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.seq_per_s = s.seconds > 0 ? static_cast<double>(s.sequences) / s.seconds : 0;
  return s;
}

}  // namespace genemask::model
