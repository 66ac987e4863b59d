// Tests for the safetensors reader and writer: round trips, dtype conversion against hand-computed
// values, every malformed-header case, and a sharded index over two files.
#include "mgt/runtime/safetensors.hpp"

#include "mgt/ir/error.hpp"

#include "temp_dir_fixture.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

namespace mgt::rt {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public test::TempDirTest {
 protected:
  SafetensorsTest() : TempDirTest("mgt_safetensors_test_") {}

  /// Writes a raw file: 8-byte little-endian `header_len` (defaults to the header's size), the header
  /// text, then `data`.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        int64_t header_len = -1) const {
    const uint64_t len = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    bytes += header + data;
    std::ofstream(path(name), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path(name);
  }

  /// Expects SafetensorsFile::open to throw InputError whose message names the file and `field`
  /// and contains `problem`.
  void expect_open_error(const std::string& file, const std::string& field, const std::string& problem) {
    try {
      SafetensorsFile::open(file);
      FAIL() << "expected an InputError for " << file;
    } catch (const ir::InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(file), std::string::npos) << what;
      EXPECT_NE(what.find(field), std::string::npos) << what;
      EXPECT_NE(what.find(problem), std::string::npos) << what;
    }
  }

};

std::string u16_bytes(std::initializer_list<uint16_t> values) {
  std::string out;
  for (uint16_t v : values) {
    out.push_back(static_cast<char>(v & 0xff));
    out.push_back(static_cast<char>(v >> 8));
  }
  return out;
}

TEST_F(SafetensorsTest, RoundTripF32IsBitExact) {
  const std::vector<float> a{1.0f, -2.5f, 3.0e-20f, std::numeric_limits<float>::denorm_min(), 7.0f, 0.1f};
  const std::vector<float> b{42.0f};
  write_safetensors(path("m.safetensors"), {{"a", {2, 3}, a}, {"b.scalar", {}, b}}, ir::DType::f32,
                    {{"format", "pt"}});
  const SafetensorsFile f = SafetensorsFile::open(path("m.safetensors"));
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_NE(f.find("a"), nullptr);
  EXPECT_EQ(f.find("a")->dtype, "F32");
  EXPECT_EQ(f.find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.find("b.scalar")->shape, std::vector<int64_t>{});
  EXPECT_EQ(f.find("missing"), nullptr);
  const std::vector<float> ra = f.read_f32("a");
  ASSERT_EQ(ra.size(), a.size());
  EXPECT_EQ(std::memcmp(ra.data(), a.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(f.read_f32("b.scalar"), b);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) files += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
}

TEST_F(SafetensorsTest, DataStartsEightByteAligned) {
  const std::vector<float> a{1.0f};
  write_safetensors(path("m.safetensors"), {{"a", {1}, a}});
  std::ifstream in(path("m.safetensors"), std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ(len % 8, 0u);
}

TEST_F(SafetensorsTest, WriteBf16RoundsToNearestEven) {
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 is a tie (to even: 1.0); 1 + 3*2^-9 rounds up to 1 + 2^-7.
  const std::vector<float> values{1.0f, 1.0f + 0x1.0p-8f, 1.0f + 3 * 0x1.0p-9f, 3.14159265f, -0.0f};
  write_safetensors(path("m.safetensors"), {{"w", {5}, values}}, ir::DType::bf16);
  const SafetensorsFile f = SafetensorsFile::open(path("m.safetensors"));
  EXPECT_EQ(f.find("w")->dtype, "BF16");
  const std::vector<float> correct{1.0f, 1.0f, 1.0078125f, 3.140625f, -0.0f};
  const std::vector<float> result = f.read_f32("w");
  EXPECT_EQ(result, correct);
  EXPECT_TRUE(std::signbit(result[4]));
}

TEST_F(SafetensorsTest, ReadsBf16AndF16AgainstHandComputedValues) {
  // bf16: 0x3F80 = 1, 0xC049 = -3.140625, 0x7F80 = +inf, 0x0001 = 2^-133 (f32 subnormal).
  // f16: 0x3C00 = 1, 0xC000 = -2, 0x3555 = 2^-2 * (1 + 341/1024) = 0.333251953125,
  //      0x0001 = 2^-24 (subnormal), 0x7BFF = 65504 (max), 0x7C00 = +inf, 0x8000 = -0.
  const std::string bf = u16_bytes({0x3F80, 0xC049, 0x7F80, 0x0001});
  const std::string hf = u16_bytes({0x3C00, 0xC000, 0x3555, 0x0001, 0x7BFF, 0x7C00, 0x8000});
  const std::string header = R"({"bf":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},)"
                             R"("hf":{"dtype":"F16","shape":[7],"data_offsets":[8,22]}})";
  const SafetensorsFile f = SafetensorsFile::open(write_raw("m.safetensors", header, bf + hf));
  const std::vector<float> bf_correct{1.0f, -3.140625f, std::numeric_limits<float>::infinity(), 0x1.0p-133f};
  EXPECT_EQ(f.read_f32("bf"), bf_correct);
  const std::vector<float> hf_result = f.read_f32("hf");
  const std::vector<float> hf_correct{1.0f, -2.0f, 0.333251953125f, 0x1.0p-24f, 65504.0f,
                                      std::numeric_limits<float>::infinity(), -0.0f};
  EXPECT_EQ(hf_result, hf_correct);
  EXPECT_TRUE(std::signbit(hf_result[6]));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_F(SafetensorsTest, MetadataAndEmptyTensorsAreAccepted) {
  const std::string header = R"({"__metadata__":{"format":"pt"},"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},)"
                             R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const SafetensorsFile f = SafetensorsFile::open(write_raw("m.safetensors", header, std::string(4, '\0')));
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_TRUE(f.read_f32("e").empty());
  EXPECT_EQ(f.read_f32("x"), std::vector<float>{0.0f});
}

TEST_F(SafetensorsTest, RejectsTruncatedFile) {
  std::ofstream(path("short.safetensors"), std::ios::binary).write("\x10\0\0", 3);
  expect_open_error(path("short.safetensors"), "header", "truncated");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  const std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  expect_open_error(write_raw("m.safetensors", header, std::string(4, '\0'), /*header_len=*/1000), "header",
                    "header length 1000 exceeds");
  // A huge length (e.g. a corrupt length field) must not allocate or crash.
  expect_open_error(write_raw("h.safetensors", header, "", /*header_len=*/int64_t{1} << 62), "header", "exceeds");
}

TEST_F(SafetensorsTest, RejectsOffsetsOutOfRange) {
  // Data section holds 8 bytes; the tensor claims [0, 16): the file was cut short.
  const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  expect_open_error(write_raw("m.safetensors", header, std::string(8, '\0')), "'w'", "beyond the data section");
  const std::string reversed = R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})";
  expect_open_error(write_raw("r.safetensors", reversed, std::string(8, '\0')), "'w'", "begin 8 > end 4");
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  expect_open_error(write_raw("m.safetensors", header, std::string(12, '\0')), "'b'", "overlap tensor \"a\"");
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  const std::string header = R"({"w":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})";
  expect_open_error(write_raw("m.safetensors", header, std::string(4, '\0')), "'w'", "unknown dtype \"F17\"");
}

TEST_F(SafetensorsTest, RejectsShapeOffsetSizeMismatch) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
  expect_open_error(write_raw("m.safetensors", header, std::string(8, '\0')), "'w'", "needs 12 bytes but data_offsets span 8");
  const std::string overflow = R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})";
  expect_open_error(write_raw("o.safetensors", overflow, std::string(8, '\0')), "'w'", "overflow");
}

TEST_F(SafetensorsTest, RejectsMalformedEntries) {
  const std::string data(8, '\0');
  expect_open_error(write_raw("a.safetensors", R"({"w":{"dtype":"F32","shape":[2]}})", data), "'w'",
                    "missing \"data_offsets\"");
  expect_open_error(write_raw("b.safetensors", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
                    "'w'", "non-negative");
  expect_open_error(write_raw("c.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data),
                    "'w'", "[begin, end]");
  expect_open_error(write_raw("d.safetensors", R"({"w":[1,2]})", data), "'w'", "expected an object");
  expect_open_error(write_raw("e.safetensors", R"({"__metadata__":{"step":3}})", data), "__metadata__.step",
                    "must be strings");
  expect_open_error(write_raw("f.safetensors", R"([1,2])", data), "header", "expected a JSON object");
  EXPECT_THROW(SafetensorsFile::open(write_raw("g.safetensors", R"({"w":{"dtype")", data)), ir::InputError);
  EXPECT_THROW(SafetensorsFile::open(path("does-not-exist.safetensors")), ir::InputError);
}

TEST_F(SafetensorsTest, ReadOfNonFloatDtypeNamesTensor) {
  const std::string header = R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  const SafetensorsFile f = SafetensorsFile::open(write_raw("m.safetensors", header, std::string(8, '\0')));
  try {
    f.read_f32("ids");
    FAIL();
  } catch (const ir::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'ids': dtype I64"), std::string::npos) << e.what();
  }
  std::vector<float> wrong_size(3);
  EXPECT_THROW(f.read_f32("ids", wrong_size), ir::InputError);
  EXPECT_THROW(f.read_f32("nope"), ir::InputError);
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  const std::vector<float> three(3);
  EXPECT_THROW(write_safetensors(path("m.safetensors"), {{"w", {2, 2}, three}}), ir::InputError);
  EXPECT_THROW(write_safetensors(path("m.safetensors"), {{"w", {3}, three}, {"w", {3}, three}}), ir::InputError);
  EXPECT_THROW(write_safetensors(path("m.safetensors"), {{"w", {3}, three}}, ir::DType::fp8), ir::InputError);
  EXPECT_THROW(write_safetensors(path("no/such/dir/m.safetensors"), {{"w", {3}, three}}), ir::InputError);
  EXPECT_FALSE(fs::exists(path("m.safetensors")));
}

TEST_F(SafetensorsTest, HostileBytesGiveInputErrorNeverACrash) {
  // Every truncation and many single-byte corruptions of a valid file either open (and read) or
  // throw InputError.
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{7, 8};
  write_safetensors(path("good.safetensors"), {{"a", {2, 3}, a}, {"b", {2}, b}}, ir::DType::bf16, {{"k", "v"}});
  std::ifstream in(path("good.safetensors"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto try_open = [&](const std::string& bytes) {
    std::ofstream(path("bad.safetensors"), std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    try {
      const SafetensorsFile f = SafetensorsFile::open(path("bad.safetensors"));
      for (const auto& t : f.tensors()) f.read_f32(t.name);
    } catch (const ir::InputError&) {
    }
  };
  for (size_t len = 0; len < good.size(); ++len) try_open(good.substr(0, len));
  for (size_t i = 0; i < good.size(); ++i)
    for (char c : {'\0', '"', '9', '-', '}', '[', '\xff'}) {
      std::string bytes = good;
      bytes[i] = c;
      try_open(bytes);
    }
}

TEST_F(SafetensorsTest, ShardedIndexOverTwoFiles) {
  const std::vector<float> x{1, 2, 3, 4}, y{5, 6}, z{7};
  write_safetensors(path("model-00001-of-00002.safetensors"), {{"x", {2, 2}, x}, {"z", {1}, z}});
  write_safetensors(path("model-00002-of-00002.safetensors"), {{"y", {2}, y}}, ir::DType::bf16);
  write_safetensors_index(path("model.safetensors.index.json"),
                          {{"x", "model-00001-of-00002.safetensors"}, {"y", "model-00002-of-00002.safetensors"},
                           {"z", "model-00001-of-00002.safetensors"}},
                          /*total_size_bytes=*/24);
  for (const std::string& open_path : {dir_.string(), path("model.safetensors.index.json")}) {
    const SafetensorsCheckpoint c = SafetensorsCheckpoint::open(open_path);
    EXPECT_EQ(c.names(), (std::vector<std::string>{"x", "y", "z"}));
    std::vector<float> rx(4), ry(2);
    c.read_f32("x", rx);
    c.read_f32("y", ry);
    EXPECT_EQ(rx, x);
    EXPECT_EQ(ry, y);
    EXPECT_EQ(c.find("y")->dtype, "BF16");
    EXPECT_EQ(c.find("w"), nullptr);
    EXPECT_THROW(c.read_f32("w", ry), ir::InputError);
  }
}

TEST_F(SafetensorsTest, ShardedIndexErrorsNameIndexAndTensor) {
  const std::vector<float> x{1};
  write_safetensors(path("a.safetensors"), {{"x", {1}, x}});
  write_safetensors_index(path("missing.index.json"), {{"x", "a.safetensors"}, {"q", "a.safetensors"}}, 4);
  try {
    SafetensorsCheckpoint::open(path("missing.index.json"));
    FAIL();
  } catch (const ir::InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("missing.index.json"), std::string::npos) << what;
    EXPECT_NE(what.find("weight_map.q"), std::string::npos) << what;
    EXPECT_NE(what.find("missing tensor"), std::string::npos) << what;
  }
  write_safetensors_index(path("nofile.index.json"), {{"x", "b.safetensors"}}, 4);
  EXPECT_THROW(SafetensorsCheckpoint::open(path("nofile.index.json")), ir::InputError);
  write_safetensors_index(path("escape.index.json"), {{"x", "../a.safetensors"}}, 4);
  EXPECT_THROW(SafetensorsCheckpoint::open(path("escape.index.json")), ir::InputError);
  std::ofstream(path("bad.index.json")) << R"({"metadata": {}})";
  EXPECT_THROW(SafetensorsCheckpoint::open(path("bad.index.json")), ir::InputError);
  fs::create_directories(dir_ / "empty");
  EXPECT_THROW(SafetensorsCheckpoint::open(path("empty")), ir::InputError);
}

}  // namespace
}  // namespace mgt::rt
