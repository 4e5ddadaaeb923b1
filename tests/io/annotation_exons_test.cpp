// io::read_transcript_exons: exons grouped by transcript from GTF and GFF3.
#include <gtest/gtest.h>

#include "io/annotation.hpp"
#include "io/text_source.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::error_of;
using genemask::test::TempDir;
using Exons = std::vector<std::pair<uint64_t, uint64_t>>;

TEST(AnnotationExons, GtfGroupsByTranscriptIdSortsAndConvertsToHalfOpen) {
  TempDir tmp;
  // Exons out of order, a gene line and a CDS line (ignored), two transcripts interleaved.
  test::write_file(tmp.file("a.gtf"),
                   "#!genome-build test\n"
                   "chr1\tsrc\tgene\t6\t60\t.\t+\t.\tgene_id \"G1\";\n"
                   "chr1\tsrc\texon\t26\t35\t.\t+\t.\tgene_id \"G1\"; transcript_id \"T1\"; exon_number \"2\";\n"
                   "chr1\tsrc\texon\t6\t15\t.\t+\t.\tgene_id \"G1\"; transcript_id \"T1\";\n"
                   "chr2\tsrc\texon\t37\t48\t.\t-\t.\tgene_id \"G2\"; transcript_id \"T2\";\n"
                   "chr1\tsrc\tCDS\t8\t15\t.\t+\t0\tgene_id \"G1\"; transcript_id \"T1\";\n"
                   "chr1\tsrc\texon\t51\t60\t.\t+\t.\tgene_id \"G1\";transcript_id T1;\n"
                   "chr2\tsrc\texon\t9\t20\t.\t-\t.\tgene_id \"G2\"; transcript_id \"T2\";\n");
  auto t = io::read_transcript_exons(tmp.file("a.gtf"));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].id, "T1");
  EXPECT_EQ(t[0].seqid, "chr1");
  EXPECT_EQ(t[0].strand, '+');
  EXPECT_EQ(t[0].line, 3u);
  EXPECT_EQ(t[0].exons, (Exons{{5, 15}, {25, 35}, {50, 60}}));
  EXPECT_EQ(t[1].id, "T2");
  EXPECT_EQ(t[1].strand, '-');
  EXPECT_EQ(t[1].line, 5u);
  EXPECT_EQ(t[1].exons, (Exons{{8, 20}, {36, 48}}));
}

TEST(AnnotationExons, Gff3ParentsIncludingSeveralAndPercentEncodedAndGzip) {
  TempDir tmp;
  const std::string text =
      "##gff-version 3\n"
      "chr1\tsrc\tmRNA\t6\t60\t.\t+\t.\tID=T1;Parent=G1\n"
      "chr1\tsrc\texon\t6\t15\t.\t+\t.\tID=e1;Parent=T1,T%2C2\n"
      "chr1\tsrc\texon\t51\t60\t.\t+\t.\tParent=T1\n"
      "chr1\tsrc\texon\t41\t45\t.\t+\t.\tParent=T%2C2\n"
      "##FASTA\n>chr1\nACGT\n";
  test::write_gzip(tmp.file("a.gff3.gz"), text);
  auto t = io::read_transcript_exons(tmp.file("a.gff3.gz"));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].id, "T1");
  EXPECT_EQ(t[0].exons, (Exons{{5, 15}, {50, 60}}));
  EXPECT_EQ(t[1].id, "T,2");
  EXPECT_EQ(t[1].exons, (Exons{{5, 15}, {40, 45}}));
}

TEST(AnnotationExons, OverlappingOrTouchingExonsMergeAndSameIdOnTwoSequencesIsTwoTranscripts) {
  TempDir tmp;
  test::write_file(tmp.file("b.gff3"),
                   "X\ts\texon\t1\t10\t.\t+\t.\tParent=T\n"
                   "X\ts\texon\t11\t20\t.\t+\t.\tParent=T\n"   // touches: no intron between
                   "X\ts\texon\t5\t8\t.\t+\t.\tParent=T\n"     // inside: duplicate-like
                   "X\ts\texon\t31\t40\t.\t+\t.\tParent=T\n"
                   "Y\ts\texon\t31\t40\t.\t+\t.\tParent=T\n");
  auto t = io::read_transcript_exons(tmp.file("b.gff3"));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].seqid, "X");
  EXPECT_EQ(t[0].exons, (Exons{{0, 20}, {30, 40}}));
  EXPECT_EQ(t[1].seqid, "Y");
  EXPECT_EQ(t[1].exons, (Exons{{30, 40}}));
}

TEST(AnnotationExons, ErrorsNameFileLineAndAttribute) {
  TempDir tmp;
  test::write_file(tmp.file("c.gtf"),
                   "chr1\ts\texon\t1\t10\t.\t+\t.\tgene_id \"G\"; transcript_id \"T\";\n"
                   "chr1\ts\texon\t21\t30\t.\t+\t.\tgene_id \"G\"; transcript_name \"T\";\n");
  EXPECT_EQ(error_of([&] { io::read_transcript_exons(tmp.file("c.gtf")); }),
            tmp.file("c.gtf") +
                ":2: GTF exon line without a transcript_id attribute (expected e.g. transcript_id \"T1\"; in "
                "column 9): exons are grouped into transcripts by it");
  test::write_file(tmp.file("d.gff3"), "chr1\ts\texon\t1\t10\t.\t+\t.\tID=e1\n");
  EXPECT_EQ(error_of([&] { io::read_transcript_exons(tmp.file("d.gff3")); }),
            tmp.file("d.gff3") +
                ":1: GFF3 exon line without a Parent attribute (expected e.g. Parent=transcript:T1 in column 9): "
                "exons are grouped into transcripts by it");
  test::write_file(tmp.file("e.gff3"),
                   "chr1\ts\texon\t1\t10\t.\t+\t.\tParent=T\n"
                   "chr1\ts\texon\t21\t30\t.\t-\t.\tParent=T\n");
  EXPECT_EQ(error_of([&] { io::read_transcript_exons(tmp.file("e.gff3")); }),
            tmp.file("e.gff3") + ":2: exon of transcript 'T' on strand '-', but its exon at line 1 is on '+'");
  test::write_file(tmp.file("f.gtf"), "chr1\ts\texon\t0\t10\t.\t+\t.\ttranscript_id \"T\";\n");
  EXPECT_EQ(error_of([&] { io::read_transcript_exons(tmp.file("f.gtf")); }),
            tmp.file("f.gtf") + ":1: column 4 (start) is not a positive integer: '0'");
  test::write_file(tmp.file("g.gtf"), "chr1\ts\tgene\t1\t10\t.\t+\t.\tgene_id \"G\";\n");
  EXPECT_EQ(error_of([&] { io::read_transcript_exons(tmp.file("g.gtf")); }),
            tmp.file("g.gtf") + ": no features of type 'exon' found: is this a GTF/GFF3 annotation with exons?");
}

// A GTF cut short inside a quoted transcript_id (a truncated download's last line) made a
// transcript of its own, '"E2', and took E2's intron and sites away without a word.
TEST(AnnotationExons, AnUnclosedQuoteIsAnErrorAndASemicolonInQuotesIsPartOfTheValue) {
  TempDir tmp;
  const std::string whole = "chr1\ts\texon\t1\t10\t.\t+\t.\tgene_id \"G\"; transcript_id \"E2\";\n"
                            "chr1\ts\texon\t21\t30\t.\t+\t.\tgene_id \"G\"; transcript_id \"E2\";\n";
  test::write_file(tmp.file("cut.gtf"), whole.substr(0, whole.size() - 3));  // ends: transcript_id "E2
  EXPECT_EQ(error_of([&] { io::read_transcript_exons(tmp.file("cut.gtf")); }),
            tmp.file("cut.gtf") + ":2: attribute transcript_id has the value '\"E2', whose double quote is never "
                                  "closed: the line is cut short (a truncated file?) or malformed");
  test::write_file(tmp.file("whole.gtf"), whole);
  ASSERT_EQ(io::read_transcript_exons(tmp.file("whole.gtf")).size(), 1u);
  test::write_file(tmp.file("semi.gtf"), "chr1\ts\texon\t1\t10\t.\t+\t.\ttranscript_id \"a;b\"; gene_id \"G\";\n");
  const auto t = io::read_transcript_exons(tmp.file("semi.gtf"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].id, "a;b");
}

// A GFF3 cut short (Parent=transcript:E of transcript:E2, no line end) made a transcript of
// its own without a word: GFF3 has no quote to miss. A last line without a line end is said.
TEST(AnnotationExons, ALastLineWithoutALineEndIsSaid) {
  TempDir tmp;
  const std::string whole = "chr1\ts\texon\t1\t10\t.\t+\t.\tParent=transcript:E2\n"
                            "chr1\ts\texon\t21\t30\t.\t+\t.\tParent=transcript:E2\n";
  test::write_file(tmp.file("cut.gff3"), whole.substr(0, whole.size() - 2));
  testing::internal::CaptureStderr();
  EXPECT_EQ(io::read_transcript_exons(tmp.file("cut.gff3")).size(), 2u);  // read as it is
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "genemask: warning: " + tmp.file("cut.gff3") + ":2: the last line has no line end: if the file was cut "
            "short (a truncated download or copy), its last feature may be partial and was read as it is; check "
            "the file (a whole file ends its last line; the summary lists it: unterminated_inputs)\n");
  test::write_file(tmp.file("whole.gff3"), whole);
  testing::internal::CaptureStderr();
  EXPECT_EQ(io::read_transcript_exons(tmp.file("whole.gff3")).size(), 1u);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(io::for_each_line(tmp.file("cut.gff3"), [](const std::string&, uint64_t) {}));
  EXPECT_FALSE(io::for_each_line(tmp.file("whole.gff3"), [](const std::string&, uint64_t) {}));
}

TEST(AnnotationExons, ReadGenesStillIgnoresExons) {
  TempDir tmp;
  test::write_file(tmp.file("h.gtf"),
                   "1\ts\tgene\t11\t20\t.\t+\t.\tgene_id \"G1\";\n"
                   "1\ts\texon\t11\t15\t.\t+\t.\tgene_id \"G1\"; transcript_id \"T1\";\n");
  auto g = io::read_genes(tmp.file("h.gtf"));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].start, 10u);
  auto t = io::read_transcript_exons(tmp.file("h.gtf"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].exons, (Exons{{10, 15}}));
}
