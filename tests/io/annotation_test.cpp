#include "io/annotation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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
  auto b = io::gene_boundaries(tmp.file("a.gtf"), {"chr1", "chrM"});
  EXPECT_EQ(b[0], (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(b[1], (std::vector<uint64_t>{4, 9}));
  test::write_file(tmp.file("a.gff3"),
                   "##gff-version 3\n"
                   "chr2\tsrc\tncRNA_gene\t1\t100\t.\t+\t.\tID=g1\n"
                   "chr2\tsrc\tgene\t50\t60\t.\t?\t.\tID=g2\n"
                   "##FASTA\n>chr2\nACGT\n");
  auto g = io::gene_boundaries(tmp.file("a.gff3"), {"2"});
  EXPECT_EQ(g[0], (std::vector<uint64_t>{0, 49, 60, 100}));
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
