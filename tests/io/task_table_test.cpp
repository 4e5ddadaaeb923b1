#include "io/task_table.hpp"

#include <gtest/gtest.h>

#include "genemask/tokenizer.hpp"
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
  test::write_file(tmp.file("k.tsv"), "sequence\tlabel\n\"AAAAAA AAAAC\"\t1\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("k.tsv")); }),
            tmp.file("k.tsv") + ":2: bad sequence: token 2 'AAAAC' has length 5, token 1 has length 6");
  test::write_file(tmp.file("o.tsv"), "sequence\tlabel\n\"AAAAAA CCCCCC\"\t1\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("o.tsv")); }),
            tmp.file("o.tsv") + ":2: bad sequence: tokens 1 'AAAAAA' and 2 'CCCCCC' do not overlap by 5 bases");
  test::write_file(tmp.file("h.tsv"), "seqs\tlabels\nAC\t1\n");
  EXPECT_NE(error_of([&] { io::read_task_table(tmp.file("h.tsv")); }).find(":1: header 'seqs\tlabels' lacks"),
            std::string::npos);
  test::write_file(tmp.file("x.csv"), "sequence,label\nACGU1,0\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("x.csv")); }),
            tmp.file("x.csv") + ":2: bad sequence: 'U' at position 4 is not a base");
  test::write_file(tmp.file("q.csv"), "sequence,label\n\"ACGT,0\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("q.csv")); }), tmp.file("q.csv") + ":2: unterminated double quote");
  test::write_file(tmp.file("l.csv"), "sequence,label\nACGT,\n");
  EXPECT_EQ(error_of([&] { io::read_task_table(tmp.file("l.csv")); }), tmp.file("l.csv") + ":2: empty label");
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
