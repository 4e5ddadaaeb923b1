// genemask embed: sequence (and per-token) embeddings of a model, to HDF5 (MPI).
#include "common.hpp"
#include "model_plugin.hpp"

namespace genemask::cli {

void register_embed(CLI::App& app, Context& ctx) {
  auto eo = std::make_shared<model::EmbedOptions>();
  auto* em = app.add_subcommand("embed", "Sequence (and per-token) embeddings from a model, to HDF5 (MPI)");
  em->add_option("--model", eo->model,
                  "model directory (config.json + model.safetensors or pytorch_model.bin; its encoder is read: a "
                  "pretrained model, a classifier or a bare BertModel) or a pretrain run")
      ->required()
      ->check(existing_directory());
  em->add_option("--input", eo->input, "FASTA, or a sequence/label table (raw bases or 6-mer text)")
      ->required()
      ->check(existing_file());
  em->add_option("--out", eo->out, "output emb.h5: /cls, /mean float32 [N, hidden], /ids, /windows")->required();
  em->add_option("--layer", eo->layer, "hidden layer: 0 = embeddings, L = last; negative counts from the end")
      ->capture_default_str();
  em->add_option("--pooling", eo->pooling, "cls, mean or both")
      ->check(CLI::IsMember({"cls", "mean", "both"}))
      ->capture_default_str();
  em->add_flag("--per-token", eo->per_token, "also /tokens float32 [T, hidden] (one per 6-mer) and /offsets [N + 1]");
  em->add_option("--stride", eo->stride,
                 "tokens between window starts for sequences longer than the model (0: half a window, 255)")
      ->check(non_negative())
      ->capture_default_str();
  em->add_option("--batch", eo->batch, "windows per forward pass")->check(positive())->capture_default_str();
  em->add_option("--threads", eo->threads, "intra-op threads per rank (0: cores / ranks per node; capped at the cores available)")->capture_default_str();
  em->add_option("--device", eo->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  em->add_option("--precision", eo->precision, kPrecisionHelp)->check(CLI::IsMember({"fp32", "bf16", "auto"}))->capture_default_str();
  auto progress = std::make_shared<ProgressOptions>(ProgressOptions{30, false});
  add_progress_options(em, *progress);
  auto force = std::make_shared<bool>(false);
  add_file_force_flag(em, *force);
  em->callback([eo, force, progress, &ctx] {
    ctx.inputs = {{"--model", eo->model}, {"--input", eo->input}};
    ctx.outputs = {file_output("--out", eo->out,
                               {io::OwnFile::Kind::hdf5_format, "genemask-embeddings", "a genemask embeddings file"},
                               *force)};
    ctx.run = [eo, progress, &ctx] {
      eo->command_line = ctx.command_line;
      if (ctx.rank == 0) check_writable(eo->out);
      model::EmbedSummary s;
      Progress shown("embed", progress->interval_s, ctx.rank == 0 && !progress->quiet);  // rank 0's share of windows
      eo->progress = [&shown](double f) { shown.update(f); };
      GENEMASK_MODEL_ENTRY(genemask_model_embed)(eo.get(), MPI_COMM_WORLD, &s);
      shown.done();
      print_summary(ctx, {{"command", "embed"}, {"model", s.model_dir}, {"input", eo->input}, {"out", eo->out},
                          {"sequences", s.sequences}, {"hidden", s.hidden}, {"layer", s.layer},
                          {"windows", s.windows}, {"long_sequences", s.long_sequences}, {"unknown_only_sequences", s.unknown_only},
                          {"unknown_only_windows", s.unknown_only_windows}, {"tokens", s.tokens},
                          {"window_tokens", s.window_tokens}, {"stride", s.stride}, {"ranks", s.ranks},
                          {"precision", s.precision}, {"seconds", s.seconds}, {"sequences_per_s", s.seq_per_s}});
    };
  });
}

}  // namespace genemask::cli
