// genemask vocab: DNABERT-6's vocabulary as vocab.txt.
#include "common.hpp"
#include "genemask/corpus/tokenizer.hpp"

namespace genemask::cli {

void register_vocab(CLI::App& app, Context& ctx) {
  auto out = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("vocab", "Write the DNABERT-6 vocabulary (vocab.txt, 4101 tokens)");
  sub->add_option("--out", *out, "output vocab.txt")->required();
  sub->callback([out, &ctx] {
    ctx.outputs = {{"--out", *out, io::OutputKind::file}};
    ctx.run = [out, &ctx] {
      if (ctx.rank != 0) return;
      write_vocab(*out);
      print_summary(ctx, {{"command", "vocab"}, {"out", *out}, {"tokens", kVocabSize}, {"sha256", vocab_sha256()}});
    };
  });
}

}  // namespace genemask::cli
