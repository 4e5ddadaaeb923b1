// The whole-field decimal readers (io/parse_number.hpp) against the C library's readers on
// the numbers both take, and their refusals of what the C readers take but is no decimal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "io/parse_number.hpp"

using namespace genemask::io;

TEST(ParseNumber, DecimalDoublesAreWhatStrtodReads) {
  for (const char* s : {"0", "2", "-0.5", "0.5", ".5", "5.", "1e-3", "1E3", "+2", "+.25", "123456789.125", "-7e+2",
                        "2.2250738585072014e-308", "1.7976931348623157e308"}) {
    const auto v = parse_decimal_double(s);
    ASSERT_TRUE(v.has_value()) << s;
    EXPECT_EQ(*v, std::strtod(s, nullptr)) << s;  // bit-exact: both round correctly
  }
}

TEST(ParseNumber, NoDecimalIsRefused) {
  // Each of these strtod reads as a number (all but "" and "+-1"), or reads in part.
  for (const char* s : {"", " 2", "2 ", "0x1p3", "0X10", "inf", "-inf", "nan", "NaN", "infinity", "1e999", "-1e999",
                        "2x", "1,5", "+", "-", "+-1", "++1", ".", "e3", "1e", "0x", "\t1"})
    EXPECT_FALSE(parse_decimal_double(s).has_value()) << "'" << s << "'";
}

TEST(ParseNumber, DecimalIntegers) {
  EXPECT_EQ(parse_decimal_u64("0"), 0u);
  EXPECT_EQ(parse_decimal_u64("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(parse_decimal_u64("0100"), 100u);  // leading zeros are digits; callers that mind check
  EXPECT_EQ(parse_decimal_i64("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parse_decimal_i64("-35"), -35);
  for (const char* s : {"", "-5", "+5", " 5", "5 ", "0x10", "18446744073709551616", "1.0", "1e3"})
    EXPECT_FALSE(parse_decimal_u64(s).has_value()) << "'" << s << "'";
  for (const char* s : {"", "+5", " -5", "--5", "9223372036854775808", "-35.9", "35abc"})
    EXPECT_FALSE(parse_decimal_i64(s).has_value()) << "'" << s << "'";
}
