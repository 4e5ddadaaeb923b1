// genemask dataset splice: Splice-40-style donor / acceptor / non-splice windows from a
// genome and a GTF/GFF3 (the work is in genemask/splice.hpp; the writer is task_dataset).
#include <filesystem>
#include <fmt/format.h>
#include <iostream>

#include "dataset_cli.hpp"
#include "genemask/tasks/splice.hpp"

namespace genemask::cli {
namespace {

constexpr const char* kHelp = R"(Labels (the released Splice-40 order): 0 = acceptor, 1 = donor, 2 = non-splice.

Sites: every intron [a, b) (0-based) of a multi-exon transcript gives a donor and an acceptor;
on '+' the donor is at a and the acceptor at b, on '-' the donor is at b and the acceptor at a.
A site's window is the W bases genome[x - W/2, x + W/2) around its cut point x, reverse
complemented on '-': a donor window reads W/2 exon bases then W/2 intron bases, an acceptor
window W/2 intron bases then W/2 exon bases (5'->3' on the transcript's strand). The first
exon of a transcript has no acceptor, the last no donor; single-exon transcripts give no sites.

Non-splice: from each distinct intron, 2R windows on average (R = --negatives-per-site; the
default 0.5 gives about one per intron, as many as donors or acceptors), at random positions
(by --seed) inside the intron where the window [p, p + W] touches no exon boundary of any
transcript (either strand, single-exon ones too); reverse complemented on '-'.

Dropped and counted: windows running off a chromosome ("off_chromosome"), with a base other
than ACGT ("contains_n"); the same sequence more than once: kept once ("duplicate"), or, when
it carries two labels, dropped every time ("ambiguous"); beyond --max-per-class.
Annotation names are matched to the genome's records exactly, through --chrom-map, with or
without a "chr" prefix, or as RefSeq NC_ accessions. Split: a hash of (seed, sequence), so
adding data never moves an example. See docs/datasets.md.)";

struct Args {
  std::string genome, annotation;
  dataset::SpliceOptions splice;
  dataset::OutputOptions out;
};

void run_splice(const Args& a, const Context& ctx) {
  if (!dataset_single_process(ctx, "splice")) return;
  dataset::SpliceOptions o = a.splice;
  o.seed = a.out.seed;
  dataset::validate(o);
  dataset::OutputOptions oo = a.out;
  oo.builder = "splice";
  oo.inputs = {{"genome", a.genome}, {"annotation", a.annotation}};
  if (!o.chrom_map.empty()) oo.inputs["chrom_map"] = o.chrom_map;
  if (o.exon_feature != "exon") oo.inputs["exon_feature"] = o.exon_feature;
  oo.settings = {{"window_bp", std::to_string(o.window)},
                 {"labels", "0=acceptor,1=donor,2=non-splice"},
                 {"negatives_per_site", fmt::format("{}", o.negatives_per_site)},
                 {"max_per_class", std::to_string(o.max_per_class)},
                 {"skip_unknown_chromosomes", o.skip_unknown_chromosomes ? "true" : "false"}};
  const auto out_dir = prepare_dataset_output(oo);  // published once complete

  dataset::SpliceBuild b = dataset::build_splice_dataset(a.genome, a.annotation, o);
  const dataset::DatasetStats st = dataset::write_task_dataset(std::move(b.examples), oo, b.stats);
  out_dir->publish();

  const std::string details =
      std::string("labels: 0 = acceptor, 1 = donor, 2 = non-splice\n") +
      fmt::format("transcripts: {} ({} multi-exon, {} on unknown sequences skipped, {} unstranded)\n", b.transcripts,
                  b.multi_exon_transcripts, b.unknown_chromosome_transcripts, b.counts.unstranded_transcripts) +
      fmt::format("distinct sites: {} donor, {} acceptor; introns: {} ({} too short for a non-splice window)\n",
                  b.counts.donor_sites, b.counts.acceptor_sites, b.counts.introns, b.counts.introns_without_room);
  finish_dataset(ctx, st, oo, details,
                 {{"transcripts", b.transcripts},
                  {"multi_exon_transcripts", b.multi_exon_transcripts},
                  {"unknown_chromosome_transcripts", b.unknown_chromosome_transcripts},
                  {"unstranded_transcripts", b.counts.unstranded_transcripts},
                  {"donor_sites", b.counts.donor_sites},
                  {"acceptor_sites", b.counts.acceptor_sites},
                  {"introns", b.counts.introns},
                  {"introns_without_room", b.counts.introns_without_room}});
}

}  // namespace

void register_dataset_splice(CLI::App& dataset, Context& ctx) {
  auto a = std::make_shared<Args>();
  auto* sub = dataset.add_subcommand(
      "splice", "Splice-40 windows: donor (1), acceptor (0) and non-splice (2) windows from a GTF/GFF3");
  sub->footer(kHelp);
  sub->add_option("--genome", a->genome, "genome FASTA (.fa, .fa.gz, bgzip)")->required()->check(existing_file());
  sub->add_option("--annotation", a->annotation,
                  "GTF (name contains .gtf: exons grouped by transcript_id) or GFF3 (exons grouped by Parent), "
                  ".gz allowed")
      ->required()
      ->check(existing_file());
  sub->add_option("--window", a->splice.window, "window length in bases, even: W/2 on each side of the site")
      ->check(CLI::Range(uint64_t{6}, uint64_t{1} << 20))
      ->capture_default_str();
  sub->add_option("--negatives-per-site", a->splice.negatives_per_site,
                  "non-splice windows per site: each intron gives 2R on average (0.5: classes about balanced)")
      ->check(non_negative())
      ->capture_default_str();
  sub->add_option("--max-per-class", a->splice.max_per_class,
                  "keep at most N windows per class (chosen by a hash of seed and sequence); 0 = all")
      ->capture_default_str();
  sub->add_flag("--skip-unknown-chromosomes", a->splice.skip_unknown_chromosomes,
                "leave out transcripts on sequences the genome lacks (default: an error)");
  sub->add_option("--exon-feature", a->splice.exon_feature,
                  "feature type taken as exons: exon (default), or CDS for annotations with CDS lines only (the "
                  "splice sites are then those of coding exons: UTR introns are missed)")
      ->capture_default_str();
  sub->add_option("--chrom-map", a->splice.chrom_map, "\"input<TAB>genome\" sequence-name aliases")
      ->check(existing_file());
  add_dataset_output_options(sub, a->out, true);
  sub->callback([a, &ctx] {
    ctx.inputs = {{"--genome", a->genome}, {"--annotation", a->annotation}, {"--chrom-map", a->splice.chrom_map}};
    ctx.outputs = {{"--out", a->out.out, io::OutputKind::directory}};
    ctx.run = [a, &ctx] { run_splice(*a, ctx); };
  });
}

}  // namespace genemask::cli
