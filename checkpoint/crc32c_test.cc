#include "checkpoint/crc32c.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace weft::ckpt {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 (iSCSI) B.4 and the common "123456789" check value.
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

TEST(Crc32cTest, ExtendEqualsOneShotAndPortableEqualsHardware) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(10007);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t whole = Crc32c(buf.data(), buf.size());
  EXPECT_EQ(Crc32cExtendPortable(0, buf.data(), buf.size()), whole);
  for (size_t cut : {0, 1, 7, 8, 9, 4096, 10006}) {
    const uint32_t a = Crc32c(buf.data(), cut);
    EXPECT_EQ(Crc32cExtend(a, buf.data() + cut, buf.size() - cut), whole) << cut;
  }
  // Unaligned starts go through the same code.
  for (size_t off = 1; off < 8; ++off) {
    EXPECT_EQ(Crc32c(buf.data() + off, 1000), Crc32cExtendPortable(0, buf.data() + off, 1000));
  }
}

TEST(Crc32cTest, DetectsASingleBitFlip) {
  std::vector<uint8_t> buf(4096, 0x5A);
  const uint32_t before = Crc32c(buf.data(), buf.size());
  buf[1234] ^= 0x10;
  EXPECT_NE(Crc32c(buf.data(), buf.size()), before);
}

}  // namespace
}  // namespace weft::ckpt
