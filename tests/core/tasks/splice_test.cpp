// Splice-site windows: hand-checked windows on small genomes, drops, negatives, errors,
// GTF/GFF3 equivalence and determinism.
#include "genemask/tasks/splice.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "test_util.hpp"

using namespace genemask;
using dataset::Example;
using genemask::test::error_of;
using genemask::test::TempDir;

namespace {

// chr1, 80 bp in blocks of 10 (positions 0-9, 10-19, ...).
const std::string kChr1 = "ACGTACGGTC" "TTGACCATGA" "GCATTCGGAT" "CCTAGGCTAA"
                          "TGCGATCCAG" "GATTACAGCT" "ACCGTTAGCA" "TGGCAATCGC";
// chr2, 60 bp.
const std::string kChr2 = "GGATCCTAGC" "AATCGTTCAG" "CTTGAGGACA" "TACGGATTCC" "AGTCAACGTG" "CATGCTAAGT";
// chr3, 20 bp with an N at 14.
const std::string kChr3 = "CCGATTGCAAGTCCNAGACT";

std::string fasta() { return ">chr1\n" + kChr1 + "\n>chr2\n" + kChr2 + "\n>chr3\n" + kChr3 + "\n"; }

// T1: + strand, exons [5,15) [25,35) [50,60) (1-based 6-15, 26-35, 51-60).
// T2: - strand, exons [8,20) [36,48); in transcript order [36,48) comes first.
// T3: + strand on chr3, exons [0,2) [9,12) [18,20): donor at 2 and acceptor at 18 run off
//     the chromosome, the donor at 12 (window [8,16)) holds the N.
const char* kGtf =
    "chr1\tt\texon\t26\t35\t.\t+\t.\tgene_id \"G1\"; transcript_id \"T1\";\n"
    "chr1\tt\texon\t6\t15\t.\t+\t.\tgene_id \"G1\"; transcript_id \"T1\";\n"
    "chr1\tt\texon\t51\t60\t.\t+\t.\tgene_id \"G1\"; transcript_id \"T1\";\n"
    "chr2\tt\texon\t37\t48\t.\t-\t.\tgene_id \"G2\"; transcript_id \"T2\";\n"
    "chr2\tt\texon\t9\t20\t.\t-\t.\tgene_id \"G2\"; transcript_id \"T2\";\n"
    "chr3\tt\texon\t1\t2\t.\t+\t.\tgene_id \"G3\"; transcript_id \"T3\";\n"
    "chr3\tt\texon\t10\t12\t.\t+\t.\tgene_id \"G3\"; transcript_id \"T3\";\n"
    "chr3\tt\texon\t19\t20\t.\t+\t.\tgene_id \"G3\"; transcript_id \"T3\";\n";
const char* kGff3 =
    "##gff-version 3\n"
    "chr1\tt\tmRNA\t6\t60\t.\t+\t.\tID=T1\n"
    "chr1\tt\texon\t6\t15\t.\t+\t.\tParent=T1\n"
    "chr1\tt\texon\t26\t35\t.\t+\t.\tParent=T1\n"
    "chr1\tt\texon\t51\t60\t.\t+\t.\tParent=T1\n"
    "chr2\tt\texon\t9\t20\t.\t-\t.\tParent=T2\n"
    "chr2\tt\texon\t37\t48\t.\t-\t.\tParent=T2\n"
    "chr3\tt\texon\t1\t2\t.\t+\t.\tParent=T3\n"
    "chr3\tt\texon\t10\t12\t.\t+\t.\tParent=T3\n"
    "chr3\tt\texon\t19\t20\t.\t+\t.\tParent=T3\n";

std::map<std::string, std::string> by_id(const std::vector<Example>& ex) {
  std::map<std::string, std::string> m;
  for (const auto& e : ex) m[e.id] = e.sequence + "/" + e.label;
  return m;
}

dataset::SpliceOptions small(double negatives = 0) {
  dataset::SpliceOptions o;
  o.window = 8;
  o.negatives_per_site = negatives;
  return o;
}

}  // namespace

TEST(Splice, HandCheckedSiteWindowsBothStrandsFirstLastExonsAndDrops) {
  TempDir tmp;
  test::write_file(tmp.file("g.fa"), fasta());
  test::write_file(tmp.file("a.gtf"), kGtf);
  auto b = dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("a.gtf"), small());
  // Written out by hand from the genome strings above (W = 8: 4 bases each side of the cut).
  std::map<std::string, std::string> expected = {
      // T1 (+): donor after exon 1 (cut 15: exon TGAC | intron CATG)
      {"chr1:11-19(+):T1", "TGACCATG/1"},
      // acceptor before exon 2 (cut 25: intron CATT | exon CGGA)
      {"chr1:21-29(+):T1", "CATTCGGA/0"},
      // donor after exon 2 (cut 35: CTAG | GCTA)
      {"chr1:31-39(+):T1", "CTAGGCTA/1"},
      // acceptor before exon 3 (cut 50: CCAG | GATT); exon 1 has no acceptor, exon 3 no donor
      {"chr1:46-54(+):T1", "CCAGGATT/0"},
      // T2 (-): acceptor at genomic 20 = [16,24) "TCAGCTTG", reverse complemented
      {"chr2:16-24(-):T2", "CAAGCTGA/0"},
      // donor at genomic 36 = [32,40) "CGGATTCC", reverse complemented
      {"chr2:32-40(-):T2", "GGAATCCG/1"},
      // T3: only the acceptor at 9 = [5,13) survives
      {"chr3:5-13(+):T3", "TGCAAGTC/0"},
  };
  EXPECT_EQ(by_id(b.examples), expected);
  EXPECT_EQ(b.stats.dropped["off_chromosome"], 2u);  // T3 donor at 2, acceptor at 18
  EXPECT_EQ(b.stats.dropped["contains_n"], 1u);      // T3 donor at 12
  EXPECT_EQ(b.counts.donor_sites, 5u);
  EXPECT_EQ(b.counts.acceptor_sites, 5u);
  EXPECT_EQ(b.transcripts, 3u);
  EXPECT_EQ(b.multi_exon_transcripts, 3u);
  // Genomic order within a chromosome, chromosomes in file order.
  std::vector<std::string> ids;
  for (const auto& e : b.examples) ids.push_back(e.id);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.begin() + 4));
  EXPECT_EQ(ids[4].substr(0, 4), "chr2");
}

TEST(Splice, SingleExonTranscriptGivesNothingButItsBoundariesBlockNegatives) {
  std::string seq(200, 'A');
  std::mt19937_64 g(3);
  for (auto& c : seq) c = "ACGT"[g() % 4];
  io::TranscriptExons t1{"T1", "c", '+', 1, {{10, 20}, {120, 130}}};  // intron [20,120)
  io::TranscriptExons single{"S", "c", '-', 3, {{60, 70}}};          // single exon inside it
  std::vector<Example> out;
  dataset::DatasetStats st;
  auto o = small(5.0);  // 10 non-splice windows per intron
  auto c = dataset::splice_windows("c", seq, {&single}, o, out, st);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(c.donor_sites + c.acceptor_sites + c.introns, 0u);
  c = dataset::splice_windows("c", seq, {&t1, &single}, o, out, st);
  EXPECT_EQ(c.introns, 1u);
  size_t negatives = 0;
  for (const auto& e : out) {
    if (e.label != dataset::kNonSpliceLabel) continue;
    ++negatives;
    // id "c:P-Q(+):T1": brute force, every base of [P, Q] (closed) away from every boundary.
    const auto colon = e.id.find(':'), dash = e.id.find('-'), paren = e.id.find('(');
    const uint64_t p = std::stoull(e.id.substr(colon + 1, dash - colon - 1));
    const uint64_t q = std::stoull(e.id.substr(dash + 1, paren - dash - 1));
    EXPECT_EQ(q - p, 8u);
    EXPECT_EQ(e.sequence, seq.substr(p, 8));
    EXPECT_TRUE(p >= 20 && q <= 120) << e.id;
    for (uint64_t x : {10, 20, 60, 70, 120, 130}) EXPECT_FALSE(p <= x && x <= q) << e.id << " holds " << x;
  }
  EXPECT_EQ(negatives, 10u);
}

TEST(Splice, NegativesHandCheckedInANarrowIntronAndMinusStrandReverseComplemented) {
  // T1's first intron [15,25) leaves one start (16) for W = 8: the window [16,24) touches no
  // boundary (15 and 25 are outside [16, 24]).
  io::TranscriptExons t1{"T1", "chr1", '+', 1, {{5, 15}, {25, 35}}};
  std::vector<Example> out;
  dataset::DatasetStats st;
  dataset::splice_windows("chr1", kChr1, {&t1}, small(0.5), out, st);
  std::vector<std::string> neg;
  for (const auto& e : out)
    if (e.label == "2") neg.push_back(e.id + " " + e.sequence);
  EXPECT_EQ(neg, std::vector<std::string>{"chr1:16-24(+):T1 ATGAGCAT"});
  // The same intron on the minus strand: reverse complement of ATGAGCAT.
  io::TranscriptExons t2{"T2", "chr1", '-', 1, {{5, 15}, {25, 35}}};
  out.clear();
  dataset::splice_windows("chr1", kChr1, {&t2}, small(0.5), out, st);
  neg.clear();
  for (const auto& e : out)
    if (e.label == "2") neg.push_back(e.id + " " + e.sequence);
  EXPECT_EQ(neg, std::vector<std::string>{"chr1:16-24(-):T2 ATGCTCAT"});
}

TEST(Splice, ARatePastTheRoomTakesEveryAllowedPositionEvenPast2To64) {
  // T1's second intron [35,50) with W = 8 allows starts 36..41 (s > 35 and s + 8 < 50: 6
  // windows). A rate of 1e6 per site takes all 6; 1e19 and 1e300 (past 2^64, where a conversion to an integer is
  // undefined and once gave the 0.5 rate's count) must take the same 6.
  io::TranscriptExons t1{"T1", "chr1", '+', 1, {{25, 35}, {50, 60}}};
  auto negatives = [&](double rate) {
    std::vector<Example> out;
    dataset::DatasetStats st;
    dataset::splice_windows("chr1", kChr1, {&t1}, small(rate), out, st);
    std::set<std::string> ids;
    for (const auto& e : out)
      if (e.label == "2") ids.insert(e.id);
    return ids;
  };
  const auto all = negatives(1e6);
  EXPECT_EQ(all.size(), 6u);
  EXPECT_EQ(negatives(1e19), all);
  EXPECT_EQ(negatives(1e300), all);
  EXPECT_LT(negatives(0.5).size(), all.size());
}

TEST(Splice, GtfAndGff3GiveIdenticalWindows) {
  TempDir tmp;
  test::write_file(tmp.file("g.fa"), fasta());
  test::write_file(tmp.file("a.gtf"), kGtf);
  test::write_file(tmp.file("a.gff3"), kGff3);
  auto a = dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("a.gtf"), small(1.0));
  auto b = dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("a.gff3"), small(1.0));
  ASSERT_EQ(a.examples.size(), b.examples.size());
  for (size_t i = 0; i < a.examples.size(); ++i) {
    EXPECT_EQ(a.examples[i].sequence, b.examples[i].sequence);
    EXPECT_EQ(a.examples[i].label, b.examples[i].label);
    EXPECT_EQ(a.examples[i].id, b.examples[i].id);
  }
  EXPECT_EQ(a.stats.dropped, b.stats.dropped);
}

TEST(Splice, ErrorsForUnknownChromosomeAndExonBeyondTheEnd) {
  TempDir tmp;
  test::write_file(tmp.file("g.fa"), fasta());
  test::write_file(tmp.file("u.gtf"),
                   "chr1\tt\texon\t6\t15\t.\t+\t.\ttranscript_id \"T1\";\n"
                   "chrUn_x\tt\texon\t6\t15\t.\t+\t.\ttranscript_id \"T9\";\n");
  const std::string err =
      error_of([&] { dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("u.gtf"), small()); });
  const std::string head = tmp.file("u.gtf") + ":2: transcript 'T9': sequence 'chrUn_x' is not in the genome " +
                           tmp.file("g.fa") + " (its records: chr1, chr2, chr3)";
  const std::string tail = "; or leave such transcripts out with --skip-unknown-chromosomes";
  EXPECT_EQ(err.substr(0, head.size()), head) << err;
  ASSERT_GE(err.size(), tail.size());
  EXPECT_EQ(err.substr(err.size() - tail.size()), tail) << err;
  // A --chrom-map alias makes the name known.
  test::write_file(tmp.file("map.tsv"), "chrUn_x\tchr2\n");
  auto m = small();
  m.chrom_map = tmp.file("map.tsv");
  EXPECT_EQ(dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("u.gtf"), m).chromosomes, 2u);
  auto o = small();
  o.skip_unknown_chromosomes = true;
  auto b = dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("u.gtf"), o);
  EXPECT_EQ(b.unknown_chromosome_transcripts, 1u);
  // "3" matches chr3 (prefix added); its 20 bp end before the exon's.
  test::write_file(tmp.file("e.gtf"), "3\tt\texon\t1\t5\t.\t+\t.\ttranscript_id \"T\";\n"
                                      "3\tt\texon\t15\t21\t.\t+\t.\ttranscript_id \"T\";\n");
  EXPECT_EQ(error_of([&] { dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("e.gtf"), small()); }),
            tmp.file("e.gtf") +
                ":1: transcript 'T' has an exon at 15-21 (1-based, inclusive), beyond the end of chr3 (length 20) "
                "in " +
                tmp.file("g.fa") + ": is the annotation for this genome assembly?");
  try {
    dataset::validate(small(-1));
    ADD_FAILURE() << "no error for --negatives-per-site -1";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--negatives-per-site must be >= 0, got -1");
  }
  auto odd = small();
  odd.window = 41;
  EXPECT_THROW(dataset::validate(odd), std::invalid_argument);
  auto no_feature = small();
  no_feature.exon_feature = "";
  try {
    dataset::validate(no_feature);
    ADD_FAILURE() << "no error for an empty --exon-feature";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--exon-feature must be a GTF/GFF3 feature type such as exon or CDS, got ''");
  }
  no_feature.exon_feature = "CDS";
  EXPECT_NO_THROW(dataset::validate(no_feature));
}

TEST(Splice, DuplicatesKeptOnceAmbiguousDroppedAndCapPerClass) {
  std::vector<Example> ex = {{"AAAAAAAA", "1", "a"}, {"CCCCCCCC", "0", "b"}, {"AAAAAAAA", "1", "c"},
                             {"GGGGGGGG", "1", "d"}, {"GGGGGGGG", "2", "e"}, {"TTTTTTTT", "2", "f"},
                             {"GGGGGGGG", "2", "g"}};
  dataset::DatasetStats st;
  dataset::resolve_splice_duplicates(ex, st, 0, 1);
  std::vector<std::string> ids;
  for (const auto& e : ex) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "f"}));
  EXPECT_EQ(st.dropped["duplicate"], 1u);
  EXPECT_EQ(st.dropped["ambiguous"], 3u);
  // Cap: 2 per class out of 5, the choice depends on the seed only through the hash.
  std::vector<Example> many;
  for (const char* s : {"ACGTACGT", "CCGTACGT", "GCGTACGT", "TCGTACGT", "AAGTACGT"}) many.push_back({s, "0", s});
  auto a = many, b = many;
  dataset::DatasetStats s1, s2;
  dataset::resolve_splice_duplicates(a, s1, 2, 7);
  dataset::resolve_splice_duplicates(b, s2, 2, 7);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].id, b[0].id);
  EXPECT_EQ(a[1].id, b[1].id);
  EXPECT_EQ(s1.dropped["over_max_per_class"], 3u);
  std::set<std::string> chosen_by_seed;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto c = many;
    dataset::DatasetStats s3;
    dataset::resolve_splice_duplicates(c, s3, 2, seed);
    chosen_by_seed.insert(c[0].id + c[1].id);
  }
  EXPECT_GT(chosen_by_seed.size(), 1u);
}

TEST(Splice, DeterministicBySeedAndNegativesFollowTheSeed) {
  TempDir tmp;
  std::mt19937_64 g(11);
  std::string seq(5000, 'A');
  for (auto& c : seq) c = "ACGT"[g() % 4];
  test::write_file(tmp.file("g.fa"), ">c\n" + seq + "\n");
  std::string gtf;
  for (int t = 0; t < 10; ++t) {
    const uint64_t base = static_cast<uint64_t>(t) * 480 + 20;
    for (int e = 0; e < 3; ++e) {
      const uint64_t s = base + static_cast<uint64_t>(e) * 150 + 1;
      gtf += "c\tt\texon\t" + std::to_string(s) + "\t" + std::to_string(s + 39) + "\t.\t" + (t % 2 ? "-" : "+") +
             "\t.\ttranscript_id \"T" + std::to_string(t) + "\";\n";
    }
  }
  test::write_file(tmp.file("a.gtf"), gtf);
  auto o = small(1.0);
  o.window = 40;
  auto run = [&](uint64_t seed) {
    o.seed = seed;
    auto b = dataset::build_splice_dataset(tmp.file("g.fa"), tmp.file("a.gtf"), o);
    std::vector<std::string> v;
    for (const auto& e : b.examples) v.push_back(e.id + e.sequence + e.label);
    return v;
  };
  const auto a1 = run(5), a2 = run(5), b1 = run(6);
  EXPECT_EQ(a1, a2);
  EXPECT_NE(a1, b1);
  size_t n_neg = 0;
  for (const auto& s : a1) n_neg += s.back() == '2';
  EXPECT_EQ(n_neg, 40u);  // 20 introns x 2 (R = 1)
  EXPECT_EQ(a1.size() - n_neg, 40u);  // 20 donors + 20 acceptors
}
