#include "io/annotation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <tuple>

#include "test_util.hpp"

using namespace genemask;
using genemask::test::error_of;
using genemask::test::TempDir;

TEST(Annotation, GtfAndGff3GenesWithChrPrefixes) {
  TempDir tmp;
  test::write_file(tmp.file("a.gtf"),
                   "#!genome-build GRCh38\n"
                   "1\tensembl\tgene\t11\t20\t.\t+\t.\tgene_id \"G1\";\n"
                   "1\tensembl\texon\t11\t15\t.\t+\t.\tgene_id \"G1\"; transcript_id \"T1\";\n"
                   "MT\tensembl\tgene\t5\t9\t.\t-\t.\tgene_id \"G2\";\n"
                   "scaffold_9\tensembl\tgene\t5\t9\t.\t-\t.\tgene_id \"G3\";\n");
  io::GeneBoundaryStats st;
  auto b = io::gene_boundaries(tmp.file("a.gtf"), {"chr1", "chrM"}, {100, 16569}, nullptr, &st);
  EXPECT_EQ(b[0], (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(b[1], (std::vector<uint64_t>{4, 9}));
  EXPECT_EQ(st.genes, 3u);
  EXPECT_EQ(st.unknown_sequence_genes, 1u);
  EXPECT_EQ(st.unknown_sequences, std::vector<std::string>{"scaffold_9"});
  test::write_file(tmp.file("a.gff3"),
                   "##gff-version 3\n"
                   "chr2\tsrc\tncRNA_gene\t1\t100\t.\t+\t.\tID=g1\n"
                   "chr2\tsrc\tgene\t50\t60\t.\t?\t.\tID=g2\n"
                   "##FASTA\n>chr2\nACGT\n");
  auto g = io::gene_boundaries(tmp.file("a.gff3"), {"2"}, {100});
  EXPECT_EQ(g[0], (std::vector<uint64_t>{0, 49, 60, 100}));
}

// Regression: a GFF3 whose sequence names matched nothing was ignored (exit 0, no warning),
// and genes ending past their chromosome were accepted.
TEST(Annotation, GenesOffTheGenomeAreCountedOrRefused) {
  TempDir tmp;
  test::write_file(tmp.file("n.gff3"),
                   "##gff-version 3\n"
                   "NC_000001.11\tsrc\tgene\t11\t20\t.\t+\t.\tID=a\n"
                   "NC_000002.12\tsrc\tgene\t11\t20\t.\t+\t.\tID=b\n"
                   "NC_000001.11\tsrc\tgene\t31\t40\t.\t+\t.\tID=c\n");
  EXPECT_EQ(error_of([&] { io::gene_boundaries(tmp.file("n.gff3"), {"chr1", "chr2"}, {100, 100}); }),
            tmp.file("n.gff3") + ": none of its 3 genes lies on a sequence of the genome: the annotation names 2 "
                                 "sequence(s) (NC_000001.11, NC_000002.12), the genome 2 (chr1, chr2); is it for this "
                                 "genome assembly?");
  // One gene past the end of its chromosome (1-based end 101 on a 100-base chr1): line named.
  test::write_file(tmp.file("p.gtf"),
                   "chr1\tsrc\tgene\t11\t20\t.\t+\t.\tgene_id \"a\";\n"
                   "1\tsrc\tgene\t51\t101\t.\t-\t.\tgene_id \"b\";\n");
  EXPECT_EQ(error_of([&] { io::gene_boundaries(tmp.file("p.gtf"), {"chr1"}, {100}); }),
            tmp.file("p.gtf") + ":2: a gene on 1 ends at 101, past the end of chr1 (100 bases) in the genome: is the "
                                "annotation for this genome assembly?");
  // Exactly at the end is fine.
  EXPECT_EQ(io::gene_boundaries(tmp.file("p.gtf"), {"chr1"}, {101})[0], (std::vector<uint64_t>{10, 20, 50, 101}));
  // Merged transcript loci name the transcript that reaches past the end.
  test::write_file(tmp.file("m.gff3"),
                   "chr1\tsrc\tmRNA\t11\t60\t.\t+\t.\tID=t1\n"
                   "chr1\tsrc\tmRNA\t21\t120\t.\t+\t.\tID=t2\n");
  EXPECT_EQ(error_of([&] { io::gene_boundaries(tmp.file("m.gff3"), {"chr1"}, {100}); }),
            tmp.file("m.gff3") + ":2: a gene on chr1 ends at 120, past the end of chr1 (100 bases) in the genome: is "
                                 "the annotation for this genome assembly?");
}

TEST(Annotation, MalformedLinesNameFileAndLine) {
  TempDir tmp;
  test::write_file(tmp.file("c.gtf"), "1\tx\tgene\t11\t20\t.\t+\t.\n");
  EXPECT_EQ(error_of([&] { io::read_genes(tmp.file("c.gtf")); }),
            tmp.file("c.gtf") + ":1: expected 9 tab-separated columns, found 8");
  test::write_file(tmp.file("d.gtf"), "# c\n1\tx\tgene\t11\tabc\t.\t+\t.\tgene_id \"a\";\n");
  EXPECT_EQ(error_of([&] { io::read_genes(tmp.file("d.gtf")); }),
            tmp.file("d.gtf") + ":2: column 5 (end) is not a positive integer: 'abc'");
  test::write_file(tmp.file("e.gtf"), "1\tx\tgene\t11\t20\t.\t+\t.\tgene_name \"a\";\n");
  EXPECT_EQ(error_of([&] { io::read_genes(tmp.file("e.gtf")); }),
            tmp.file("e.gtf") + ":1: GTF gene line without a gene_id attribute");
  test::write_file(tmp.file("f.gff3"), "1\tx\tgene\t30\t20\t.\t+\t.\tID=a\n");
  EXPECT_EQ(error_of([&] { io::read_genes(tmp.file("f.gff3")); }), tmp.file("f.gff3") + ":1: start 30 is after end 20");
  test::write_file(tmp.file("g.gff3"), "1\tx\tgene\t10\t20\t.\tx\t.\tID=a\n");
  EXPECT_EQ(error_of([&] { io::read_genes(tmp.file("g.gff3")); }),
            tmp.file("g.gff3") + ":1: column 7 (strand) must be +, -, . or ?, found 'x'");
  test::write_file(tmp.file("h.gff3"), "1\tx\texon\t10\t20\t.\t+\t.\tID=a\n");
  EXPECT_NE(error_of([&] { io::read_genes(tmp.file("h.gff3")); }).find("no features of type 'gene'"), std::string::npos);
}

// A GFF3 with mRNA and CDS lines only: the loci are the unions of overlapping isoforms of
// one sequence and strand, written out by hand here.
TEST(Annotation, TranscriptSpansWhenThereAreNoGeneLines) {
  TempDir tmp;
  test::write_file(tmp.file("m.gff3"),
                   "##gff-version 3\n"
                   "chr1\ts\tmRNA\t101\t500\t.\t+\t.\tID=a1\n"
                   "chr1\ts\tCDS\t120\t480\t.\t+\t0\tParent=a1\n"
                   "chr1\ts\tmRNA\t301\t900\t.\t+\t.\tID=a2\n"   // overlaps a1: same locus
                   "chr1\ts\tmRNA\t401\t600\t.\t-\t.\tID=b1\n"   // other strand: its own locus
                   "chr1\ts\tmRNA\t901\t950\t.\t+\t.\tID=c1\n"   // touches a2's end: not overlapping
                   "chr2\ts\ttranscript\t11\t20\t.\t+\t.\tID=d1\n");
  io::GeneSource src;
  const auto loci = io::read_genes(tmp.file("m.gff3"), &src);
  EXPECT_TRUE(src.from_transcripts);
  EXPECT_EQ(src.transcripts, 5u);
  std::vector<std::tuple<std::string, uint64_t, uint64_t, char>> got, want = {
      {"chr1", 100, 900, '+'}, {"chr1", 900, 950, '+'}, {"chr1", 400, 600, '-'}, {"chr2", 10, 20, '+'}};
  for (const auto& g : loci) got.emplace_back(g.seqid, g.start, g.end, g.strand);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  // With gene lines present, mRNAs are ignored as before.
  test::write_file(tmp.file("g.gff3"), "chr1\ts\tgene\t101\t950\t.\t+\t.\tID=g\nchr1\ts\tmRNA\t101\t500\t.\t+\t.\tID=a1\n");
  const auto genes = io::read_genes(tmp.file("g.gff3"), &src);
  EXPECT_FALSE(src.from_transcripts);
  ASSERT_EQ(genes.size(), 1u);
  EXPECT_EQ(genes[0].end, 950u);
  test::write_file(tmp.file("none.gff3"), "chr1\ts\tCDS\t101\t500\t.\t+\t0\tParent=a1\n");
  EXPECT_NE(error_of([&] { io::read_genes(tmp.file("none.gff3")); }).find("no features of type 'gene', 'mRNA' or 'transcript'"),
            std::string::npos);
}

TEST(Annotation, CdsAsExonsGroupedByParent) {
  TempDir tmp;
  const std::string lines =
      "chr1\ts\tFEAT\t101\t200\t.\t+\t0\tParent=t1\n"
      "chr1\ts\tFEAT\t301\t400\t.\t+\t0\tParent=t1\n"
      "chr1\ts\tFEAT\t501\t600\t.\t-\t0\tParent=t2,t3\n";
  auto with = [&](const std::string& type) {
    std::string s = lines;
    for (size_t p; (p = s.find("FEAT")) != std::string::npos;) s.replace(p, 4, type);
    return s;
  };
  test::write_file(tmp.file("cds.gff3"), with("CDS"));
  test::write_file(tmp.file("exon.gff3"), with("exon"));
  const auto a = io::read_transcript_exons(tmp.file("cds.gff3"), "CDS");
  const auto b = io::read_transcript_exons(tmp.file("exon.gff3"));
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].exons, b[i].exons);
    EXPECT_EQ(a[i].strand, b[i].strand);
  }
  EXPECT_NE(error_of([&] { io::read_transcript_exons(tmp.file("cds.gff3")); })
                .find("no features of type 'exon' found, but 3 'CDS' lines: use --exon-feature CDS"),
            std::string::npos);
}

// Regression: mRNA lines were skipped unparsed before the fallback existed, so a malformed
// one in a file with gene lines must still not stop it; without gene lines it is an error.
// Ensembl's GFF3 types pseudogene loci "pseudogene", and a file with gene lines may give some
// loci as mRNA lines only: both were left out without a word, and samples crossed them.
TEST(Annotation, PseudogenesAndTranscriptOnlyLociBesideGeneLines) {
  TempDir tmp;
  test::write_file(tmp.file("x.gff3"),
                   "##gff-version 3\n"
                   "chr1\ts\tgene\t101\t500\t.\t+\t.\tID=g1\n"
                   "chr1\ts\tmRNA\t101\t400\t.\t+\t.\tID=t1;Parent=g1\n"  // held by g1: not a locus
                   "chr1\ts\tmRNA\t601\t900\t.\t+\t.\tID=o1\n"             // no gene line: a locus
                   "chr1\ts\tmRNA\t801\t1000\t.\t+\t.\tID=o2\n"            // overlaps o1: the same locus
                   "chr1\ts\tmRNA\t450\t700\t.\t-\t.\tID=o3\n"             // not held whole by g1
                   "chr1\ts\tpseudogene\t2001\t2100\t.\t+\t.\tID=p1\n"
                   "chr1\ts\tprocessed_pseudogene\t3001\t3100\t.\t+\t.\tID=p2\n"
                   "chr1\ts\tncRNA_gene\t4001\t4100\t.\t+\t.\tID=n1\n"
                   "chr1\ts\texon\t5001\t5100\t.\t+\t.\tParent=o9\n"        // not a locus type
                   "chr1\ts\tlnc_RNA\t6001\t6100\t.\t-\t.\tID=l1\n"         // an RNA of no gene line
                   "chr1\ts\ttRNA\t4011\t4090\t.\t+\t.\tID=r1;Parent=n1\n" // held by n1
                   "chr2\ts\ttranscript\t11\t20\t.\t+\t.\tID=o4\n");       // no gene on chr2
  io::GeneSource src;
  const auto loci = io::read_genes(tmp.file("x.gff3"), &src);
  EXPECT_FALSE(src.from_transcripts);
  EXPECT_EQ(src.transcripts, 5u);
  EXPECT_EQ(src.transcript_loci, 4u);
  std::vector<std::tuple<std::string, uint64_t, uint64_t, char>> got, want = {
      {"chr1", 100, 500, '+'},   {"chr1", 2000, 2100, '+'}, {"chr1", 3000, 3100, '+'}, {"chr1", 4000, 4100, '+'},
      {"chr1", 600, 1000, '+'},  {"chr1", 449, 700, '-'},   {"chr1", 6000, 6100, '-'}, {"chr2", 10, 20, '+'}};
  for (const auto& g : loci) got.emplace_back(g.seqid, g.start, g.end, g.strand);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(Annotation, MalformedTranscriptLineMattersOnlyWithoutGeneLines) {
  TempDir tmp;
  test::write_file(tmp.file("g.gff3"),
                   "chr1\ts\tmRNA\t500\t100\t.\t+\t.\tID=a1\n"
                   "chr1\ts\tgene\t101\t500\t.\t+\t.\tID=g\n");
  io::GeneSource src;
  const auto genes = io::read_genes(tmp.file("g.gff3"), &src);
  EXPECT_FALSE(src.from_transcripts);
  ASSERT_EQ(genes.size(), 1u);
  EXPECT_EQ(genes[0].start, 100u);
  test::write_file(tmp.file("m.gff3"),
                   "chr1\ts\tmRNA\t101\t500\t.\t+\t.\tID=a1\n"
                   "chr1\ts\tmRNA\t500\t100\t.\t+\t.\tID=a2\n"
                   "chr1\ts\tmRNA\t601\t700\t.\tx\t.\tID=a3\n");
  EXPECT_EQ(error_of([&] { io::read_genes(tmp.file("m.gff3")); }), tmp.file("m.gff3") + ":2: start 500 is after end 100");
}

// The fallback's loci against a brute-force reference: transcripts of one sequence and
// strand that share a base are joined (union-find over all pairs), a locus spans its
// group; gene_boundaries equals that of the same loci written as gene lines.
TEST(Annotation, TranscriptLociMatchBruteForceGroups) {
  TempDir tmp;
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  const std::vector<std::string> seqs = {"chrA", "chrB"};
  for (int round = 0; round < 50; ++round) {
    struct T {
      std::string seq;
      uint64_t start, end;
      char strand;
    };
    std::vector<T> ts;
    std::string text = "##gff-version 3\n";
    const size_t n = 2 + next(14);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t a = next(200), b = a + 1 + next(40);  // 0-based half-open
      ts.push_back({seqs[next(2)], a, b, next(2) ? '+' : '-'});
      text += fmt::format("{}\ts\t{}\t{}\t{}\t.\t{}\t.\tID=t{}\n", ts[i].seq, i % 3 ? "mRNA" : "transcript", a + 1, b,
                          ts[i].strand, i);
      text += fmt::format("{}\ts\tCDS\t{}\t{}\t.\t{}\t0\tParent=t{}\n", ts[i].seq, a + 1, b, ts[i].strand, i);
    }
    std::vector<size_t> parent(n);
    for (size_t i = 0; i < n; ++i) parent[i] = i;
    std::function<size_t(size_t)> find = [&](size_t x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
    bool joined = true;
    while (joined) {  // repeat until no pair joins: plain, not clever
      joined = false;
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j)
          if (ts[i].seq == ts[j].seq && ts[i].strand == ts[j].strand && ts[i].start < ts[j].end &&
              ts[j].start < ts[i].end && find(i) != find(j)) {
            parent[find(i)] = find(j);
            joined = true;
          }
    }
    std::map<size_t, std::tuple<std::string, uint64_t, uint64_t, char>> groups;
    for (size_t i = 0; i < n; ++i) {
      auto [it, fresh] = groups.try_emplace(find(i), ts[i].seq, ts[i].start, ts[i].end, ts[i].strand);
      if (!fresh) {
        std::get<1>(it->second) = std::min(std::get<1>(it->second), ts[i].start);
        std::get<2>(it->second) = std::max(std::get<2>(it->second), ts[i].end);
      }
    }
    std::vector<std::tuple<std::string, uint64_t, uint64_t, char>> want, got;
    std::string as_genes;
    for (const auto& [root, g] : groups) {
      want.push_back(g);
      as_genes += fmt::format("{}\ts\tgene\t{}\t{}\t.\t{}\t.\tID=g{}\n", std::get<0>(g), std::get<1>(g) + 1,
                              std::get<2>(g), std::get<3>(g), root);
    }
    test::write_file(tmp.file("m.gff3"), text);
    test::write_file(tmp.file("g.gff3"), as_genes);
    io::GeneSource src;
    for (const auto& g : io::read_genes(tmp.file("m.gff3"), &src)) got.emplace_back(g.seqid, g.start, g.end, g.strand);
    EXPECT_TRUE(src.from_transcripts);
    EXPECT_EQ(src.transcripts, n);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "round " << round << "\n" << text;
    EXPECT_EQ(io::gene_boundaries(tmp.file("m.gff3"), {"chrA", "chrB"}, {1000, 1000}),
              io::gene_boundaries(tmp.file("g.gff3"), {"chrA", "chrB"}, {1000, 1000}))
        << "round " << round;
  }
}
