// TSS readers (BED, SGA), genomic-benchmarks interval CSVs, name resolution and the
// whole-chromosome genome access of io/genome.hpp.
#include "io/bed.hpp"

#include <gtest/gtest.h>

#include "io/error.hpp"
#include "io/fai.hpp"
#include "io/genome.hpp"
#include "test_util.hpp"

using namespace genemask;

TEST(Bed, EpdnewBedRowsGiveTheTss) {
  test::TempDir d;
  // Rows of UCSC's EPDnew track (hg38): 60 bp = TSS-49..TSS+10, thick part = TSS..TSS+10.
  test::write_file(d.file("epd.bed"),
                   "chr1\t166839300\t166839360\tPOGK_2\t900\t+\t166839349\t166839360\n"
                   "chr1\t166166977\t166167037\tFAM78B_1\t900\t-\t166166977\t166166988\n");
  auto s = io::read_tss_bed(d.file("epd.bed"));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].pos, 166839349u);  // start + 49
  EXPECT_EQ(s[0].strand, '+');
  EXPECT_EQ(s[0].name, "POGK_2");
  EXPECT_EQ(s[1].pos, 166166987u);  // end - 1 - 49
  EXPECT_EQ(s[1].strand, '-');
  EXPECT_EQ(s[1].line, 2u);
  // The same rows without the thick columns need the offset.
  test::write_file(d.file("epd6.bed"),
                   "chr1\t166839300\t166839360\tPOGK_2\t900\t+\nchr1\t166166977\t166167037\tFAM78B_1\t900\t-\n");
  auto t = io::read_tss_bed(d.file("epd6.bed"), 49);
  EXPECT_EQ(t[0].pos, 166839349u);
  EXPECT_EQ(t[1].pos, 166166987u);
  EXPECT_THROW(io::read_tss_bed(d.file("epd6.bed"), 60), io::InputError);  // beyond the 60 bp interval
  auto u = io::read_tss_bed(d.file("epd6.bed"));  // the 5' ends
  EXPECT_EQ(u[0].pos, 166839300u);
  EXPECT_EQ(u[1].pos, 166167036u);
  // Thick columns present but empty (blank cells) are as absent: the 5' ends again. One of
  // them empty is refused.
  test::write_file(d.file("blank.bed"), "chr1\t166839300\t166839360\tPOGK_2\t900\t+\t\t\n"
                                        "chr1\t166166977\t166167037\tFAM78B_1\t900\t-\t\t\n");
  auto b = io::read_tss_bed(d.file("blank.bed"));
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].pos, 166839300u);
  EXPECT_EQ(b[1].pos, 166167036u);
  test::write_file(d.file("half.bed"), "chr1\t166839300\t166839360\tPOGK_2\t900\t+\t166839349\t\n");
  EXPECT_THROW(io::read_tss_bed(d.file("half.bed")), io::InputError);
}

TEST(Bed, SgaIsOneBased) {
  test::TempDir d;
  test::write_gzip(d.file("epd.sga.gz"), "NC_000001.11\tTSS\t166839350\t+\t1\tPOGK_2\nNC_000001.11\tTSS\t5\t-\t1\n");
  auto s = io::read_tss(d.file("epd.sga.gz"));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].chrom, "NC_000001.11");
  EXPECT_EQ(s[0].pos, 166839349u);
  EXPECT_EQ(s[0].name, "POGK_2");
  EXPECT_EQ(s[1].pos, 4u);
  EXPECT_EQ(s[1].name, "");
}

TEST(Bed, ErrorsNameFileLineValue) {
  test::TempDir d;
  auto err = [&](const std::string& name, const std::string& text) {
    test::write_file(d.file(name), text);
    return test::error_of([&] { io::read_tss(d.file(name)); });
  };
  std::string m = err("a.bed", "chr1\t10\t11\tP\t0\t+\nchr1\tx\t11\tP\t0\t+\n");
  EXPECT_NE(m.find("a.bed:2:"), std::string::npos) << m;
  EXPECT_NE(m.find("'x'"), std::string::npos) << m;
  m = err("b.bed", "chr1\t10\t11\n");
  EXPECT_NE(m.find("b.bed:1:"), std::string::npos) << m;
  EXPECT_NE(m.find("at least 6"), std::string::npos) << m;
  m = err("c.bed", "chr1\t11\t11\tP\t0\t+\n");
  EXPECT_NE(m.find("not after start"), std::string::npos) << m;
  m = err("d.sga", "chr1\tTSS\t0\t+\t1\n");
  EXPECT_NE(m.find("d.sga:1:"), std::string::npos) << m;
  EXPECT_NE(m.find("1-based"), std::string::npos) << m;
  m = err("e.sga", "chr1\tTSS\t10\t*\t1\n");
  EXPECT_NE(m.find("strand must be '+' or '-', found '*' (TSS windows are strand-aware)"), std::string::npos) << m;
  m = err("f.bed", "# nothing\n");
  EXPECT_NE(m.find("no BED records"), std::string::npos) << m;
}

TEST(Bed, IntervalCsv) {
  test::TempDir d;
  test::write_file(d.file("p.csv"), "id,region,start,end,strand\n7,chr2,100,600,-\nx,chrX,0,500,+\n");
  auto r = io::read_interval_csv(d.file("p.csv"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, "7");
  EXPECT_EQ(r[0].chrom, "chr2");
  EXPECT_EQ(r[0].start, 100u);
  EXPECT_EQ(r[0].end, 600u);
  EXPECT_EQ(r[0].strand, '-');
  EXPECT_EQ(r[1].line, 3u);
  test::write_file(d.file("bad.csv"), "id,contig,start,end\n");
  EXPECT_NE(test::error_of([&] { io::read_interval_csv(d.file("bad.csv")); }).find("lacks the columns"),
            std::string::npos);
  test::write_file(d.file("bad2.csv"), "id,region,start,end,strand\n1,chr1,50,40,+\n");
  std::string m = test::error_of([&] { io::read_interval_csv(d.file("bad2.csv")); });
  EXPECT_NE(m.find("bad2.csv:2:"), std::string::npos) << m;
  // An enhancer interval's strand: said as what it does there, not as a TSS's.
  test::write_file(d.file("bad3.csv"), "id,region,start,end,strand\n1,chr1,40,50,*\n");
  EXPECT_EQ(test::error_of([&] { io::read_interval_csv(d.file("bad3.csv")); }),
            d.file("bad3.csv") + ":2: strand must be '+' or '-' (or '.'), found '*' (a '-' interval is read as its "
                                 "reverse complement)");
}

TEST(Bed, RefseqNames) {
  EXPECT_EQ(io::refseq_to_ucsc("NC_000001.11"), "chr1");
  EXPECT_EQ(io::refseq_to_ucsc("NC_000022.10"), "chr22");
  EXPECT_EQ(io::refseq_to_ucsc("NC_000023.11"), "chrX");
  EXPECT_EQ(io::refseq_to_ucsc("NC_000067.6"), "chr1");
  EXPECT_EQ(io::refseq_to_ucsc("NC_000085.6"), "chr19");
  EXPECT_EQ(io::refseq_to_ucsc("NC_000086.7"), "chrX");
  EXPECT_EQ(io::refseq_to_ucsc("NC_012920.1"), "chrM");
  EXPECT_EQ(io::refseq_to_ucsc("NC_000050.1"), "");
  EXPECT_EQ(io::refseq_to_ucsc("chr1"), "");
}

// An SGA file mixing NC_000001.10 (GRCh37), NC_000001.11 (GRCh38) and NC_000067.6 (mouse
// chr1) was cut from one genome's chr1 without a word.
TEST(Genome, RefSeqAccessionsOfTwoAssembliesOrOrganismsAreRefused) {
  io::SeqidResolver r({"chr1", "chr2"});
  EXPECT_EQ(r.resolve("NC_000001.11", "t.sga", 1, "g.fa"), 0u);
  EXPECT_EQ(r.resolve("NC_000002.12", "t.sga", 2, "g.fa"), 1u);
  EXPECT_EQ(r.resolve("NC_000001.11", "t.sga", 3, "g.fa"), 0u);
  EXPECT_EQ(test::error_of([&] { r.resolve("NC_000001.10", "t.sga", 4, "g.fa"); }),
            "t.sga:4: sequences 'NC_000001.10' and 'NC_000001.11' (t.sga:1) are RefSeq accessions of two assemblies "
            "(two versions of one chromosome): their positions would all be cut from the one genome g.fa; give "
            "coordinates of one assembly, the genome's");
  io::SeqidResolver mixed({"chr1", "chr2"});
  EXPECT_EQ(mixed.resolve("NC_000001.11", "m.sga", 1, "g.fa"), 0u);
  EXPECT_NE(test::error_of([&] { mixed.resolve("NC_000068.8", "m.sga", 2, "g.fa"); })
                .find("m.sga:2: sequences 'NC_000068.8' and 'NC_000001.11' (m.sga:1) are RefSeq accessions of two "
                      "organisms"),
            std::string::npos);
  EXPECT_EQ(io::refseq_organism("NC_000067.7"), "mouse");
  EXPECT_EQ(io::refseq_organism("NC_012920.1"), "human");
  EXPECT_EQ(io::refseq_organism("chr1"), "");
}

TEST(Genome, ResolverOrderAndError) {
  io::SeqidResolver r({"chr1", "chr2", "1", "scaffold_9"}, {{"contigA", "scaffold_9"}});
  EXPECT_EQ(r.resolve("1", "f", 1, "g"), 2u);  // exact beats the chr-prefix match
  EXPECT_EQ(r.resolve("2", "f", 1, "g"), 1u);
  EXPECT_EQ(r.resolve("contigA", "f", 1, "g"), 3u);
  EXPECT_EQ(r.resolve("NC_000002.12", "f", 1, "g"), 1u);
  std::string m = test::error_of([&] { r.resolve("chrQ", "t.bed", 7, "g.fa"); });
  EXPECT_NE(m.find("t.bed:7:"), std::string::npos) << m;
  EXPECT_NE(m.find("'chrQ'"), std::string::npos) << m;
  EXPECT_NE(m.find("chr1, chr2, 1, scaffold_9"), std::string::npos) << m;
  // The user's alias comes before the chr prefix (the documented order): chr1 mapped to
  // record 2 was read from record 1. An alias to a name the genome lacks is an error.
  io::SeqidResolver mapped({"1", "2"}, {{"chr1", "2"}, {"chrZ", "9"}});
  EXPECT_EQ(mapped.resolve("chr1", "f", 1, "g"), 1u);
  EXPECT_EQ(mapped.resolve("chr2", "f", 1, "g"), 1u);  // no alias: the chr prefix removed
  EXPECT_EQ(test::error_of([&] { mapped.resolve("chrZ", "t.bed", 3, "g.fa"); }),
            "t.bed:3: sequence 'chrZ' is mapped by --chrom-map to '9', which is not a record of the genome g.fa (its "
            "records: 1, 2); correct the map");
}

TEST(Genome, ChromMapNamesOneRecordPerName) {
  test::TempDir d;
  test::write_file(d.file("m.tsv"), "# aliases\nX\tA\nY\tB\nX\tA\n");
  EXPECT_EQ(io::read_chrom_map(d.file("m.tsv")),
            (std::vector<std::pair<std::string, std::string>>{{"X", "A"}, {"Y", "B"}}));
  test::write_file(d.file("two.tsv"), "X\tA\nY\tB\nX\tB\n");
  EXPECT_EQ(test::error_of([&] { io::read_chrom_map(d.file("two.tsv")); }),
            d.file("two.tsv") + ":3: maps 'X' to 'B', but line 1 maps it to 'A': one name, one record");
}

// A UTF-8 byte-order mark (a spreadsheet's or Notepad's "UTF-8 with BOM") before the first
// line is skipped by the one line reader every text input goes through: a --chrom-map saved
// so kept the mark on its first name, which then never matched and fell through to the chr
// prefix without a word (chr1 read from record 1 instead of the alias's 2).
TEST(Genome, AByteOrderMarkIsNotPartOfTheFirstLine) {
  test::TempDir d;
  const std::string bom = "\xEF\xBB\xBF";
  test::write_file(d.file("m.tsv"), bom + "chr1\t2\n");
  test::write_gzip(d.file("m.tsv.gz"), bom + "chr1\t2\n");
  for (const char* f : {"m.tsv", "m.tsv.gz"}) {
    const auto map = io::read_chrom_map(d.file(f));
    EXPECT_EQ(map, (std::vector<std::pair<std::string, std::string>>{{"chr1", "2"}})) << f;
    io::SeqidResolver mapped({"1", "2"}, map);
    EXPECT_EQ(mapped.resolve("chr1", "t.bed", 1, "g.fa"), 1u) << f;
  }
  test::write_file(d.file("t.bed"), bom + "chr1\t100\t160\tP_1\t900\t+\n");
  const auto bed = io::read_tss_bed(d.file("t.bed"));
  ASSERT_EQ(bed.size(), 1u);
  EXPECT_EQ(bed[0].chrom, "chr1");
  test::write_file(d.file("t.sga"), bom + "chr1\tTSS\t101\t+\t1\tP_1\n");
  EXPECT_EQ(io::read_tss_sga(d.file("t.sga")).at(0).chrom, "chr1");
  // Only before line 1: the same bytes later are the line's own.
  test::write_file(d.file("two.tsv"), "chr2\t1\n" + bom + "chr1\t2\n");
  EXPECT_EQ(io::read_chrom_map(d.file("two.tsv"))[1].first, bom + "chr1");
}

// An index left from a FASTA since replaced (an older download's .fai, newer than the new
// FASTA because curl -R keeps the server's time) gave its lengths to the builders, whose
// "beyond the end" checks then passed silently: the record's real length is compared.
TEST(Genome, AStaleIndexIsNamedWhenTheRecordIsRead) {
  test::TempDir d;
  test::write_file(d.file("g.fa"), ">a\nACGTACGTAC\n>b\nTTTT\n");
  test::write_file(d.file("g.fa.fai"), "a\t5000\t3\t10\t11\nb\t4\t17\t4\t5\n");
  const auto recs = io::genome_records(d.file("g.fa"));
  ASSERT_EQ(recs[0].length, 5000u);  // the index is trusted for the lengths
  const std::string stale = "; is " + d.file("g.fa") + ".fai the index of another FASTA? Remove it (or index again "
                                                        "with samtools faidx) and run again";
  EXPECT_EQ(test::error_of([&] { io::for_each_wanted_record(d.file("g.fa"), recs, {true, false}, [](size_t, const std::string&) {}); }),
            d.file("g.fa") + ": record 'a' has 10 bases, but the genome's index says 5000" + stale);
  size_t seen = 0;
  io::for_each_wanted_record(d.file("g.fa"), recs, {false, true}, [&](size_t r, const std::string& s) {
    EXPECT_EQ(r, 1u);
    EXPECT_EQ(s, "TTTT");
    ++seen;
  });
  EXPECT_EQ(seen, 1u);
  test::write_file(d.file("g.fa.fai"), "a\t10\t3\t10\t11\nb\t4\t17\t4\t5\nc\t7\t30\t7\t8\n");
  EXPECT_EQ(test::error_of([&] {
              io::for_each_wanted_record(d.file("g.fa"), io::genome_records(d.file("g.fa")), {false, false, true},
                                         [](size_t, const std::string&) {});
            }),
            d.file("g.fa") + ": has no record 'c', which the genome's index lists" + stale);
}

TEST(Genome, RecordsAndChromosomesInEveryForm) {
  test::TempDir d;
  const std::string text = ">a desc\nACgtN\nAC\n>b\nTTTT\n>c\nGGGGGGGG\n";
  test::write_file(d.file("g.fa"), text);
  test::write_gzip(d.file("g.fa.gz"), text);
  test::write_bgzf(d.file("g.bgz.fa.gz"), text, 7);
  for (const char* f : {"g.fa", "g.fa.gz", "g.bgz.fa.gz"}) {
    auto recs = io::genome_records(d.file(f));
    ASSERT_EQ(recs.size(), 3u) << f;
    EXPECT_EQ(recs[0].name, "a");
    EXPECT_EQ(recs[0].length, 7u);
    EXPECT_EQ(recs[2].length, 8u);
    std::vector<std::pair<std::string, std::string>> got;
    io::for_each_chromosome(
        d.file(f), [](const std::string& n) { return n != "b"; },
        [&](const std::string& n, const std::string& s) { got.emplace_back(n, s); });
    ASSERT_EQ(got.size(), 2u) << f;
    EXPECT_EQ(got[0], std::make_pair(std::string("a"), std::string("ACGTNAC")));
    EXPECT_EQ(got[1], std::make_pair(std::string("c"), std::string("GGGGGGGG")));
  }
  // A current .fai is used (its lengths, without reading the FASTA); a stale one is not.
  io::FaiIndex::build(d.file("g.fa")).write(d.file("g.fa.fai"));
  EXPECT_EQ(io::genome_records(d.file("g.fa")).size(), 3u);
  test::write_file(d.file("g.fa.fai"), "a\t999\t8\t5\t6\n");
  EXPECT_EQ(io::genome_records(d.file("g.fa"))[0].length, 999u);  // trusted: not older than the FASTA
}
