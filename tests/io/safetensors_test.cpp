#include "io/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "test_util.hpp"

using namespace genemask;
using genemask::test::error_of;
using genemask::test::TempDir;

namespace {
/// A safetensors file with the given header and `data_bytes` zero bytes of data.
void write_raw(const std::string& path, const nlohmann::json& header, size_t data_bytes) {
  const std::string h = header.dump();
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);  // little-endian hosts only, as the reader
  out += h;
  out += std::string(data_bytes, '\0');
  test::write_file(path, out);
}
}  // namespace

TEST(Safetensors, RoundTrip) {
  TempDir tmp;
  io::StTensor a{"a", "F32", {2, 3}, std::vector<char>(24, 1)}, b{"b", "I64", {2}, std::vector<char>(16, 2)};
  io::write_safetensors(tmp.file("x.safetensors"), {a, b});
  const auto back = io::read_safetensors(tmp.file("x.safetensors"));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].name, "a");
  EXPECT_EQ(back[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back[1].data, b.data);
}

TEST(Safetensors, CraftedHeadersAreRefused) {
  TempDir tmp;
  const std::string f = tmp.file("bad.safetensors");
  // Two tensors on the same bytes.
  write_raw(f, {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}}}},
            16);
  EXPECT_NE(error_of([&] { io::read_safetensors(f); }).find("tensors a and b overlap (data_offsets [0, 16) and [8, 16))"),
            std::string::npos);
  // Offsets past the end of the data.
  write_raw(f, {{"a", {{"dtype", "F32"}, {"shape", {8}}, {"data_offsets", {0, 32}}}}}, 16);
  EXPECT_NE(error_of([&] { io::read_safetensors(f); }).find("tensor a: data_offsets outside the file"), std::string::npos);
  // A negative dimension, and a shape whose byte count wraps around 2^64.
  write_raw(f, {{"a", {{"dtype", "F32"}, {"shape", {-4, -1}}, {"data_offsets", {0, 16}}}}}, 16);
  EXPECT_NE(error_of([&] { io::read_safetensors(f); }).find("tensor a: negative dimension -4"), std::string::npos);
  write_raw(f, {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {1.1e24, 16}}}}}, 16);
  EXPECT_NE(error_of([&] { io::read_safetensors(f); }).find("tensor a: data_offsets holds 1.1e+24, not an integer"),
            std::string::npos);
  write_raw(f, {{"a", {{"dtype", "F32"}, {"shape", {int64_t{1} << 62, 4}}, {"data_offsets", {0, 0}}}}}, 16);
  EXPECT_NE(error_of([&] { io::read_safetensors(f); }).find("shape needs more bytes than the file holds"), std::string::npos);
}

// Issue 21: a header of 100,000 nested '[' is refused before it is parsed (it overflowed
// the stack where a value was serialised into a message).
TEST(Safetensors, ADeeplyNestedHeaderIsRefused) {
  TempDir tmp;
  const std::string f = tmp.file("deep.safetensors");
  const std::string h = "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  test::write_file(f, out + h);
  EXPECT_EQ(error_of([&] { io::read_safetensors(f); }),
            f + ": header (bytes 9 to " + std::to_string(8 + h.size()) +
                "): arrays and objects nested more than 64 levels deep (byte 70): not a file genemask reads");
}
