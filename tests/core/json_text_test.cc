// core/json_text.h: JSON string literals that are valid UTF-8 whatever bytes they are given.
#include "core/json_text.h"

#include <gtest/gtest.h>

#include <string>

namespace ip {
namespace {

TEST(JsonText, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_string(""), "\"\"");
  EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_string(std::string("\n\t\x1f\x7f", 4)), "\"\\u000a\\u0009\\u001f\x7f\"");
  EXPECT_EQ(json_string(std::string("x\0y", 3)), "\"x\\u0000y\"");
}

TEST(JsonText, WellFormedUtf8PassesThrough) {
  // The first and last code point of each length: U+0080, U+07FF, U+0800, U+FFFF, U+10000, U+10FFFF, and
  // the code points beside the surrogates, U+D7FF and U+E000.
  const std::string ok =
      "\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"
      "\xed\x9f\xbf\xee\x80\x80";
  EXPECT_EQ(json_string(ok), "\"" + ok + "\"");
}

TEST(JsonText, EveryByteOutsideAWellFormedSequenceIsReplaced) {
  const std::string r = "\\ufffd";
  EXPECT_EQ(json_string("\x80"), "\"" + r + "\"");                  // a lone continuation byte
  EXPECT_EQ(json_string("\xc3"), "\"" + r + "\"");                  // cut at the end
  EXPECT_EQ(json_string("\xe2\x82"), "\"" + r + r + "\"");          // cut at the end, 3-byte form
  EXPECT_EQ(json_string("\xc3" "a"), "\"" + r + "a\"");             // cut by an ASCII byte, which stays
  EXPECT_EQ(json_string("\xc0\xaf"), "\"" + r + r + "\"");          // overlong '/'
  EXPECT_EQ(json_string("\xe0\x9f\xbf"), "\"" + r + r + r + "\"");  // overlong 3-byte form
  EXPECT_EQ(json_string("\xf0\x8f\xbf\xbf"), "\"" + r + r + r + r + "\"");  // overlong 4-byte form
  EXPECT_EQ(json_string("\xed\xa0\x80"), "\"" + r + r + r + "\"");          // a surrogate (U+D800)
  EXPECT_EQ(json_string("\xf4\x90\x80\x80"), "\"" + r + r + r + r + "\"");  // above U+10FFFF
  EXPECT_EQ(json_string("\xf5\xfe\xff"), "\"" + r + r + r + "\"");          // never in UTF-8
}

TEST(JsonText, SequenceLengths) {
  EXPECT_EQ(utf8_sequence("a", 0), 1u);
  EXPECT_EQ(utf8_sequence("a", 1), 0u);  // past the end
  EXPECT_EQ(utf8_sequence("\xc3\xa9", 0), 2u);
  EXPECT_EQ(utf8_sequence("\xc3\xa9", 1), 0u);
  EXPECT_EQ(utf8_sequence("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(utf8_sequence("\xf0\x9f\x98\x80", 0), 4u);
}

}  // namespace
}  // namespace ip
