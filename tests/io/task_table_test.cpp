#include "io/task_table.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "genemask/corpus/tokenizer.hpp"
#include "io/error.hpp"
#include "io/json.hpp"
#include "io/rank_tables.hpp"
#include "io/text_source.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::error_of;
using genemask::test::TempDir;

TEST(TaskTable, ReadsTheReleasedFewShotFormat) {
  const std::string path = std::string(GENEMASK_TEST_DATA) + "/fewshot-train-format.tsv";
  auto rows = io::read_task_table(path);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].label, "0");
  EXPECT_EQ(rows[1].label, "1");
  EXPECT_EQ(rows[0].sequence.substr(0, 8), "AAACGGAA");
  EXPECT_EQ(rows[0].sequence.size(), 70u);  // 65 6-mers = 70 bases
  // Tokenizing the bases gives the 6-mers of the file again.
  auto ids = tokenize(rows[0].sequence);
  EXPECT_EQ(token_text(ids[0]), "AAACGG");
  EXPECT_EQ(token_text(ids[1]), "AACGGA");
  EXPECT_EQ(rows[2].line, 4u);
}

TEST(TaskTable, PlainCsvAndUnquotedTsv) {
  TempDir tmp;
  test::write_file(tmp.file("a.csv"), "id,sequence,label\nx1,acgtacgtNN,1\nx2,\"GGGCCC\",0\n");
  auto r = io::read_task_table(tmp.file("a.csv"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].sequence, "ACGTACGTNN");
  EXPECT_EQ(r[1].sequence, "GGGCCC");
  test::write_file(tmp.file("b.tsv"), "sequence\tlabel\r\nAAAAAA AAAAAC\t2\r\n");
  EXPECT_EQ(io::read_task_table(tmp.file("b.tsv"))[0].sequence, "AAAAAAC");
}

TEST(TaskTable, BadRowsNameFileLineAndValue) {
  TempDir tmp;
  test::write_file(tmp.file("e.tsv"), "");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("e.tsv")); }),
            tmp.file("e.tsv") + ":1: empty file: expected a header with 'sequence' and 'label' columns");
  // Sequences to score (predict, embed) need no label, and may be FASTA.
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("e.tsv"), false); }),
            tmp.file("e.tsv") + ":1: empty file: expected FASTA records, or a table with a 'sequence' column");
  test::write_file(tmp.file("k.tsv"), "sequence\tlabel\n\"AAAAAA AAAAC\"\t1\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("k.tsv")); }),
            tmp.file("k.tsv") + ":2: bad sequence: token 2 'AAAAC' has length 5, token 1 has length 6");
  test::write_file(tmp.file("o.tsv"), "sequence\tlabel\n\"AAAAAA CCCCCC\"\t1\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("o.tsv")); }),
            tmp.file("o.tsv") + ":2: bad sequence: tokens 1 'AAAAAA' and 2 'CCCCCC' do not overlap by 5 bases");
  test::write_file(tmp.file("h.tsv"), "seqs\tlabels\nAC\t1\n");
  EXPECT_NE(error_of([&] { io::read_task_table(tmp.file("h.tsv")); }).find(":1: header 'seqs\\x09labels' lacks"),
            std::string::npos);
  test::write_file(tmp.file("x.csv"), "sequence,label\nACGU1,0\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("x.csv")); }),
            tmp.file("x.csv") + ":2: bad sequence: 'U' at position 4 is not a base (A, C, G, T, N or another "
                                "IUPAC code, any case)");
  test::write_file(tmp.file("q.csv"), "sequence,label\n\"ACGT,0\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("q.csv")); }),
            tmp.file("q.csv") + ":2: a double quote opened on this line is never closed (the file ends inside a quoted "
                                "field): close the quote, or remove the stray one");
  // A quoted field may hold line breaks (RFC 4180): the row is numbered by its first line, and
  // the label comes back whole, tab, comma and newline included.
  test::write_file(tmp.file("ml.csv"), "sequence,label\nACGT,\"a,b\ttab\nnext\"\nGGCC,1\n");
  const auto ml = io::read_task_table(tmp.file("ml.csv"));
  ASSERT_EQ(ml.size(), 2u);
  EXPECT_EQ(ml[0].label, "a,b\ttab\nnext");
  EXPECT_EQ(ml[0].line, 2u);
  EXPECT_EQ(ml[1].line, 4u);
  // A row wider than its header: a label with an unquoted comma ("1,5") was read as "1".
  test::write_file(tmp.file("w.csv"), "sequence,label\nACGT,0\nGGCC,1,5\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("w.csv")); }),
            tmp.file("w.csv") + ":3: has 3 fields but the header has 2: a delimiter inside an unquoted field, or a "
                                "ragged row; quote the field, or make the row as wide as the header");
  // Extra columns the header names are fine, a quoted delimiter too.
  test::write_file(tmp.file("wq.csv"), "sequence,label,name\nACGT,0,x\nGGCC,1,\"a,b\"\n");
  EXPECT_EQ(io::read_task_table(tmp.file("wq.csv")).at(1).label, "1");
  test::write_file(tmp.file("l.csv"), "sequence,label\nACGT,\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("l.csv")); }), tmp.file("l.csv") + ":2: empty label");
  // Regression: a NUL in a sequence ended the message there; binary bytes and escapes
  // reached the terminal raw. (A zero byte is refused before the row is split: its own test
  // below.)
  test::write_file(tmp.file("z.csv"), std::string("sequence,label\nAC") + '\0' + "GT,0\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("z.csv")); }),
            tmp.file("z.csv") + ":2: 1 zero byte(s) from byte 3 of the line: a text table holds none; they are binary "
                                "data, or the zeros that a download which reserved the file's size and stopped leaves "
                                "where the rest should be: download the file again, or give the right one");
  test::write_file(tmp.file("b.tsv"), "sequence\tlabel\n\"AAAAAA A\x1b[2JAAAAA\"\t1\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("b.tsv")); }),
            tmp.file("b.tsv") + ":2: bad sequence: token 2 'A\\x1b[2JAAAAA' has a character that is not a base (byte "
                                "0x1b)");
}

// Regression: a test table cut mid-row gave metrics of 64 of its 111 rows without a word.
// A last line without its end is said; a whole table is read silently.
TEST(TaskTable, ALastLineWithoutItsEndIsSaid) {
  TempDir tmp;
  const std::string whole = "sequence\tlabel\nACGTACGTAC\t0\nTTGCATGCAA\t1\n";
  test::write_file(tmp.file("cut.tsv"), whole.substr(0, whole.size() - 1));
  testing::internal::CaptureStderr();
  const auto cut = io::read_task_table(tmp.file("cut.tsv"));
  EXPECT_EQ(cut.size(), 2u);
  EXPECT_TRUE(cut.back().unterminated);  // for finetune's unterminated_tables
  EXPECT_FALSE(cut.front().unterminated);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "genemask: warning: " + tmp.file("cut.tsv") + ":3: the last line has no line end: if the file was cut "
            "short (a truncated download or copy), its last row may be partial, and rows after it missing, and was "
            "read as it is; check the file (a whole file ends its last line; the summary lists it: "
            "unterminated_inputs)\n");
  test::write_file(tmp.file("whole.tsv"), whole);
  testing::internal::CaptureStderr();
  const auto rows = io::read_task_table(tmp.file("whole.tsv"));
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows.back().unterminated);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  // The process records the cut table once, for the summaries (io::with_unterminated_inputs),
  // and not the whole one.
  testing::internal::CaptureStderr();
  io::read_task_table(tmp.file("cut.tsv"));
  testing::internal::GetCapturedStderr();
  const auto listed = io::unterminated_inputs();
  EXPECT_EQ(std::count(listed.begin(), listed.end(), tmp.file("cut.tsv")), 1);
  EXPECT_EQ(std::count(listed.begin(), listed.end(), tmp.file("whole.tsv")), 0);
  const auto summary = io::with_unterminated_inputs(nlohmann::json{{"n", 2}});
  ASSERT_TRUE(summary.contains("unterminated_inputs"));
  EXPECT_EQ(summary["unterminated_inputs"].get<std::vector<std::string>>(), listed);
  EXPECT_EQ(summary["n"], 2);
  EXPECT_EQ(io::with_unterminated_inputs(nlohmann::json::array()), nlohmann::json::array());  // objects only
}

TEST(TaskTable, ZeroBytesAreRefusedAsWhatTheyUsuallyAre) {
  // A download that reserved the file's size and stopped: the table's first part, then zeros
  // to the end. The zeros were read as a field ("expected at least 2 fields, found 1"): now
  // named, with where they start and what to do, by every line reader of tables.
  TempDir tmp;
  const std::string whole = "sequence\tlabel\nACGTACGTAC\t0\nTTGCATGCAA\t1\n";
  test::write_file(tmp.file("pad.tsv"), whole.substr(0, 32) + std::string(300, '\0'));
  const std::string why = "a text table holds none; they are binary data, or the zeros that a download which reserved "
                          "the file's size and stopped leaves where the rest should be: download the file again, or "
                          "give the right one";
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("pad.tsv")); }),
            tmp.file("pad.tsv") + ":3: 300 zero byte(s) from byte 5 of the line to its end: " + why);
  // Zeros inside a line, through for_each_line (BED, VCF, genome lists, GFF, rankings).
  test::write_file(tmp.file("mid.txt"), std::string("a\nb\0\0c\nd\n", 9));
  std::vector<std::string> seen;
  EXPECT_EQ(error_of([&] { io::for_each_line(tmp.file("mid.txt"), [&](const std::string& l, uint64_t) { seen.push_back(l); }); }),
            tmp.file("mid.txt") + ":2: 2 zero byte(s) from byte 2 of the line: " + why);
  EXPECT_EQ(seen, std::vector<std::string>{"a"});  // refused before the line is used
  // And the rank tables' reader (npmi.tsv): a zero inside a row.
  test::write_file(tmp.file("n.tsv"), std::string("rank\tkmer\tk\tcount\tpmi\n1\tAC\0\t3\t9\t2.5\n", 36));
  EXPECT_NE(error_of([&] { io::read_pmi_vocab_tsv(tmp.file("n.tsv")); }).find(":2: 1 zero byte(s) from byte 5 of the line: "),
            std::string::npos);
}

TEST(Printable, EscapesControlBytesAndBrokenUtf8Only) {
  EXPECT_EQ(io::printable("plain ASCII, a\\b"), "plain ASCII, a\\b");
  EXPECT_EQ(io::printable(std::string("a\0b\nc\x7f", 6)), "a\\x00b\\x0ac\\x7f");
  EXPECT_EQ(io::printable("g\xc3\xa9nome \xe2\x86\x92 \xf0\x9f\xa7\xac"), "g\xc3\xa9nome \xe2\x86\x92 \xf0\x9f\xa7\xac");  // kept
  // Invalid UTF-8: a lone continuation byte, a cut sequence, an overlong, a surrogate.
  EXPECT_EQ(io::printable("\x80|\xc3|\xc0\xaf|\xed\xa0\x80"), "\\x80|\\xc3|\\xc0\\xaf|\\xed\\xa0\\x80");
  // Idempotent: an escaped message stays as it is.
  const std::string once = io::printable(std::string("\x01\xff\0", 3));
  EXPECT_EQ(io::printable(once), once);
  // InputError escapes what it is given, so what() holds all of it.
  const io::InputError e("f.tsv", 3, std::string("bad \0 byte", 10));
  EXPECT_EQ(std::string(e.what()), "f.tsv:3: bad \\x00 byte");
}

// The line a failed command ends with (src/cli/main.cpp), and the same line made without
// memory: LibTorch's backtrace cut off, the bytes made printable (escaped, or '?' without
// memory), a line too long for the buffer cut with "...", never past the buffer.
TEST(ErrorLine, OneLineWithAndWithoutMemory) {
  using namespace std::string_literals;
  const std::string what =
      "finetune: LibTorch: bad \x1b[2J\0value"s + "\nException raised from f at a.cpp:1 (most recent call first):\nframe #0";
  EXPECT_EQ(io::error_line("genemask", what), "genemask: error: finetune: LibTorch: bad \\x1b[2J\\x00value\n");
  EXPECT_EQ(io::error_line("genemask[rank 1]", "plain"), "genemask[rank 1]: error: plain\n");
  char buf[256];
  std::memset(buf, 'Z', sizeof buf);
  // The C string ends at the NUL: the fixed-buffer line sees "...bad \x1b[2J".
  size_t n = io::error_line_into(buf, sizeof buf, "genemask", what.c_str());
  EXPECT_EQ(std::string(buf, n), "genemask: error: finetune: LibTorch: bad ?[2J\n");
  n = io::error_line_into(buf, sizeof buf, "genemask", "out of memory\nException raised from x");
  EXPECT_EQ(std::string(buf, n), "genemask: error: out of memory\n");
  // Too long for the buffer: cut, "...", the newline, and nothing written past cap.
  const std::string long_what(1000, 'x');
  std::memset(buf, 'Z', sizeof buf);
  n = io::error_line_into(buf, 64, "genemask", long_what.c_str());
  EXPECT_EQ(n, 64u);
  EXPECT_EQ(std::string(buf, n), "genemask: error: " + std::string(60 - 17, 'x') + "...\n");
  EXPECT_EQ(buf[64], 'Z');
  // Exactly filling the room is no cut.
  n = io::error_line_into(buf, 64, "genemask", std::string(60 - 17, 'y').c_str());
  EXPECT_EQ(std::string(buf, n), "genemask: error: " + std::string(43, 'y') + "\n");
  // Nothing to write into, or null words: no crash.
  EXPECT_EQ(io::error_line_into(buf, 8, "genemask", "x"), 0u);
  EXPECT_EQ(io::error_line_into(nullptr, 64, "genemask", "x"), 0u);
  n = io::error_line_into(buf, sizeof buf, nullptr, nullptr);
  EXPECT_EQ(std::string(buf, n), "genemask: error: \n");
}

TEST(TaskTable, UnlabelledTablesForPredictAndEmbed) {
  TempDir tmp;
  test::write_file(tmp.file("u.tsv"), "name\tsequence\nx1\tACGTACGT\nx2\t\"AAACGG AACGGT\"\n");
  const auto rows = io::read_task_table(tmp.file("u.tsv"), /*label_required=*/false);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].sequence, "ACGTACGT");
  EXPECT_EQ(rows[1].sequence, "AAACGGT");
  EXPECT_EQ(rows[1].line, 3u);
  EXPECT_TRUE(rows[0].label.empty());
  // Where labels are needed (finetune), the same file is an error naming the header.
  EXPECT_NE(test::error_of([&] { io::read_task_table(tmp.file("u.tsv")); }).find("lacks a 'sequence' and a 'label' column"),
            std::string::npos);
  test::write_file(tmp.file("n.tsv"), "name\tlabel\nx1\t1\n");
  EXPECT_NE(test::error_of([&] { io::read_task_table(tmp.file("n.tsv"), false); }).find("lacks a 'sequence' column"),
            std::string::npos);
}

// Issue 21: a label that differs from another only in spaces or in how a number is written
// was a class of its own.
TEST(TaskTable, LabelsThatWouldBeExtraClassesAreRefused) {
  TempDir tmp;
  auto table = [&](const std::string& name, const std::string& label) {
    test::write_file(tmp.file(name), "sequence,label\nACGTACGT,0\nACGTTTGA,1\nACGTAAAA," + label + "\n");
    return error_of([&] { io::read_task_table(tmp.file(name)); });
  };
  EXPECT_EQ(table("space.csv", "1 "),
            tmp.file("space.csv") + ":4: label '1 ' has a leading or trailing space, which would make it a class "
                                    "apart from '1'; remove the space");
  EXPECT_EQ(table("lead.csv", " 1").rfind(tmp.file("lead.csv") + ":4: label ' 1' has a leading or trailing space", 0), 0u);
  for (const char* bad : {"1.0", "01", "+1", "1e0", "1.", ".5", "-0", "00"}) {
    const std::string e = table("num.csv", bad);
    EXPECT_EQ(e.rfind(tmp.file("num.csv") + ":4: label '" + bad + "' is a number not written as a plain integer", 0), 0u)
        << bad << ": " << e;
  }
  for (const char* good : {"1", "0", "2", "10", "-1", "enhancer", "1a", "e5", "class 1", "caf\xC3\xA9", "\xCE\xB1"})
    EXPECT_EQ(table("ok.csv", good), "no error") << good;
  // A no-break space from a spreadsheet, a zero-width space, a thin space: not shown, yet a
  // class of their own (a 2-class task run as 3). Anywhere in the label, ends or middle.
  for (const auto& [bad, json, at, reads] :
       {std::tuple{"1\xC2\xA0", "\"1\\u00a0\"", 2, "1"}, {"\xE2\x80\x8B" "1", "\"\\u200b1\"", 1, "1"},
        {"class\xE2\x80\x89" "1", "\"class\\u20091\"", 6, "class 1"}, {"1\xEF\xBB\xBF", "\"1\\ufeff\"", 2, "1"}}) {
    const std::string e = table("unshown.csv", bad);
    EXPECT_EQ(e, fmt::format("{}:4: label '{}' (as JSON: {}) holds a space or an invisible character that is not ASCII "
                             "(at byte {}), which would make it a class apart from '{}', as it reads; write it in ASCII",
                             tmp.file("unshown.csv"), bad, json, at, reads))
        << e;
  }
  // A full-width digit or letter reads as its ASCII form.
  EXPECT_EQ(table("wide.csv", "\xEF\xBC\x91"),
            tmp.file("wide.csv") + ":4: label '\xEF\xBC\x91' holds a full-width character (U+FF11 at byte 1), which "
                                   "would make it a class apart from the same label in ASCII; write it in ASCII");
  EXPECT_NE(table("wide.csv", "class\xEF\xBC\xA1").find("(U+FF21 at byte 6)"), std::string::npos);
  // Where labels are not used (predict, embed), they are not classes either.
  table("num.csv", "1.0");
  EXPECT_EQ(io::read_task_table(tmp.file("num.csv"), /*label_required=*/false).back().label, "1.0");
}

TEST(TaskTable, ATableWithoutAnyBaseIsRefused) {
  TempDir tmp;
  test::write_file(tmp.file("n.tsv"), "sequence\tlabel\nNNNNNNNN\t0\nNNNNRYNN\t1\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("n.tsv")); }),
            tmp.file("n.tsv") + ": none of its 2 sequences has an A, C, G or T (all N or other IUPAC codes, lines 2 "
                                "to 3): nothing to learn or score; is this the table you meant?");
  // One all-N row among real ones is a row like any other.
  test::write_file(tmp.file("m.tsv"), "sequence\tlabel\nNNNNNNNN\t0\nNNNANNNN\t1\n");
  EXPECT_EQ(io::read_task_table(tmp.file("m.tsv")).size(), 2u);
}

TEST(TaskTable, TwoColumnsOfOneNameAreRefused) {
  TempDir tmp;
  test::write_file(tmp.file("s.csv"), "sequence,label,sequence\nACGT,0,GGGG\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("s.csv")); }),
            tmp.file("s.csv") + ":1: header 'sequence,label,sequence' has two 'sequence' columns (columns 1 and 3): "
                                "keep one");
  test::write_file(tmp.file("q.tsv"), "seq\tLabel\tSequence\nACGT\t0\tGGGG\n");
  EXPECT_NE(error_of([&] { io::read_task_table(tmp.file("q.tsv")); }).find("two 'sequence' columns (columns 1 and 3)"),
            std::string::npos);
  test::write_file(tmp.file("l.csv"), "label,sequence,label\n0,ACGT,1\n");
  EXPECT_NE(error_of([&] { io::read_task_table(tmp.file("l.csv")); }).find(":1: header 'label,sequence,label' has two "
                                                                          "'label' columns (columns 1 and 3)"),
            std::string::npos);
}

TEST(TaskTable, AUtf8ByteOrderMarkIsStripped) {
  TempDir tmp;
  test::write_file(tmp.file("bom.csv"), "\xEF\xBB\xBFsequence,label\nACGT,0\nACGG,1\n");
  const auto rows = io::read_task_table(tmp.file("bom.csv"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].label, "1");
  // A header that is wrong anyway is quoted without the mark.
  test::write_file(tmp.file("bom2.csv"), "\xEF\xBB\xBFseqs,label\nACGT,0\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("bom2.csv")); }),
            tmp.file("bom2.csv") + ":1: header 'seqs,label' lacks a 'sequence' and a 'label' column");
}

// A `dataset` run stopped while publishing (its marker says incomplete) left train.tsv of
// one run beside test.tsv of another; finetune, sweep and overlap read them without a word.
TEST(TaskTable, ATableInAnIncompleteOutputIsRefused) {
  TempDir dir;
  test::write_file(dir.file("train.tsv"), "sequence\tlabel\nACGTACGTAC\t0\nTTTTACGTAC\t1\n");
  EXPECT_EQ(io::read_task_table(dir.file("train.tsv")).size(), 2u);  // no marker: a user's folder
  test::write_file(dir.file(".genemask.json"),
                   R"({"format": "genemask-output", "format_version": 1, "command": "dataset promoter",
                       "complete": true, "entries": ["train.tsv"]})");
  EXPECT_EQ(io::read_task_table(dir.file("train.tsv")).size(), 2u);
  test::write_file(dir.file(".genemask.json"),
                   R"({"format": "genemask-output", "format_version": 1, "command": "dataset promoter",
                       "complete": false, "entries": ["train.tsv"]})");
  const std::string e = error_of([&] { io::read_task_table(dir.file("train.tsv")); });
  EXPECT_NE(e.find("train.tsv: is in "), std::string::npos) << e;
  EXPECT_NE(e.find("an incomplete output of `genemask dataset promoter` (it stopped while moving its files into "
                   "place, so its files may be of two runs): run that command again (it replaces an incomplete output)"),
            std::string::npos)
      << e;
}
