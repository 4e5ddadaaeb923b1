#include "io/fasta.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <functional>

#include "io/error.hpp"
#include "io/fai.hpp"
#include "io/text_source.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::TempDir;
using genemask::test::error_of;

namespace {


std::vector<std::pair<std::string, std::string>> upper_records(const test::Genome& g) {
  std::vector<std::pair<std::string, std::string>> out;
  auto up = g.upper();
  for (size_t i = 0; i < up.size(); ++i) out.emplace_back(g.records[i].first, up[i]);
  return out;
}

}  // namespace

TEST(FastaReader, ReadsEveryLayoutAndCompression) {
  TempDir tmp;
  std::mt19937_64 rng(7);
  for (int width : {60, 1, 0, -1}) {
    for (bool crlf : {false, true}) {
      test::GenomeSpec spec;
      spec.records = 4;
      spec.line_width = width;
      spec.crlf = crlf;
      spec.blank_lines = width == 60;
      auto g = test::random_genome(rng, spec);
      const auto want = upper_records(g);
      test::write_file(tmp.file("g.fa"), g.fasta);
      test::write_gzip(tmp.file("g.fa.gz"), g.fasta, 3);
      test::write_bgzf(tmp.file("g.bgz.fa.gz"), g.fasta, 333);
      for (const char* f : {"g.fa", "g.fa.gz", "g.bgz.fa.gz"}) {
        SCOPED_TRACE(std::string(f) + " width " + std::to_string(width) + (crlf ? " crlf" : ""));
        EXPECT_EQ(io::read_fasta_all(tmp.file(f)), want);
      }
    }
  }
}

TEST(FastaReader, DetectsCompressionByContent) {
  TempDir tmp;
  test::write_file(tmp.file("plain.gz"), ">a\nACGT\n");
  test::write_gzip(tmp.file("gz.fa"), ">a\nACGT\n");
  test::write_bgzf(tmp.file("b.fa"), ">a\nACGT\n");
  EXPECT_EQ(io::probe_file(tmp.file("plain.gz")).compression, io::Compression::none);
  EXPECT_EQ(io::probe_file(tmp.file("gz.fa")).compression, io::Compression::gzip);
  EXPECT_EQ(io::probe_file(tmp.file("b.fa")).compression, io::Compression::bgzf);
}

// A bzip2, xz, zstd or zip file was read as text: "invalid base byte 0x80" at some line of
// each rank's share, never that the file is compressed. Named by its magic bytes (the headers
// as bzip2 1.0.8, xz 5.4, zstd 1.5 and zip write them); a text that begins as one is text.
TEST(FastaReader, OtherCompressionsAreNamed) {
  TempDir tmp;
  const std::pair<std::string, std::string> files[] = {
      {"bzip2", std::string("BZh91AY&SY\x8b\x1c\x0c\xb1", 14)},
      {"bzip2", std::string("BZh9\x17rE8P\x90\0\0\0\0", 14)},  // an empty stream
      {"xz", std::string("\xfd" "7zXZ\0\0\x04\xe6\xd6\xb4\x46", 12)},
      {"zstd", std::string("\x28\xb5\x2f\xfd\x24\x05\x29\x00", 8)},
      {"zip", std::string("PK\x03\x04\x14\0\0\0", 8)}};
  for (const auto& [what, bytes] : files) {
    test::write_file(tmp.file("x"), bytes + std::string(64, 'x'));
    EXPECT_EQ(test::error_of([&] { io::probe_file(tmp.file("x")); }),
              tmp.file("x") + ": is compressed with " + what + ", which genemask does not read (it reads plain text, "
                                                            "gzip and bgzip); decompress it, or recompress it with bgzip");
  }
  test::write_file(tmp.file("t"), "BZh1 is a name\nACGT\n");
  EXPECT_EQ(io::probe_file(tmp.file("t")).compression, io::Compression::none);
  test::write_file(tmp.file("short"), "BZ");
  EXPECT_EQ(io::probe_file(tmp.file("short")).compression, io::Compression::none);
}

TEST(FastaReader, SoftMaskedAndIupacAreKeptUpperCase) {
  TempDir tmp;
  test::write_file(tmp.file("g.fa"), ">chr1 test\nacgtNNryACGT\n>chr2\nGATTACA\n");
  auto r = io::read_fasta_all(tmp.file("g.fa"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first, "chr1");
  EXPECT_EQ(r[0].second, "ACGTNNRYACGT");
  EXPECT_EQ(r[1].second, "GATTACA");
}

TEST(FastaErrors, NotFasta) {
  TempDir tmp;
  test::write_file(tmp.file("x.fa"), "\nhello world\n>a\nACGT\n");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("x.fa")); }),
            tmp.file("x.fa") + ":2: not a FASTA file: the first line must start with '>' (found 'h')");
  // Regression (found by the fuzzer): a first line that starts with '\r' but is not empty.
  test::write_file(tmp.file("cr.fa"), "\r1chr1 x\nACGT");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("cr.fa")); }),
            tmp.file("cr.fa") + ":1: not a FASTA file: the first line must start with '>'");
  test::write_file(tmp.file("crlf.fa"), "\r\n\r\n>a\r\nAC\r\n");
  EXPECT_EQ(io::read_fasta_all(tmp.file("crlf.fa")).at(0).second, "AC");
  test::write_file(tmp.file("empty.fa"), "");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("empty.fa")); }),
            tmp.file("empty.fa") + ":1: not a FASTA file: it is empty");
}

TEST(FastaErrors, EmptyRecordDuplicateNameInvalidBase) {
  TempDir tmp;
  test::write_file(tmp.file("e.fa"), ">a\nACGT\n>b\n>c\nAC\n");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("e.fa")); }), tmp.file("e.fa") + ":3: record 'b' has no sequence");
  test::write_file(tmp.file("e2.fa"), ">a\nACGT\n>b\n");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("e2.fa")); }), tmp.file("e2.fa") + ":3: record 'b' has no sequence");
  test::write_file(tmp.file("d.fa"), ">a x\nACGT\n>b\nAA\n>a y\nCC\n");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("d.fa")); }),
            tmp.file("d.fa") + ":5: duplicate record name 'a' (first seen on line 1); record names must be unique");
  test::write_file(tmp.file("j.fa"), ">chr7\nACGT\nACJT\n");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("j.fa")); }),
            tmp.file("j.fa") + ":3: invalid base 'J' in record 'chr7' (allowed: ACGT, N and IUPAC codes, '-', '*')");
  test::write_file(tmp.file("n.fa"), "> \nACGT\n");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("n.fa")); }),
            tmp.file("n.fa") + ":1: empty record name after '>' (every record needs a name)");
}

TEST(FastaErrors, BinaryGarbage) {
  TempDir tmp;
  std::string bin = ">a\nACGT\n";
  bin += std::string("\x7f\x45\x4c\x46\x02\x01\x00\x00", 8);
  test::write_file(tmp.file("b.fa"), bin);
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("b.fa")); }),
            tmp.file("b.fa") + ":3: invalid base byte 0x7f in record 'a' (allowed: ACGT, N and IUPAC codes, '-', '*')");
  test::write_file(tmp.file("h.fa"), std::string(">a\x01\nAC\n"));
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("h.fa")); }),
            tmp.file("h.fa") + ":1: invalid byte 0x01 in header line: binary data?");
}

TEST(FastaErrors, TruncatedCompressedInput) {
  TempDir tmp;
  std::mt19937_64 rng(3);
  auto g = test::random_genome(rng, test::GenomeSpec{});
  test::write_gzip(tmp.file("t.fa.gz"), g.fasta);
  std::string gz = test::read_file(tmp.file("t.fa.gz"));
  test::write_file(tmp.file("t.fa.gz"), gz.substr(0, gz.size() / 2));
  EXPECT_NE(error_of([&] { io::read_fasta_all(tmp.file("t.fa.gz")); }).find("truncated gzip stream"), std::string::npos);
  test::write_bgzf(tmp.file("t.bgz"), g.fasta, 500);
  std::string bg = test::read_file(tmp.file("t.bgz"));
  test::write_file(tmp.file("t.bgz"), bg.substr(0, bg.size() / 2));
  EXPECT_NE(error_of([&] { io::read_fasta_all(tmp.file("t.bgz")); }).find("without its end-of-file block"),
            std::string::npos);
  // A block cut short before a whole end-of-file block (a damaged middle): named by its byte.
  test::write_file(tmp.file("t2.bgz"), bg.substr(0, 100) + bg.substr(bg.size() - 28));
  EXPECT_NE(error_of([&] { io::read_fasta_all(tmp.file("t2.bgz")); }).find("BGZF"), std::string::npos);
  // Garbage after a complete gzip member.
  test::write_file(tmp.file("g.fa.gz"), gz + "garbage");
  EXPECT_NE(error_of([&] { io::read_fasta_all(tmp.file("g.fa.gz")); }).find("corrupt gzip data"), std::string::npos);
  // Zeros to the end after a complete member: what a download that reserved the file's size
  // and stopped leaves behind (here over a whole member; at a member boundary of a multi-member
  // file the data before them reads fine). Refused as that, with the count and where.
  test::write_file(tmp.file("z.fa.gz"), gz + std::string(70000, '\0'));
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("z.fa.gz")); }),
            tmp.file("z.fa.gz") + ": 70000 zero bytes follow the last gzip member (from byte " +
                std::to_string(gz.size()) +
                " to the end): a download that reserved the file's size and stopped leaves zeros where data should "
                "be, so the file may be cut short; download it again (a whole file so padded is read once the zeros "
                "are dropped: `gzip -dc F | gzip > F2`)");
  // Zeros and then other bytes: not that, the plain refusal.
  test::write_file(tmp.file("zg.fa.gz"), gz + std::string(10, '\0') + "x");
  EXPECT_NE(error_of([&] { io::read_fasta_all(tmp.file("zg.fa.gz")); }).find("data after the end of the gzip stream is "
                                                                             "not gzip"),
            std::string::npos);
}

TEST(FastaErrors, MissingFile) {
  EXPECT_EQ(error_of([&] { io::read_fasta_all("/nonexistent/g.fa"); }),
            "/nonexistent/g.fa: cannot open: No such file or directory");
}

TEST(Fai, BuildMatchesRecordsAndFetchesRegions) {
  TempDir tmp;
  std::mt19937_64 rng(11);
  test::GenomeSpec spec;
  spec.records = 5;
  spec.line_width = 50;
  auto g = test::random_genome(rng, spec);
  test::write_file(tmp.file("g.fa"), g.fasta);
  auto idx = io::FaiIndex::build(tmp.file("g.fa"));
  idx.write(tmp.file("g.fa.fai"));
  auto loaded = io::FaiIndex::load(tmp.file("g.fa.fai"));
  const auto up = g.upper();
  ASSERT_EQ(loaded.entries().size(), g.records.size());
  for (size_t r = 0; r < up.size(); ++r) {
    const auto& e = loaded.entries()[r];
    EXPECT_EQ(e.name, g.records[r].first);
    EXPECT_EQ(e.length, up[r].size());
    for (int t = 0; t < 50; ++t) {
      uint64_t a = rng() % (up[r].size() + 1), b = rng() % (up[r].size() + 1);
      if (a > b) std::swap(a, b);
      EXPECT_EQ(io::fetch_region(tmp.file("g.fa"), loaded, e.name, a, b), up[r].substr(a, b - a));
    }
  }
  EXPECT_NE(error_of([&] { io::fetch_region(tmp.file("g.fa"), loaded, "rec0", 0, up[0].size() + 1); }).find("outside the record"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::fetch_region(tmp.file("g.fa"), loaded, "chrX", 0, 1); }).find("no record named 'chrX'"),
            std::string::npos);
}

TEST(Fai, RejectsBadIndexLines) {
  TempDir tmp;
  test::write_file(tmp.file("x.fai"), "chr1\t100\t6\t60\t61\nchr2\tabc\t200\t60\t61\n");
  EXPECT_EQ(error_of([&] { io::FaiIndex::load(tmp.file("x.fai")); }),
            tmp.file("x.fai") + ":2: field LENGTH is not a non-negative integer: 'abc'");
  test::write_file(tmp.file("y.fai"), "chr1\t100\n");
  EXPECT_NE(error_of([&] { io::FaiIndex::load(tmp.file("y.fai")); }).find(":1: expected 5 tab-separated fields"),
            std::string::npos);
  test::write_file(tmp.file("ragged.fa"), ">a\nACGTACGT\nACG\nACGTACGT\n");
  EXPECT_NE(error_of([&] { io::FaiIndex::build(tmp.file("ragged.fa")); }).find(":4: record 'a' has lines of different lengths"),
            std::string::npos);
  // The index builder keys names as the FASTA reader does: as outputs write them.
  test::write_file(tmp.file("dup.fa"), ">a\nACGT\n>b\nACGT\n>a\nACGT\n");
  EXPECT_EQ(error_of([&] { io::FaiIndex::build(tmp.file("dup.fa")); }),
            tmp.file("dup.fa") + ":5: duplicate record name 'a' (first seen on line 1); record names must be unique");
  test::write_file(tmp.file("alike.fa"), ">chr\xff\nACGT\n>chr\\xff\nACGT\n");
  EXPECT_NE(error_of([&] { io::FaiIndex::build(tmp.file("alike.fa")); }).find(":3: duplicate record name 'chr\\xff' "
                                                                            "(first seen on line 1)"),
            std::string::npos);
}

// Issue 21: a file of CR-only line ends (classic Mac OS) was one long header with no
// newline, which was never handed over: 0 records, exit 0.
TEST(FastaErrors, CrOnlyLineEndsAreNamed) {
  TempDir tmp;
  test::write_file(tmp.file("mac.fa"), ">chr1\rACGTACGT\rACGT\r>chr2\rAAAA\r");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("mac.fa")); }),
            tmp.file("mac.fa") + ":1: a carriage return (CR, byte 0x0d) inside a header line: the file's line ends "
                                 "are CR only (classic Mac OS), so it reads as one header and no sequence; convert "
                                 "them to LF, e.g. tr '\\r' '\\n' < IN > OUT");
  // Also when the CR is not followed by more text in the same block of the reader.
  test::write_file(tmp.file("mac2.fa"), ">chr1\r");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("mac2.fa")); }),
            tmp.file("mac2.fa") + ":1: record 'chr1' has no sequence");
  // CRLF stays fine, with or without a final line end.
  test::write_file(tmp.file("dos.fa"), ">chr1\r\nACGT\r\nAC");
  EXPECT_EQ(io::read_fasta_all(tmp.file("dos.fa")).at(0).second, "ACGTAC");
}

TEST(FastaErrors, AHeaderWithoutNewlineIsARecord) {
  TempDir tmp;
  test::write_file(tmp.file("h.fa"), ">chr1");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("h.fa")); }), tmp.file("h.fa") + ":1: record 'chr1' has no sequence");
  test::write_file(tmp.file("h2.fa"), ">a\nACGT\n>b");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("h2.fa")); }), tmp.file("h2.fa") + ":3: record 'b' has no sequence");
  test::write_file(tmp.file("h3.fa"), ">a\nACGT\n>a");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("h3.fa")); }),
            tmp.file("h3.fa") + ":3: duplicate record name 'a' (first seen on line 1); record names must be unique");
  test::write_file(tmp.file("h4.fa"), ">");
  EXPECT_EQ(error_of([&] { io::read_fasta_all(tmp.file("h4.fa")); }),
            tmp.file("h4.fa") + ":1: empty record name after '>' (every record needs a name)");
}

// A BGZF file cut at a block boundary is a valid sequence of whole blocks: only the missing
// end-of-file block shows that the file is not whole (issue 31: such a file was counted).
TEST(FastaErrors, BgzfCutAtABlockBoundaryOrWithoutItsEofBlock) {
  TempDir tmp;
  std::mt19937_64 rng(31);
  auto g = test::random_genome(rng, test::GenomeSpec{});
  test::write_bgzf(tmp.file("whole.bgz"), g.fasta, 400);
  const std::string bg = test::read_file(tmp.file("whole.bgz"));
  ASSERT_EQ(bg.substr(bg.size() - 28), std::string("\x1f\x8b\x08\x04\0\0\0\0\0\xff\x06\0BC\x02\0\x1b\0\x03\0\0\0\0\0\0\0\0\0", 28));
  EXPECT_NO_THROW(io::probe_file(tmp.file("whole.bgz")));
  // Block boundaries from the headers' BSIZE.
  std::vector<size_t> starts;
  for (size_t off = 0; off < bg.size();) {
    starts.push_back(off);
    off += static_cast<size_t>(static_cast<unsigned char>(bg[off + 16]) | (static_cast<unsigned char>(bg[off + 17]) << 8)) + 1;
  }
  ASSERT_GT(starts.size(), 4u);
  for (size_t cut : {starts[1], starts[starts.size() / 2], bg.size() - 28}) {
    test::write_file(tmp.file("cut.bgz"), bg.substr(0, cut));
    const std::string e = error_of([&] { io::probe_file(tmp.file("cut.bgz")); });
    EXPECT_EQ(e, tmp.file("cut.bgz") + ": BGZF (bgzip) file without its end-of-file block: it is truncated (it ends at "
                 "byte " + std::to_string(cut) + ", cut before its end), or other data follows its blocks (a gzip "
                 "file appended to it, as `cat a.fa.bgz b.fa.gz` makes); download or compress it again. A whole file "
                 "written by an old bgzip without that block, or such a concatenation, can be re-compressed with "
                 "`gzip -dc F | bgzip > F2`")
        << cut;
  }
}

TEST(FastaErrors, AFifoIsRefusedBeforeItIsOpened) {
  TempDir tmp;
  ASSERT_EQ(::mkfifo(tmp.file("g.fifo").c_str(), 0644), 0);
  // open(2) of a FIFO without a writer would block forever: the error comes first.
  const std::string e = error_of([&] { io::read_fasta_all(tmp.file("g.fifo")); });
  EXPECT_EQ(e.rfind(tmp.file("g.fifo") + ": is a FIFO", 0), 0u) << e;
}
