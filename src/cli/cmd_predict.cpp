// genemask predict: a fine-tuned classifier on unlabelled sequences (via libgenemask_model.so).
#include "common.hpp"
#include "model/predict.hpp"
#include "model_plugin.hpp"

namespace genemask::cli {

void register_predict(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<model::PredictOptions>();
  auto* sub = app.add_subcommand("predict", "Class probabilities of unlabelled sequences from a classifier (MPI)");
  sub->add_option("--model", o->model,
                  "classifier directory: `finetune --save-model`, or a BertForSequenceClassification saved by "
                  "transformers")
      ->required()
      ->check(existing_directory());
  sub->add_option("--input", o->input, "FASTA, or a sequence table (raw bases or 6-mer text; a label column is ignored)")
      ->required()
      ->check(existing_file());
  sub->add_option("--out", o->out, "predictions.tsv: id, windows, prob_<class>..., predicted")->required();
  sub->add_option("--batch", o->batch, "windows per forward pass")->check(positive())->capture_default_str();
  sub->add_option("--stride", o->stride,
                  "tokens between window starts for sequences longer than the model (0: half a window, 255)")
      ->check(non_negative())
      ->capture_default_str();
  sub->add_option("--threads", o->threads, "intra-op threads per rank (0: cores / ranks per node; capped at the cores available)")->capture_default_str();
  sub->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  sub->add_option("--precision", o->precision, kPrecisionHelp)
      ->check(CLI::IsMember({"fp32", "bf16", "auto"}))
      ->capture_default_str();
  sub->footer("A sequence longer than the model (more than 510 6-mers) is scored in windows of 510 tokens, --stride "
              "apart, the last ending at its end; its probabilities are the mean over its windows.");
  auto progress = std::make_shared<ProgressOptions>(ProgressOptions{30, false});
  add_progress_options(sub, *progress);
  auto force = std::make_shared<bool>(false);
  add_file_force_flag(sub, *force);
  sub->callback([o, force, progress, &ctx] {
    ctx.inputs = {{"--model", o->model}, {"--input", o->input}};
    ctx.outputs = {file_output("--out", o->out, {io::OwnFile::Kind::first_line_prefix, "id\twindows\tprob_",
                                                 "a predictions.tsv of `genemask predict`"}, *force)};
    ctx.run = [o, progress, &ctx] {
      o->command_line = ctx.command_line;
      if (ctx.rank == 0) check_writable(o->out);
      model::PredictSummary s;
      Progress shown("predict", progress->interval_s, ctx.rank == 0 && !progress->quiet);  // rank 0's share of windows
      o->progress = [&shown](double f) { shown.update(f); };
      GENEMASK_MODEL_ENTRY(genemask_model_predict)(o.get(), MPI_COMM_WORLD, &s);
      shown.done();
      print_summary(ctx, {{"command", "predict"}, {"model", o->model}, {"input", o->input}, {"out", o->out},
                          {"sequences", s.sequences}, {"classes", s.classes}, {"windows", s.windows},
                          {"long_sequences", s.long_sequences}, {"unknown_only_sequences", s.unknown_only},
                          {"unknown_only_windows", s.unknown_only_windows}, {"window_tokens", s.window_tokens},
                          {"stride", s.stride}, {"ranks", s.ranks}, {"seconds", s.seconds},
                          {"sequences_per_s", s.seq_per_s}, {"precision", s.precision}});
    };
  });
}

}  // namespace genemask::cli
