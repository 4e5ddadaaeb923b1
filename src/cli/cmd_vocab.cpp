// genemask vocab: DNABERT-6's vocabulary as vocab.txt.
#include "common.hpp"
#include "genemask/corpus/tokenizer.hpp"

namespace genemask::cli {

void register_vocab(CLI::App& app, Context& ctx) {
  auto out = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("vocab", "Write the DNABERT-6 vocabulary (vocab.txt, 4101 tokens)");
  sub->add_option("--out", *out, "output vocab.txt")->required();
  add_file_force_flag(sub, *force);
  sub->callback([out, force, &ctx] {
    ctx.outputs = {file_output("--out", *out, {io::OwnFile::Kind::sha256, vocab_sha256(), "genemask's vocab.txt"}, *force)};
    ctx.run = [out, &ctx] {
      if (ctx.rank != 0) return;
      write_vocab(*out);
      print_summary(ctx, {{"command", "vocab"}, {"out", *out}, {"tokens", kVocabSize}, {"sha256", vocab_sha256()}});
    };
  });
}

}  // namespace genemask::cli
