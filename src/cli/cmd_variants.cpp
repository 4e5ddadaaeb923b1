// genemask variants: the paper's variant analysis (appendix, after DNABERT): the change of
// a fine-tuned classifier's probability between the reference and the alternative allele
// window of each variant, variants ranked by |delta|, and the top-N overlap with another
// ranking. Reading, ranking and comparing are here; scoring is in libgenemask_model.so.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <set>

#include "io/table_text.hpp"
#include "io/task_table.hpp"
#include "common.hpp"
#include "io/annotation.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/parse_number.hpp"
#include "io/vcf.hpp"
#include "io/text_source.hpp"
#include "model/variants.hpp"
#include "model_plugin.hpp"
#include "io/json.hpp"

namespace genemask::cli {
namespace {

struct VariantsArgs {
  model::VariantScoreOptions score;
  std::string variants, genome, window, out, compare, top = "10,100,1000";
  int64_t flank = -1;
  bool force = false;
};

constexpr const char* kHelp = R"(Input: --variants V.vcf (.vcf.gz; CHROM POS ID REF ALT, POS 1-based; one row per ALT
allele; SNVs, MNVs and indels; symbolic alleles skipped and counted) with --genome and a
window: --flank N (N bases each side: 2N+1 for a SNV) or --window A:B (bases POS+A .. POS+B
around a SNV, e.g. -249:50 = 300 bp like Prom-300; for longer REF alleles B counts from
REF's last base). ref = window with REF, alt = the same flanks around ALT. REF must equal
the genome (else an error with both). Windows running off a chromosome are skipped and
counted. Or --variants V.tsv (name ending .tsv/.txt): header id ref_sequence alt_sequence.
Output OUT/variants.tsv: id chrom pos ref alt p_ref p_alt delta rank, where p = softmax
probability of --class (default: class index 1), delta = p_alt - p_ref, rank 1 = largest
|delta| (ties: input order). --compare R.tsv (another variants.tsv, or any TSV with an id
column or chrom/pos/ref/alt columns and a rank or delta column): for each N of --top,
overlap = |top N of ours ∩ top N of R| / N, in OUT/compare.tsv and summary.json.
Variants are matched by chrom:pos:ref:alt (chr prefix ignored) when both files have
them, else by id. One process (no MPI); --threads for cores, batches sorted by length.)";

std::string num(double v) { return fmt::format("{}", v); }


/// A variant's site as two rankings may both spell it: the chromosome as the genome lookup
/// matches names (io::seqid_key: chr1 and 1, chrM and MT are one), and the alleles upper-cased.
std::string chrom_key(const std::string& c, const std::string& pos, const std::string& ref, const std::string& alt) {
  std::string alleles = ref + ":" + alt;
  for (auto& ch : alleles) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return io::seqid_key(c) + ":" + pos + ":" + alleles;
}

/// A ranking read back: keys in rank order (both kinds of key when available).
struct Ranking {
  std::vector<std::string> by_site, by_id;  // by_site empty when the file lacks the columns
};

Ranking read_ranking(const std::string& path) {
  io::check_input_type(path);
  struct Row {
    std::string site, id;
    double order;
    uint64_t line;
  };
  std::vector<Row> rows;
  std::vector<std::string> h;
  std::map<std::string, size_t> col;
  bool header = false, site = false, sites_complete = false, bad_quote = false;
  // Plain or compressed, as every table reader takes it (io::for_each_table_line: a byte-order
  // mark, '\r' line ends and zero bytes handled, a last line without its end said).
  io::for_each_table_line(path, [&](const std::string& line, uint64_t lineno) {
    if (!header) {
      header = true;
      h = io::split_quoted_fields(line, '\t', bad_quote);
      for (size_t i = 0; i < h.size(); ++i) col[h[i]] = i;
      site = col.count("chrom") && col.count("pos") && col.count("ref") && col.count("alt");
      if (!site && !col.count("id"))
        throw io::InputError(path, 1, fmt::format("header '{}' needs an id column or chrom, pos, ref and alt", line));
      if (!col.count("rank") && !col.count("delta"))
        throw io::InputError(path, 1, fmt::format("header '{}' needs a rank or a delta column", line));
      sites_complete = site;
      return;
    }
    if (line.empty()) return;
    const auto f = io::split_quoted_fields(line, '\t', bad_quote);
    if (f.size() < h.size())
      throw io::InputError(path, lineno, fmt::format("{} fields, the header has {}", f.size(), h.size()));
    Row r;
    r.line = lineno;
    if (site) {
      // pos as the VCF reader takes it (digits only, from 1): "0100" or " 100" is not site 100.
      if (const std::string& pos = f[col["pos"]]; !pos.empty())
        if (const auto p = io::parse_decimal_u64(pos); !p || *p == 0 || std::to_string(*p) != pos)
          throw io::InputError(path, lineno, fmt::format("pos '{}' is not a 1-based position (decimal digits, no "
                                                         "leading zero)",
                                                         io::printable(pos)));
      r.site = chrom_key(f[col["chrom"]], f[col["pos"]], f[col["ref"]], f[col["alt"]]);
      sites_complete = sites_complete && !f[col["chrom"]].empty();
    }
    if (col.count("id")) r.id = f[col["id"]];
    const std::string& v = f[col.count("rank") ? col["rank"] : col["delta"]];
    // A plain decimal: stod also read hexadecimal ("0xc" as 12) and skipped leading spaces.
    const auto x = io::parse_decimal_double(v);
    if (!x) throw io::InputError(path, lineno, fmt::format("'{}' is not a decimal number", io::printable(v)));
    r.order = col.count("rank") ? *x : -std::fabs(*x);  // ascending order = rank order
    rows.push_back(std::move(r));
  });
  if (!header) throw io::InputError(path, 1, "empty file: expected a header");
  if (rows.empty()) throw io::InputError(path, "no rows after the header");
  // One row per variant: a repeated one would count twice in a top N. By site where the
  // rows have one (an id is shared by the alleles of a multi-allelic record), else by id.
  for (const bool by_site : {true, false}) {
    if (by_site ? !sites_complete : (sites_complete || !col.count("id"))) continue;
    std::map<std::string, uint64_t> first;
    for (const auto& r : rows) {
      const std::string& key = by_site ? r.site : r.id;
      if (!by_site && key == ".") continue;  // a VCF's missing id: matched by site instead
      if (const auto [it, fresh] = first.emplace(key, r.line); !fresh)
        throw io::InputError(path, r.line, fmt::format("{} '{}' is also on line {}: a ranking lists each variant once",
                                                       by_site ? "variant" : "id", key, it->second));
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.order < b.order; });
  Ranking out;
  for (const auto& r : rows) {
    if (sites_complete) out.by_site.push_back(r.site);
    if (col.count("id")) out.by_id.push_back(r.id);
  }
  return out;
}

/// "10,100,1000" as numbers: decimal digits without a leading 0 (at most 18 of them), each
/// at least 1. std::stoull read "-5" as 2^64 - 5, and "010" is not what a user meant.
std::vector<uint64_t> parse_top(const std::string& s) {
  std::vector<uint64_t> out;
  for (const auto& t : io::split_fields(s, ',')) {
    const auto n = t.size() <= 18 ? io::parse_decimal_u64(t) : std::nullopt;
    if (!n || *n == 0 || std::to_string(*n) != t)
      throw std::invalid_argument(fmt::format("'{}' is not a positive integer (in '{}'): expected positive integers "
                                              "(decimal, no leading 0) separated by commas",
                                              io::printable(t), io::printable(s)));
    if (std::find(out.begin(), out.end(), *n) != out.end())
      throw std::invalid_argument(fmt::format("{} appears twice (in '{}'): give each N once", *n, io::printable(s)));
    out.push_back(*n);
  }
  return out;
}

void run_variants(VariantsArgs a, const Context& ctx) {
  if (ctx.size > 1) {
    refuse_multi_rank(ctx, "variants is a single-process command: run it without mpirun (use --threads for cores)");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto tops = parse_top(a.top);
  const std::string lower = [&] {
    std::string x = a.variants;
    std::transform(x.begin(), x.end(), x.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return x;
  }();
  const bool tsv = std::filesystem::path(lower).extension() == ".tsv" || std::filesystem::path(lower).extension() == ".txt";
  uint64_t before = 0, after = 0;
  if (!tsv) {
    if (a.genome.empty()) throw std::invalid_argument("a VCF needs --genome (or give a TSV of id ref_sequence alt_sequence)");
    if ((a.flank >= 0) == !a.window.empty())
      throw std::invalid_argument("a VCF needs exactly one of --flank N and --window A:B");
    if (a.flank >= 0) {
      before = after = static_cast<uint64_t>(a.flank);
    } else {
      // Whole decimal integers as written: stoll read "-35.9:35abc" as -35:35, and "-034"
      // is not how anyone writes -34 (refused, as every integer option refuses 010).
      const auto p = io::split_fields(a.window, ':');
      int64_t lo = 1, hi = -1;
      if (p.size() == 2)
        if (const auto x = io::parse_decimal_i64(p[0]), y = io::parse_decimal_i64(p[1]);
            x && y && std::to_string(*x) == p[0] && std::to_string(*y) == p[1])
          lo = *x, hi = *y;
      if (p.size() != 2 || lo > 0 || hi < 0)
        throw std::invalid_argument(fmt::format("--window '{}' must be A:B, decimal integers with A <= 0 <= B and no "
                                                "leading 0, e.g. -249:50",
                                                io::printable(a.window)));
      before = static_cast<uint64_t>(-lo);
      after = static_cast<uint64_t>(hi);
    }
  } else if (!a.genome.empty() || a.flank >= 0 || !a.window.empty()) {
    throw std::invalid_argument("--genome, --flank and --window apply to a VCF; a TSV already holds the sequences");
  }
  io::OutputSet out(a.out, {"variants", "--out", a.force, "summary.json"});  // published when complete
  const std::string dir = out.staging();

  io::VcfStats vs;
  uint64_t off = 0;
  std::vector<io::Variant> v;
  if (tsv) {
    v = io::read_variant_tsv(a.variants);
  } else {
    v = io::cut_variant_windows(io::read_vcf(a.variants, &vs), a.variants, a.genome, before, after, &off);
  }
  for (const auto& x : v)
    if (x.ref_seq.size() < 6 || x.alt_seq.size() < 6)
      throw io::InputError(a.variants, x.line,
                           fmt::format("sequences of {} and {} bases: at least 6 (one 6-mer) are needed{}",
                                       x.ref_seq.size(), x.alt_seq.size(), tsv ? "" : "; widen --flank/--window"));
  if (v.empty()) {  // why, by reason: no records at all, symbolic alleles only, or windows off the chromosomes
    if (tsv) throw io::InputError(a.variants, "no variant to score: the table has no rows");
    if (vs.records == 0) throw io::InputError(a.variants, "no variant to score: the VCF has no data lines (header only)");
    throw io::InputError(a.variants, fmt::format("no variant to score: of its {} data line(s), {} ALT allele(s) are "
                                                 "symbolic (<DEL>, *, ., breakends), which are skipped, and {} "
                                                 "variant(s) have a window running off their chromosome{}",
                                                 vs.records, vs.skipped_symbolic, off,
                                                 off > 0 ? " (narrow --flank/--window)" : ""));
  }
  std::vector<std::string> ref, alt;
  a.score.origins.clear();
  for (const auto& x : v) {
    ref.push_back(x.ref_seq), alt.push_back(x.alt_seq);
    a.score.origins.push_back(fmt::format("{}:{} ({})", a.variants, x.line, x.id));
  }

  const model::LogFn log = [](const std::string& l) { std::cerr << "[variants] " << l << std::endl; };
  model::VariantScores s;
  GENEMASK_MODEL_ENTRY(genemask_model_variants)(&a.score, &ref, &alt, &log, &s);

  const size_t n = v.size();
  std::vector<double> delta(n);
  for (size_t i = 0; i < n; ++i) delta[i] = s.p_alt[i] - s.p_ref[i];
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return std::fabs(delta[x]) > std::fabs(delta[y]); });

  // Comparison (read before writing anything, so a bad file leaves no partial output).
  nlohmann::ordered_json cmp = nullptr;
  std::vector<std::array<double, 3>> cmp_rows;
  if (!a.compare.empty()) {
    const Ranking other = read_ranking(a.compare);
    const bool by_site = !tsv && !other.by_site.empty();
    if (!by_site && other.by_id.empty())
      throw io::InputError(a.compare, 1, "has no id column to match the variants of a TSV by");
    std::vector<std::string> mine;
    for (size_t i : order) mine.push_back(by_site ? chrom_key(v[i].chrom, std::to_string(v[i].pos), v[i].ref, v[i].alt) : v[i].id);
    const auto& theirs = by_site ? other.by_site : other.by_id;
    // By id, each id must name one variant on both sides: a VCF's missing id '.' (or the one id
    // of a multi-allelic record's alleles) would match every variant that shares it.
    if (!by_site)
      for (const auto& [ids, file] : {std::pair<const std::vector<std::string>*, std::string>{&mine, a.variants},
                                      std::pair<const std::vector<std::string>*, std::string>{&theirs, a.compare}}) {
        std::set<std::string> seen;
        for (const auto& id : *ids)
          if (id == "." || id.empty() || !seen.insert(id).second)
            throw io::InputError(file, fmt::format("variant id '{}' {}: the rankings are matched by id here ({}), and "
                                                   "an id must name one variant; give both files chrom, pos, ref and "
                                                   "alt columns (a variants.tsv of a VCF has them), or unique ids",
                                                   io::printable(id), id == "." || id.empty() ? "is missing" : "is repeated",
                                                   tsv ? "the variants are a TSV" : "the other ranking has no site columns"));
      }
    const std::set<std::string> all_mine(mine.begin(), mine.end());
    uint64_t common = 0;
    for (const auto& k : std::set<std::string>(theirs.begin(), theirs.end())) common += all_mine.count(k);
    // No variant in common: every overlap would be 0 whatever the two rankings say.
    if (common == 0)
      throw io::InputError(a.compare, fmt::format("has no variant in common with {} (matched by {}): is it a ranking of "
                                                  "these variants?",
                                                  a.variants, by_site ? "chrom, pos, ref and alt" : "id"));
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (uint64_t N : tops) {
      if (N > mine.size() || N > theirs.size()) {  // undefined: fewer than N variants
        std::cerr << fmt::format("genemask: variants: --top {}: left out, more than the {} variants of {}\n", N,
                                 std::min(mine.size(), theirs.size()), N > mine.size() ? a.variants : a.compare);
        continue;
      }
      std::set<std::string> a_top(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(N));
      uint64_t shared = 0;
      std::set<std::string> seen;
      for (size_t i = 0; i < N; ++i)
        if (a_top.count(theirs[i]) && seen.insert(theirs[i]).second) ++shared;
      const double ov = static_cast<double>(shared) / static_cast<double>(N);
      top.push_back({{"n", N}, {"shared", shared}, {"overlap", ov}});
      cmp_rows.push_back({static_cast<double>(N), static_cast<double>(shared), ov});
    }
    // Variants in one ranking only count as misses of the other's top N: said.
    if (common < mine.size() || common < theirs.size())
      std::cerr << fmt::format("genemask: variants: note: {} of the {} variants here and of the {} in {} are in both "
                               "(matched by {}); the others count as misses in every top N\n",
                               common, mine.size(), theirs.size(), a.compare, by_site ? "chrom, pos, ref and alt" : "id");
    cmp = {{"file", a.compare}, {"matched_by", by_site ? "chrom:pos:ref:alt" : "id"}, {"n_other", theirs.size()},
           {"in_both", common}, {"top", top}};
  }

  {
    io::AtomicFile f(dir + "/variants.tsv");
    auto& o = f.stream();
    o << "id\tchrom\tpos\tref\talt\tp_ref\tp_alt\tdelta\trank\n";
    for (size_t r = 0; r < n; ++r) {
      const auto& x = v[order[r]];
      o << io::tsv_field(x.id) << '\t' << io::tsv_field(x.chrom) << '\t' << (tsv ? "" : std::to_string(x.pos)) << '\t' << x.ref << '\t' << x.alt << '\t'
        << num(s.p_ref[order[r]]) << '\t' << num(s.p_alt[order[r]]) << '\t' << num(delta[order[r]]) << '\t' << r + 1 << '\n';
    }
    f.commit();
  }
  if (!cmp.is_null()) {
    io::AtomicFile f(dir + "/compare.tsv");
    f.stream() << "n\tshared\toverlap\n";
    for (const auto& r : cmp_rows)
      f.stream() << static_cast<uint64_t>(r[0]) << '\t' << static_cast<uint64_t>(r[1]) << '\t' << num(r[2]) << '\n';
    f.commit();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string cls = s.class_names[static_cast<size_t>(s.class_index)];
  nlohmann::ordered_json j = {{"model", a.score.model},
                              {"variants", a.variants},
                              {"input", tsv ? "tsv" : "vcf"},
                              {"genome", a.genome},
                              {"before", before},
                              {"after", after},
                              {"n", n},
                              {"vcf_records", vs.records},
                              {"skipped_symbolic", vs.skipped_symbolic},
                              {"off_chromosome", off},
                              {"class", cls},
                              {"class_index", s.class_index},
                              {"class_names", s.class_names},
                              {"truncated", s.truncated},
                              {"same_tokens", s.same_tokens},
                              {"threads", s.threads},
                              {"batch", a.score.batch},
                              {"compare", cmp},
                              {"seconds", seconds}, {"precision", s.precision},
                              {"sequences_per_s", s.sequences_per_s},
                              {"command_line", ctx.command_line}};
  {
    io::AtomicFile f(dir + "/summary.json");
    f.stream() << io::json_text(io::with_unterminated_inputs(j), 2) << '\n';
    f.commit();
  }
  out.publish();
  nlohmann::json line = {{"command", "variants"}, {"n", n}, {"class", cls}, {"class_index", s.class_index}, {"off_chromosome", off},
                         {"skipped_symbolic", vs.skipped_symbolic}, {"truncated", s.truncated}, {"same_tokens", s.same_tokens}, {"out", a.out},
                         {"max_abs_delta", std::fabs(delta[order[0]])}, {"seconds", seconds},
                         {"sequences_per_s", s.sequences_per_s}, {"precision", s.precision}};
  if (!cmp.is_null()) line["top_overlap"] = cmp["top"];
  print_summary(ctx, line);
}

}  // namespace

void register_variants(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<VariantsArgs>();
  auto* sub = app.add_subcommand("variants", "Variant effects: probability change of a fine-tuned classifier, ranked");
  sub->footer(kHelp);
  sub->add_option("--model", a->score.model, "fine-tuned classifier directory (`genemask finetune --save-model`)")
      ->required()
      ->check(existing_directory());
  sub->add_option("--variants", a->variants, "VCF (.vcf, .vcf.gz) or TSV (.tsv: id ref_sequence alt_sequence)")
      ->required()
      ->check(existing_file());
  sub->add_option("--genome", a->genome, "reference FASTA of the VCF (plain, gzip or bgzip)")->check(existing_file());
  sub->add_option("--flank", a->flank, "bases on each side of the variant")->check(non_negative());
  sub->add_option("--window", a->window, "A:B: bases POS+A .. POS+B (e.g. -249:50)");
  sub->add_option("--out", a->out, "output directory: variants.tsv, summary.json (+ compare.tsv)")->required();
  sub->add_option("--class", a->score.class_name,
                  "class scored: a label of the model, or an index N or #N (default: index 1, the second class of "
                  "id2label); a value that is one class's label and another's index is refused: #N is index N");
  sub->add_option("--compare", a->compare, "another ranking (variants.tsv) for the top-N overlap")
      ->check(existing_file());
  auto* top = sub->add_option("--top", a->top, "N values of the top-N overlap with --compare, comma-separated")
      ->check(CLI::Validator(
          [](std::string& v) {
            try {
              parse_top(v);
              return std::string();
            } catch (const std::invalid_argument& e) {
              return std::string(e.what());
            }
          },
          "N[,N...]"))
      ->capture_default_str();
  sub->add_option("--batch", a->score.batch, "sequences per forward pass")->check(positive())->capture_default_str();
  sub->add_option("--threads", a->score.threads, "intra-op threads (0: all cores; capped at the cores available)")->capture_default_str();
  sub->add_option("--device", a->score.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  auto* gpu = add_gpu_option(sub, a->score.device_index);
  sub->add_option("--precision", a->score.precision, kPrecisionHelp)->check(CLI::IsMember({"fp32", "bf16", "auto"}))->capture_default_str();
  add_force_flag(sub, a->force);
  sub->callback([a, top, gpu, &ctx] {
    // --top sizes the overlap with --compare: alone it did nothing, without a word.
    if (top->count() > 0 && a->compare.empty())
      throw CLI::ValidationError("--top", "applies to the overlap with --compare R.tsv, which is not given");
    ctx.inputs = {{"--model", a->score.model}, {"--variants", a->variants}, {"--genome", a->genome},
                  {"--compare", a->compare}};
    ctx.outputs = {{"--out", a->out, io::OutputKind::directory}};
    ctx.check = [gpu, a] { check_gpu_option(gpu, a->score.device); };  // after the numbers' own checks
    ctx.run = [a, &ctx] { run_variants(*a, ctx); };
  });
}

}  // namespace genemask::cli
