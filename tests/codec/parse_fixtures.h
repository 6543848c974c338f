#pragma once
// Builders for small checkpoint files (safetensors, npy, GGUF, torch zip) used
// by the parse tests, and checks shared by them.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/parse/region.h"

namespace brevis::codec::test {

inline bytes make_bytes(size_t n, uint8_t seed) {
  bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

inline void append(bytes& out, std::string_view s) {
  put_bytes(out, as_bytes(s));
}

inline byte_view slice(byte_view file, region const& r) {
  return file.subspan(r.offset, r.length);
}

/// Asserts the invariant every parse result must keep.
inline void expect_covers(parsed_file const& p, size_t size) {
  EXPECT_TRUE(regions_cover(p.regions, size)) << p.note;
}

inline std::vector<region> tensors_of(parsed_file const& p) {
  std::vector<region> out;
  for (region const& r : p.regions) {
    if (r.kind == region_kind::tensor) out.push_back(r);
  }
  return out;
}

// ------------------------------------------------------------ safetensors --

/// [u64 length][json][data]; the JSON is padded with spaces like the
/// reference writer so the data starts 8-aligned.
inline bytes safetensors_from_header(std::string json, bytes const& data) {
  while ((8 + json.size()) % 8 != 0) json.push_back(' ');
  bytes out;
  put_le<uint64_t>(out, json.size());
  append(out, json);
  put_bytes(out, data);
  return out;
}

struct st_tensor {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  bytes data;
};

inline std::string shape_json(std::vector<uint64_t> const& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

/// Tensors laid out in order, with `gap` bytes of padding after each.
inline bytes make_safetensors(std::vector<st_tensor> const& tensors,
                              size_t gap = 0) {
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"}";
  bytes data;
  for (st_tensor const& t : tensors) {
    size_t const begin = data.size();
    put_bytes(data, t.data);
    json += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype +
            "\",\"shape\":" + shape_json(t.shape) + ",\"data_offsets\":[" +
            std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
    data.insert(data.end(), gap, 0);
  }
  json += "}";
  return safetensors_from_header(json, data);
}

// -------------------------------------------------------------------- npy --

inline bytes make_npy(std::string dict, bytes const& data, int major = 1) {
  size_t const prefix = major == 1 ? 10 : 12;
  dict += ' ';
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  bytes out;
  append(out, "\x93NUMPY");
  put_u8(out, static_cast<uint8_t>(major));
  put_u8(out, 0);
  if (major == 1) {
    put_le<uint16_t>(out, static_cast<uint16_t>(dict.size()));
  } else {
    put_le<uint32_t>(out, static_cast<uint32_t>(dict.size()));
  }
  append(out, dict);
  put_bytes(out, data);
  return out;
}

inline std::string npy_dict(std::string const& descr, std::string shape,
                            bool fortran = false) {
  return "{'descr': '" + descr +
         "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// ------------------------------------------------------------------- gguf --

class gguf_builder {
 public:
  void kv_u32(std::string const& key, uint32_t v) {
    head(key, 4);
    put_le<uint32_t>(kvs_, v);
    ++kv_count_;
  }
  void kv_string(std::string const& key, std::string const& v) {
    head(key, 8);
    string(kvs_, v);
    ++kv_count_;
  }
  void kv_f32_array(std::string const& key, size_t n) {
    head(key, 9);
    put_le<uint32_t>(kvs_, 6);
    put_le<uint64_t>(kvs_, n);
    for (size_t i = 0; i < n; ++i) put_le<uint32_t>(kvs_, 0x3f800000);
    ++kv_count_;
  }
  void kv_string_array(std::string const& key,
                       std::vector<std::string> const& v) {
    head(key, 9);
    put_le<uint32_t>(kvs_, 8);
    put_le<uint64_t>(kvs_, v.size());
    for (auto const& s : v) string(kvs_, s);
    ++kv_count_;
  }
  /// Raw bytes appended to the metadata section (for malformed files).
  void kv_raw(bytes const& raw, uint64_t count) {
    put_bytes(kvs_, raw);
    kv_count_ += count;
  }
  /// `dims` in GGUF order (ne[0] first).
  void tensor(std::string const& name, std::vector<uint64_t> const& dims,
              uint32_t type, bytes const& data) {
    tensors_.push_back({name, dims, type, data});
  }

  bytes build(uint32_t version = 3, uint64_t alignment = 32) const {
    bytes out;
    append(out, "GGUF");
    put_le<uint32_t>(out, version);
    put_le<uint64_t>(out, tensors_.size());
    put_le<uint64_t>(out, kv_count_);
    put_bytes(out, kvs_);
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (auto const& t : tensors_) {
      string(out, t.name);
      put_le<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) put_le<uint64_t>(out, d);
      put_le<uint32_t>(out, t.type);
      put_le<uint64_t>(out, offset);
      offsets.push_back(offset);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    while (out.size() % alignment != 0) out.push_back(0);
    for (auto const& t : tensors_) {
      put_bytes(out, t.data);
      while (out.size() % alignment != 0) out.push_back(0);
    }
    return out;
  }

  static void string(bytes& out, std::string const& s) {
    put_le<uint64_t>(out, s.size());
    append(out, s);
  }

 private:
  struct tensor_spec {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    bytes data;
  };
  void head(std::string const& key, uint32_t type) {
    string(kvs_, key);
    put_le<uint32_t>(kvs_, type);
  }

  bytes kvs_;
  uint64_t kv_count_ = 0;
  std::vector<tensor_spec> tensors_;
};

// -------------------------------------------------------------------- zip --

/// Writes a zip the way torch's writer does: STORED entries whose data is
/// aligned to 64 bytes by padding in the local extra field. With `zip64` every
/// size and offset goes through ZIP64 extra fields and records.
class zip_builder {
 public:
  void add(std::string const& name, bytes const& data, uint16_t method = 0) {
    entries_.push_back({name, data, method, 0});
  }

  bytes build(bool zip64 = false) {
    bytes out;
    for (auto& e : entries_) {
      e.offset = out.size();
      put_le<uint32_t>(out, 0x04034b50);
      put_le<uint16_t>(out, zip64 ? 45 : 20);
      put_le<uint16_t>(out, 0);  // flags
      put_le<uint16_t>(out, e.method);
      put_le<uint32_t>(out, 0);  // time, date
      put_le<uint32_t>(out, 0);  // crc (not checked by the parser)
      put_le<uint32_t>(out, static_cast<uint32_t>(e.data.size()));
      put_le<uint32_t>(out, static_cast<uint32_t>(e.data.size()));
      size_t const base = out.size() + 4 + e.name.size() + 4;
      size_t const pad = (64 - base % 64) % 64;
      put_le<uint16_t>(out, static_cast<uint16_t>(e.name.size()));
      put_le<uint16_t>(out, static_cast<uint16_t>(4 + pad));
      append(out, e.name);
      put_le<uint16_t>(out, 0x4246);  // "FB", torch's padding field
      put_le<uint16_t>(out, static_cast<uint16_t>(pad));
      out.insert(out.end(), pad, 'Z');
      put_bytes(out, e.data);
    }
    uint64_t const cd_offset = out.size();
    for (auto const& e : entries_) {
      put_le<uint32_t>(out, 0x02014b50);
      put_le<uint16_t>(out, 45);
      put_le<uint16_t>(out, zip64 ? 45 : 20);
      put_le<uint16_t>(out, 0);
      put_le<uint16_t>(out, e.method);
      put_le<uint32_t>(out, 0);
      put_le<uint32_t>(out, 0);
      uint32_t const sat = 0xffffffff;
      put_le<uint32_t>(out, zip64 ? sat : static_cast<uint32_t>(e.data.size()));
      put_le<uint32_t>(out, zip64 ? sat : static_cast<uint32_t>(e.data.size()));
      put_le<uint16_t>(out, static_cast<uint16_t>(e.name.size()));
      put_le<uint16_t>(out, zip64 ? 28 : 0);
      put_le<uint16_t>(out, 0);  // comment
      put_le<uint16_t>(out, 0);  // disk
      put_le<uint16_t>(out, 0);
      put_le<uint32_t>(out, 0);
      put_le<uint32_t>(out, zip64 ? sat : static_cast<uint32_t>(e.offset));
      append(out, e.name);
      if (zip64) {
        put_le<uint16_t>(out, 0x0001);
        put_le<uint16_t>(out, 24);
        put_le<uint64_t>(out, e.data.size());
        put_le<uint64_t>(out, e.data.size());
        put_le<uint64_t>(out, e.offset);
      }
    }
    uint64_t const cd_size = out.size() - cd_offset;
    if (zip64) {
      uint64_t const z = out.size();
      put_le<uint32_t>(out, 0x06064b50);
      put_le<uint64_t>(out, 44);
      put_le<uint16_t>(out, 45);
      put_le<uint16_t>(out, 45);
      put_le<uint32_t>(out, 0);
      put_le<uint32_t>(out, 0);
      put_le<uint64_t>(out, entries_.size());
      put_le<uint64_t>(out, entries_.size());
      put_le<uint64_t>(out, cd_size);
      put_le<uint64_t>(out, cd_offset);
      put_le<uint32_t>(out, 0x07064b50);
      put_le<uint32_t>(out, 0);
      put_le<uint64_t>(out, z);
      put_le<uint32_t>(out, 1);
    }
    put_le<uint32_t>(out, 0x06054b50);
    put_le<uint16_t>(out, 0);
    put_le<uint16_t>(out, 0);
    uint16_t const n = zip64 ? 0xffff : static_cast<uint16_t>(entries_.size());
    put_le<uint16_t>(out, n);
    put_le<uint16_t>(out, n);
    put_le<uint32_t>(out, zip64 ? 0xffffffff : static_cast<uint32_t>(cd_size));
    put_le<uint32_t>(out,
                     zip64 ? 0xffffffff : static_cast<uint32_t>(cd_offset));
    put_le<uint16_t>(out, 0);
    return out;
  }

 private:
  struct entry {
    std::string name;
    bytes data;
    uint16_t method;
    uint64_t offset;
  };
  std::vector<entry> entries_;
};

// ----------------------------------------------------------------- pickle --

struct pickled_storage {
  std::string key;
  std::string storage_class;  // "FloatStorage", "BFloat16Storage", ...
  uint64_t numel;
  /// The tensors rebuilt over the storage: {offset, size, stride} each;
  /// none given means one flat tensor over all of it.
  struct view {
    uint32_t offset;
    std::vector<uint32_t> size, stride;
  };
  std::vector<view> views = {};
};

/// A protocol-2 pickle shaped like torch.save's data.pkl: a dict of
/// _rebuild_tensor_v2 calls whose first argument is a persistent id. Strings
/// and globals are memoized and reused through BINGET, as pickle does.
inline bytes make_torch_pickle(std::vector<pickled_storage> const& storages) {
  bytes p = {0x80, 0x02, '}', 'q', 0x00, '('};
  auto unicode = [&](std::string const& s) {
    put_u8(p, 'X');
    put_le<uint32_t>(p, static_cast<uint32_t>(s.size()));
    append(p, s);
  };
  uint8_t memo = 1;
  int storage_memo = -1;
  int rebuild_memo = -1;
  for (auto const& s : storages) {
    unicode("tensor" + s.key);
    p.push_back('q');
    p.push_back(memo++);
    if (rebuild_memo < 0) {
      append(p, "ctorch._utils\n_rebuild_tensor_v2\n");
      rebuild_memo = memo;
      p.push_back('q');
      p.push_back(memo++);
    } else {
      p.push_back('h');
      p.push_back(static_cast<uint8_t>(rebuild_memo));
    }
    p.push_back('(');  // args of _rebuild_tensor_v2
    p.push_back('(');  // the persistent id tuple
    if (storage_memo < 0) {
      unicode("storage");
      storage_memo = memo;
      p.push_back('q');
      p.push_back(memo++);
    } else {
      p.push_back('h');
      p.push_back(static_cast<uint8_t>(storage_memo));
    }
    append(p, "ctorch\n" + s.storage_class + "\n");
    unicode(s.key);
    unicode("cpu");
    put_u8(p, 'J');
    put_le<uint32_t>(p, static_cast<uint32_t>(s.numel));
    p.push_back('t');
    p.push_back('Q');  // BINPERSID
    int const storage_ref = memo;
    p.push_back('q');
    p.push_back(memo++);
    auto ints = [&](std::vector<uint32_t> const& v) {
      p.push_back('(');
      for (uint32_t x : v) {
        put_u8(p, 'J');
        put_le<uint32_t>(p, x);
      }
      p.push_back('t');
    };
    std::vector<pickled_storage::view> views = s.views;
    if (views.empty()) {
      views.push_back({0, {static_cast<uint32_t>(s.numel)}, {1}});
    }
    for (size_t v = 0; v < views.size(); ++v) {
      if (v > 0) {  // another tensor over the same storage
        p.push_back('h');
        p.push_back(static_cast<uint8_t>(rebuild_memo));
        p.push_back('(');
        p.push_back('h');
        p.push_back(static_cast<uint8_t>(storage_ref));
      }
      put_u8(p, 'J');  // storage offset
      put_le<uint32_t>(p, views[v].offset);
      ints(views[v].size);
      ints(views[v].stride);
      p.push_back(0x89);  // requires_grad=False
      append(p, "ccollections\nOrderedDict\n");
      p.push_back(')');
      p.push_back('R');
      p.push_back('t');            // args tuple
      p.push_back('R');            // _rebuild_tensor_v2(*args)
      if (v + 1 < views.size()) {  // the dict's next key
        unicode("tensor" + s.key + "_" + std::to_string(v + 1));
      }
    }
  }
  p.push_back('u');  // SETITEMS
  p.push_back('.');
  return p;
}

}  // namespace brevis::codec::test
