#include "io/annotation.hpp"

#include <gtest/gtest.h>

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
