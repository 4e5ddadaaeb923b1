// io/vcf.hpp: VCF parsing (multi-allelic, symbolic alleles, gzip), variant windows cut
// from a generated genome (checked by substring arithmetic), and the input errors.
#include "io/vcf.hpp"

#include <gtest/gtest.h>

#include "io/error.hpp"
#include "test_util.hpp"

namespace genemask::io {
namespace {

using test::TempDir;
using test::write_file;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Vcf, ReadsAllelesAndSkipsSymbolic) {
  TempDir d;
  const std::string vcf = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                          "chr1\t5\trs1\tA\tG\t.\t.\t.\n"
                          "1\t10\t.\tc\tT,AG,<DEL>\t.\t.\t.\n"
                          "\n"
                          "2\t3\trs3\tGA\tG,*\n";
  write_file(d.file("v.vcf"), vcf);
  test::write_gzip(d.file("v.vcf.gz"), vcf);
  for (const auto& path : {d.file("v.vcf"), d.file("v.vcf.gz")}) {
    VcfStats st;
    const auto v = read_vcf(path, &st);
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(st.records, 3u);
    EXPECT_EQ(st.skipped_symbolic, 2u);
    EXPECT_EQ(v[0].id, "rs1");
    EXPECT_EQ(v[0].pos, 5u);
    EXPECT_EQ(v[0].line, 3u);
    EXPECT_EQ(v[1].ref, "C");
    EXPECT_EQ(v[1].alt, "T");
    EXPECT_EQ(v[2].alt, "AG");
    EXPECT_EQ(v[2].line, 4u);
    EXPECT_EQ(v[3].chrom, "2");
    EXPECT_EQ(v[3].line, 6u);
  }
}

TEST(Vcf, BadLinesNameFileAndLine) {
  TempDir d;
  write_file(d.file("a.vcf"), "#CHROM\tPOS\tID\tREF\tALT\nchr1\tx\t.\tA\tG\n");
  EXPECT_NE(error_of([&] { read_vcf(d.file("a.vcf"), nullptr); }).find("a.vcf:2: POS 'x'"), std::string::npos);
  write_file(d.file("b.vcf"), "chr1\t4\t.\tA\n");
  EXPECT_NE(error_of([&] { read_vcf(d.file("b.vcf"), nullptr); }).find("b.vcf:1: 4 tab-separated fields"),
            std::string::npos);
  write_file(d.file("c.vcf"), "chr1\t4\t.\tA\tQ\n");
  EXPECT_NE(error_of([&] { read_vcf(d.file("c.vcf"), nullptr); }).find("c.vcf:1: ALT allele 'Q'"), std::string::npos);
}

TEST(Vcf, WindowsFromTheGenome) {
  TempDir d;
  const std::string c1 = "ACGTTGCAAGGCTTACGATCGGATCCAAGT", c2 = "TTTTGGGGCCCCAAAA";
  write_file(d.file("g.fa"), ">chr1 test\n" + c1.substr(0, 17) + "\n" + c1.substr(17) + "\n>chr2\n" + c2 + "\n");
  write_file(d.file("v.vcf"),
             "1\t10\tsnv\t" + c1.substr(9, 1) + "\tA\n"        // SNV, "1" matched to chr1
             "chr1\t20\tdel\t" + c1.substr(19, 3) + "\tG\n"    // deletion of 2 bases
             "chr1\t2\tedge\t" + c1.substr(1, 1) + "\tT\n"     // window runs off the start
             "chr2\t14\tins\t" + c2.substr(13, 1) + "\tAGT\n");  // insertion
  uint64_t off = 0;
  const auto w = cut_variant_windows(read_vcf(d.file("v.vcf"), nullptr), d.file("v.vcf"), d.file("g.fa"), 4, 2, &off);
  EXPECT_EQ(off, 1u);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].id, "snv");
  EXPECT_EQ(w[0].ref_seq, c1.substr(5, 7));
  EXPECT_EQ(w[0].alt_seq, c1.substr(5, 4) + "A" + c1.substr(10, 2));
  EXPECT_EQ(w[1].ref_seq, c1.substr(15, 4 + 3 + 2));
  EXPECT_EQ(w[1].alt_seq, c1.substr(15, 4) + "G" + c1.substr(22, 2));
  EXPECT_EQ(w[2].ref_seq, c2.substr(9, 7));
  EXPECT_EQ(w[2].alt_seq, c2.substr(9, 4) + "AGT" + c2.substr(14, 2));

  write_file(d.file("bad.vcf"), "#CHROM\tPOS\tID\tREF\tALT\nchr1\t3\t.\tA\tC\n");  // genome has G at 3
  const auto e = error_of([&] {
    cut_variant_windows(read_vcf(d.file("bad.vcf"), nullptr), d.file("bad.vcf"), d.file("g.fa"), 1, 1, nullptr);
  });
  EXPECT_NE(e.find("bad.vcf:2: REF 'A' does not match the genome 'G' at chr1:3"), std::string::npos) << e;
  write_file(d.file("chr.vcf"), "chrX\t3\t.\tA\tC\n");
  const auto e2 = error_of([&] {
    cut_variant_windows(read_vcf(d.file("chr.vcf"), nullptr), d.file("chr.vcf"), d.file("g.fa"), 1, 1, nullptr);
  });
  EXPECT_NE(e2.find("chr.vcf:1: chromosome 'chrX' is not in the genome"), std::string::npos) << e2;
  EXPECT_NE(e2.find("chr1, chr2"), std::string::npos) << e2;
}

TEST(Vcf, SequencePairsTsv) {
  TempDir d;
  write_file(d.file("p.tsv"), "id\tref_sequence\talt_sequence\textra\nv1\tacgtac\tACGTAA\tx\n\"v2\"\tGGGGGGG\tGGGCGGG\ty\n");
  const auto v = read_variant_tsv(d.file("p.tsv"));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].ref_seq, "ACGTAC");
  EXPECT_EQ(v[1].id, "v2");
  EXPECT_EQ(v[1].line, 3u);
  write_file(d.file("q.tsv"), "id\tref\talt\n");
  EXPECT_NE(error_of([&] { read_variant_tsv(d.file("q.tsv")); }).find("q.tsv:1: header"), std::string::npos);
  write_file(d.file("r.tsv"), "id\tref_sequence\talt_sequence\nv\tAC1T\tACGT\n");
  EXPECT_NE(error_of([&] { read_variant_tsv(d.file("r.tsv")); }).find("r.tsv:2: 'AC1T'"), std::string::npos);
  // U (RNA) made [UNK] 6-mers scored as sequence; a repeated id named two rows alike.
  write_file(d.file("u.tsv"), "id\tref_sequence\talt_sequence\nv\tACGUACGT\tACGTACGT\n");
  EXPECT_EQ(error_of([&] { read_variant_tsv(d.file("u.tsv")); }),
            d.file("u.tsv") + ":2: 'ACGUACGT': 'U' at position 4 is not a base (A, C, G, T, N or another IUPAC "
                              "code, any case)");
  write_file(d.file("i.tsv"), "id\tref_sequence\talt_sequence\nv\tACGTACGT\tACGAACGT\nw\tACGT\tACGA\n"
                              "v\tACGTAC\tACGTAA\n");
  EXPECT_EQ(error_of([&] { read_variant_tsv(d.file("i.tsv")); }),
            d.file("i.tsv") + ":4: id 'v' is also on line 2: give each variant its own id");
}

}  // namespace
}  // namespace genemask::io
