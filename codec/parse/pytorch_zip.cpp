// torch.save zip archives. The zip is read from its end of central directory
// (with ZIP64 records when present); every entry's local header is checked
// against the file. STORED entries named `<prefix>/data/<key>` are tensor
// storages; their element type comes from the persistent ids in
// `<prefix>/data.pkl`, found by a pickle scanner that only tracks the stack
// (nothing is ever executed), and their shape from the one tensor rebuilt
// over each of them. Everything else is opaque.

#include "codec/parse/pytorch_zip.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "codec/core/error.h"
#include "codec/parse/util.h"

namespace brevis::codec {

namespace {

// ---------------------------------------------------------------- pickle --

// A value on the pickle stack, only as detailed as persistent ids need.
struct pvalue {
  enum kind_t : uint8_t {
    other,
    mark,
    string,
    integer,
    global,
    tuple,
    storage  // a persistent id's result; text is the storage key
  };
  kind_t kind = other;
  uint8_t depth = 0;  // tuple nesting, bounded so destruction stays shallow
  std::string text;   // string; global as "module\nname"
  int64_t number = 0;
  std::shared_ptr<std::vector<pvalue> const> items;  // tuple

  static pvalue of(kind_t k) {
    pvalue v;
    v.kind = k;
    return v;
  }
};

constexpr size_t max_stack = 1u << 20;
constexpr size_t max_memo = 1u << 20;
constexpr size_t max_text = 256;  // longer strings are not keys or classes

dtype storage_dtype(std::string_view global) {
  auto const nl = global.find('\n');
  if (nl == std::string_view::npos) return dtype::none;
  std::string_view const module = global.substr(0, nl);
  std::string_view const name = global.substr(nl + 1);
  if (module != "torch" && module != "torch.cuda") return dtype::none;
  struct entry {
    std::string_view name;
    dtype type;
  };
  static constexpr entry table[] = {
      {"FloatStorage", dtype::f32},     {"HalfStorage", dtype::f16},
      {"BFloat16Storage", dtype::bf16}, {"DoubleStorage", dtype::f64},
      {"LongStorage", dtype::i64},      {"IntStorage", dtype::i32},
      {"ShortStorage", dtype::i16},     {"CharStorage", dtype::i8},
      {"ByteStorage", dtype::u8},       {"BoolStorage", dtype::boolean},
  };
  for (entry const& e : table) {
    if (e.name == name) return e.type;
  }
  return dtype::none;  // UntypedStorage, complex, quantized: left untyped
}

class pickle_scanner {
 public:
  explicit pickle_scanner(byte_view data) : in_(data) {}

  std::map<std::string, pickle_storage> run() {
    try {
      while (!in_.empty() && step()) {
      }
    } catch (error const&) {
      // Truncated or malformed: keep what was found before.
    }
    return std::move(found_);
  }

 private:
  void push(pvalue v) {
    fail_if(stack_.size() >= max_stack, errc::limit, "pickle stack too deep");
    stack_.push_back(std::move(v));
  }

  pvalue pop() {
    fail_if(stack_.empty(), errc::corrupt, "pickle stack underflow");
    pvalue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }

  // Pops everything down to the topmost mark, in order.
  std::vector<pvalue> pop_mark() {
    size_t i = stack_.size();
    while (i > 0 && stack_[i - 1].kind != pvalue::mark) --i;
    fail_if(i == 0, errc::corrupt, "pickle mark missing");
    std::vector<pvalue> items(std::make_move_iterator(stack_.begin() + i),
                              std::make_move_iterator(stack_.end()));
    stack_.resize(i - 1);
    return items;
  }

  void push_tuple(std::vector<pvalue> items) {
    pvalue t;
    t.kind = pvalue::tuple;
    for (pvalue& v : items) {
      if (v.kind == pvalue::tuple && v.depth >= 3) v = pvalue{};  // flatten
      if (v.kind == pvalue::tuple)
        t.depth = std::max<uint8_t>(t.depth, v.depth + 1);
    }
    t.items = std::make_shared<std::vector<pvalue> const>(std::move(items));
    push(std::move(t));
  }

  void push_text(byte_view s, pvalue::kind_t kind = pvalue::string) {
    pvalue v;
    if (s.size() <= max_text) {
      v.kind = kind;
      v.text.assign(reinterpret_cast<char const*>(s.data()), s.size());
    }
    push(std::move(v));
  }

  void push_int(int64_t n) {
    pvalue v;
    v.kind = pvalue::integer;
    v.number = n;
    push(std::move(v));
  }

  byte_view line() {
    size_t n = 0;
    byte_reader probe = in_;
    while (probe.u8() != '\n') ++n;
    byte_view l = in_.take(n);
    in_.u8();
    return l;
  }

  byte_view sized(uint64_t n) {
    fail_if(n > in_.remaining(), errc::truncated, "pickle string truncated");
    return in_.take(n);
  }

  void memo_put(uint64_t key) {
    fail_if(stack_.empty(), errc::corrupt, "memoize on empty stack");
    if (memo_.size() >= max_memo && !memo_.contains(key)) return;
    memo_[key] = stack_.back();
  }

  void memo_get(uint64_t key) {
    auto const it = memo_.find(key);
    push(it == memo_.end() ? pvalue{} : it->second);
  }

  // A little-endian two's-complement integer of n bytes (LONG1/LONG4).
  void push_long(uint64_t n) {
    byte_view const b = sized(n);
    if (n == 0 || n > 8) {
      push(n == 0 ? pvalue::of(pvalue::integer) : pvalue{});
      return;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{b[i]} << (8 * i);
    if (n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);
    push_int(static_cast<int64_t>(v));
  }

  // Records the storage a persistent id names; returns the value that
  // stands for it on the stack (a storage reference, or other).
  pvalue persistent_id(pvalue const& pid) {
    if (pid.kind != pvalue::tuple || pid.items->size() < 5) return {};
    auto const& t = *pid.items;
    if (t[0].kind != pvalue::string || t[0].text != "storage") return {};
    pvalue ref = pvalue::of(pvalue::storage);
    if (t[2].kind == pvalue::string) {
      ref.text = t[2].text;
    } else if (t[2].kind == pvalue::integer) {
      ref.text = std::to_string(t[2].number);
    } else {
      return {};
    }
    pickle_storage s;
    if (t[1].kind == pvalue::global) s.type = storage_dtype(t[1].text);
    if (t[4].kind == pvalue::integer && t[4].number >= 0) {
      s.numel = static_cast<uint64_t>(t[4].number);
    }
    auto const [it, fresh] = found_.try_emplace(ref.text, s);
    if (!fresh) {  // named again: keep the views seen so far
      // A shape taken against another element count no longer holds.
      if (it->second.numel != s.numel) it->second.shape.clear();
      it->second.type = s.type;
      it->second.numel = s.numel;
    }
    return ref;
  }

  // The integers of a tuple, or nothing if it holds anything else.
  static std::optional<std::vector<int64_t>> integers(pvalue const& v) {
    if (v.kind != pvalue::tuple) return std::nullopt;
    std::vector<int64_t> out;
    for (pvalue const& x : *v.items) {
      if (x.kind != pvalue::integer) return std::nullopt;
      out.push_back(x.number);
    }
    return out;
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...):
  // a tensor viewing its storage. A storage gets a shape only when exactly
  // one tensor views it, from offset 0, contiguous and in row-major order,
  // over all its elements; any other view leaves it without one.
  void rebuild_call(pvalue const& callable, pvalue const& args) {
    if (callable.kind != pvalue::global ||
        (callable.text != "torch._utils\n_rebuild_tensor_v2" &&
         callable.text != "torch._utils\n_rebuild_tensor")) {
      return;
    }
    if (args.kind != pvalue::tuple || args.items->size() < 4) return;
    auto const& a = *args.items;
    if (a[0].kind != pvalue::storage) return;
    auto const it = found_.find(a[0].text);
    if (it == found_.end()) return;
    pickle_storage& s = it->second;
    ++s.views;
    s.shape.clear();
    auto const size = integers(a[2]);
    auto const stride = integers(a[3]);
    if (s.views != 1 || a[1].kind != pvalue::integer || a[1].number != 0 ||
        !size || !stride || size->size() != stride->size() || size->empty()) {
      return;
    }
    // Row-major contiguity: each stride is the product of the sizes after
    // it (a dimension of size 1 may carry any stride).
    uint64_t elements = 1;
    for (size_t d = size->size(); d-- > 0;) {
      int64_t const n = (*size)[d];
      if (n <= 0) return;
      if (n > 1 && (*stride)[d] != static_cast<int64_t>(elements)) return;
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(n),
                                 &elements)) {
        return;
      }
    }
    if (elements != s.numel) return;
    s.shape.assign(size->begin(), size->end());
  }

  // Executes one opcode on the model stack; false at STOP or an opcode this
  // scanner does not know.
  bool step() {
    uint8_t const op = in_.u8();
    switch (op) {
      case 0x80:  // PROTO
        in_.u8();
        return true;
      case 0x95:  // FRAME
        in_.le<uint64_t>();
        return true;
      case '.':  // STOP
        return false;
      case '(':  // MARK
        push(pvalue::of(pvalue::mark));
        return true;
      case ')':  // EMPTY_TUPLE
        push_tuple({});
        return true;
      case 't':  // TUPLE
        push_tuple(pop_mark());
        return true;
      case 0x85:    // TUPLE1
      case 0x86:    // TUPLE2
      case 0x87: {  // TUPLE3
        size_t const n = op - 0x84u;
        fail_if(stack_.size() < n, errc::corrupt, "pickle stack underflow");
        std::vector<pvalue> items(std::make_move_iterator(stack_.end() - n),
                                  std::make_move_iterator(stack_.end()));
        stack_.resize(stack_.size() - n);
        push_tuple(std::move(items));
        return true;
      }
      case 'c': {  // GLOBAL module\nname\n
        byte_view const module = line();
        byte_view const name = line();
        std::string text(reinterpret_cast<char const*>(module.data()),
                         module.size());
        text += '\n';
        text.append(reinterpret_cast<char const*>(name.data()), name.size());
        push_text(as_bytes(text), pvalue::global);
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        pvalue const name = pop();
        pvalue const module = pop();
        if (name.kind == pvalue::string && module.kind == pvalue::string) {
          push_text(as_bytes(module.text + '\n' + name.text), pvalue::global);
        } else {
          push(pvalue{});
        }
        return true;
      }
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING
        push_text(sized(in_.le<uint32_t>()));
        return true;
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
        push_text(sized(in_.u8()));
        return true;
      case 0x8d:  // BINUNICODE8
        push_text(sized(in_.le<uint64_t>()));
        return true;
      case 'B':  // BINBYTES
        sized(in_.le<uint32_t>());
        push(pvalue{});
        return true;
      case 'C':  // SHORT_BINBYTES
        sized(in_.u8());
        push(pvalue{});
        return true;
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8
        sized(in_.le<uint64_t>());
        push(pvalue{});
        return true;
      case 'S':  // STRING 'text'\n
      case 'V':  // UNICODE text\n
      {
        byte_view l = line();
        if (op == 'S' && l.size() >= 2) l = l.subspan(1, l.size() - 2);
        push_text(l);
        return true;
      }
      case 'J':  // BININT
        push_int(in_.le<int32_t>());
        return true;
      case 'K':  // BININT1
        push_int(in_.u8());
        return true;
      case 'M':  // BININT2
        push_int(in_.le<uint16_t>());
        return true;
      case 0x8a:  // LONG1
        push_long(in_.u8());
        return true;
      case 0x8b:  // LONG4
        push_long(in_.le<uint32_t>());
        return true;
      case 'I':  // INT decimal\n
      case 'L':  // LONG decimal\n
      {
        byte_view const l = line();
        int64_t v = 0;
        bool ok = !l.empty() && l.size() < 19;
        for (uint8_t c : l) {
          if (c >= '0' && c <= '9') {
            v = v * 10 + (c - '0');
          } else if (!(c == 'L' && op == 'L')) {
            ok = false;
          }
        }
        if (ok) {
          push_int(v);
        } else {
          push(pvalue{});
        }
        return true;
      }
      case 'G':  // BINFLOAT
        in_.take(8);
        push(pvalue{});
        return true;
      case 'F':  // FLOAT
        line();
        push(pvalue{});
        return true;
      case 'N':   // NONE
      case 0x88:  // NEWTRUE
      case 0x89:  // NEWFALSE
      case '}':   // EMPTY_DICT
      case ']':   // EMPTY_LIST
      case 0x8f:  // EMPTY_SET
      case 0x97:  // NEXT_BUFFER
        push(pvalue{});
        return true;
      case 0x98:  // READONLY_BUFFER: leaves the top in place
        return true;
      case 'q':  // BINPUT
        memo_put(in_.u8());
        return true;
      case 'r':  // LONG_BINPUT
        memo_put(in_.le<uint32_t>());
        return true;
      case 0x94:  // MEMOIZE
        memo_put(memo_.size());
        return true;
      case 'h':  // BINGET
        memo_get(in_.u8());
        return true;
      case 'j':  // LONG_BINGET
        memo_get(in_.le<uint32_t>());
        return true;
      case 'Q': {  // BINPERSID
        pvalue const pid = pop();
        push(persistent_id(pid));
        return true;
      }
      case 'a':  // APPEND
      case 'b':  // BUILD
        pop();
        return true;
      case 's':  // SETITEM
        pop();
        pop();
        return true;
      case 'R': {  // REDUCE
        pvalue const args = pop();
        pvalue const callable = pop();
        rebuild_call(callable, args);
        push(pvalue{});
        return true;
      }
      case 0x81:  // NEWOBJ
        pop();
        pop();
        push(pvalue{});
        return true;
      case 0x92:  // NEWOBJ_EX
        pop();
        pop();
        pop();
        push(pvalue{});
        return true;
      case 'e':   // APPENDS
      case 'u':   // SETITEMS
      case 0x90:  // ADDITEMS
      case '1':   // POP_MARK
        pop_mark();
        return true;
      case 'l':   // LIST
      case 'd':   // DICT
      case 0x91:  // FROZENSET
      case 'o':   // OBJ
        pop_mark();
        push(pvalue{});
        return true;
      case '0':  // POP
        pop();
        return true;
      case '2': {  // DUP
        fail_if(stack_.empty(), errc::corrupt, "pickle stack underflow");
        pvalue top = stack_.back();
        push(std::move(top));
        return true;
      }
      case 0x82:  // EXT1
        in_.u8();
        push(pvalue{});
        return true;
      case 0x83:  // EXT2
        in_.le<uint16_t>();
        push(pvalue{});
        return true;
      case 0x84:  // EXT4
        in_.le<uint32_t>();
        push(pvalue{});
        return true;
      default:  // PERSID, INST and anything newer: stop here
        return false;
    }
  }

  byte_reader in_;
  std::vector<pvalue> stack_;
  std::unordered_map<uint64_t, pvalue> memo_;
  std::map<std::string, pickle_storage> found_;
};

// ------------------------------------------------------------------- zip --

constexpr uint32_t sig_local = 0x04034b50;
constexpr uint32_t sig_central = 0x02014b50;
constexpr uint32_t sig_eocd = 0x06054b50;
constexpr uint32_t sig_zip64_eocd = 0x06064b50;
constexpr uint32_t sig_zip64_locator = 0x07064b50;

struct zip_entry {
  std::string name;
  uint16_t method = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_offset = 0;
  uint64_t data_offset = 0;  // filled from the local header
};

byte_reader reader_at(byte_view file, uint64_t offset, uint64_t length) {
  fail_if(offset > file.size() || length > file.size() - offset, errc::corrupt,
          "zip structure outside the file");
  return byte_reader(file.subspan(offset, length));
}

// Where the central directory is, from the (ZIP64) end of central directory.
struct directory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t end_offset = 0;  // first byte of the EOCD records
};

directory find_directory(byte_view file) {
  fail_if(file.size() < 22, errc::corrupt, "too small for a zip");
  // The EOCD is 22 bytes plus a comment of at most 65535 bytes.
  uint64_t const lowest =
      file.size() > 22 + 65535 ? file.size() - 22 - 65535 : 0;
  std::optional<uint64_t> eocd;
  for (uint64_t p = file.size() - 22;; --p) {
    if (load_le<uint32_t>(file.data() + p) == sig_eocd &&
        p + 22 + load_le<uint16_t>(file.data() + p + 20) == file.size()) {
      eocd = p;
      break;
    }
    if (p == lowest) break;
  }
  fail_if(!eocd, errc::corrupt, "no zip end of central directory");
  byte_reader e = reader_at(file, *eocd, 22);
  e.le<uint32_t>();
  uint16_t const disk = e.le<uint16_t>();
  uint16_t const cd_disk = e.le<uint16_t>();
  e.le<uint16_t>();  // entries on this disk
  directory d;
  d.entries = e.le<uint16_t>();
  d.size = e.le<uint32_t>();
  d.offset = e.le<uint32_t>();
  d.end_offset = *eocd;
  fail_if(disk != 0 || cd_disk != 0, errc::corrupt, "multi-disk zip");

  // ZIP64: a locator sits right before the EOCD and points at the ZIP64 EOCD.
  if (*eocd >= 20 &&
      load_le<uint32_t>(file.data() + *eocd - 20) == sig_zip64_locator) {
    byte_reader l = reader_at(file, *eocd - 20, 20);
    l.le<uint32_t>();
    l.le<uint32_t>();  // disk with the ZIP64 EOCD
    uint64_t const z = l.le<uint64_t>();
    fail_if(z > *eocd - 20 || *eocd - 20 - z < 56, errc::corrupt,
            "zip64 end of central directory out of place");
    byte_reader r = reader_at(file, z, 56);
    fail_if(r.le<uint32_t>() != sig_zip64_eocd, errc::corrupt,
            "bad zip64 end of central directory");
    r.le<uint64_t>();  // record size
    r.le<uint16_t>();
    r.le<uint16_t>();
    r.le<uint32_t>();
    r.le<uint32_t>();
    r.le<uint64_t>();
    d.entries = r.le<uint64_t>();
    d.size = r.le<uint64_t>();
    d.offset = r.le<uint64_t>();
    d.end_offset = z;
  }
  fail_if(d.offset > d.end_offset || d.size > d.end_offset - d.offset,
          errc::corrupt, "zip central directory out of place");
  // A central header takes >= 46 bytes.
  fail_if(d.entries > d.size / 46, errc::corrupt,
          "zip entry count exceeds the central directory");
  return d;
}

zip_entry read_central(byte_reader& cd) {
  fail_if(cd.le<uint32_t>() != sig_central, errc::corrupt,
          "bad zip central header");
  zip_entry z;
  cd.le<uint16_t>();  // version made by
  cd.le<uint16_t>();  // version needed
  cd.le<uint16_t>();  // flags
  z.method = cd.le<uint16_t>();
  cd.le<uint32_t>();  // time, date
  cd.le<uint32_t>();  // crc
  z.compressed = cd.le<uint32_t>();
  z.uncompressed = cd.le<uint32_t>();
  uint16_t const name_len = cd.le<uint16_t>();
  uint16_t const extra_len = cd.le<uint16_t>();
  uint16_t const comment_len = cd.le<uint16_t>();
  uint16_t const disk = cd.le<uint16_t>();
  cd.le<uint16_t>();  // internal attributes
  cd.le<uint32_t>();  // external attributes
  z.local_offset = cd.le<uint32_t>();
  byte_view const name = cd.take(name_len);
  z.name.assign(reinterpret_cast<char const*>(name.data()), name.size());
  byte_reader extra(cd.take(extra_len));
  cd.take(comment_len);
  // The ZIP64 extra field holds, in order, only the fields saturated above.
  while (extra.remaining() >= 4) {
    uint16_t const id = extra.le<uint16_t>();
    uint16_t const size = extra.le<uint16_t>();
    byte_reader field(extra.take(size));
    if (id != 0x0001) continue;
    if (z.uncompressed == 0xffffffff) z.uncompressed = field.le<uint64_t>();
    if (z.compressed == 0xffffffff) z.compressed = field.le<uint64_t>();
    if (z.local_offset == 0xffffffff) z.local_offset = field.le<uint64_t>();
  }
  fail_if(disk != 0 && disk != 0xffff, errc::corrupt, "multi-disk zip");
  return z;
}

// Reads the local header of `z`; returns where its file data starts.
uint64_t read_local(byte_view file, zip_entry const& z) {
  byte_reader l = reader_at(file, z.local_offset, 30);
  fail_if(l.le<uint32_t>() != sig_local, errc::corrupt, "bad zip local header");
  l.take(22);
  uint64_t const name_len = l.le<uint16_t>();
  uint64_t const extra_len = l.le<uint16_t>();
  uint64_t const data = z.local_offset + 30 + name_len + extra_len;
  fail_if(data > file.size() || z.compressed > file.size() - data,
          errc::corrupt, "zip entry data outside the file");
  return data;
}

// "<prefix>/data/<digits>" → digits, else empty.
std::string_view storage_key(std::string_view name) {
  auto const slash = name.rfind("/data/");
  if (slash == std::string_view::npos || slash == 0) return {};
  std::string_view const key = name.substr(slash + 6);
  if (key.empty()) return {};
  for (char c : key) {
    if (c < '0' || c > '9') return {};
  }
  return key;
}

std::string_view storage_prefix(std::string_view name) {
  return name.substr(0, name.rfind("/data/"));
}

}  // namespace

std::map<std::string, pickle_storage> scan_pickle_storages(byte_view pickle) {
  return pickle_scanner(pickle).run();
}

bool looks_like_zip(byte_view file) noexcept {
  return file.size() >= 4 && load_le<uint32_t>(file.data()) == sig_local;
}

parsed_file parse_pytorch_zip(byte_view file) {
  directory const dir = find_directory(file);
  byte_reader cd = reader_at(file, dir.offset, dir.size);
  std::vector<zip_entry> entries;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    entries.push_back(read_central(cd));
    entries.back().data_offset = read_local(file, entries.back());
  }

  // The pickle beside the storages: "<prefix>/data.pkl".
  zip_entry const* pickle = nullptr;
  for (zip_entry const& z : entries) {
    if (z.name.ends_with("/data.pkl") || z.name == "data.pkl") {
      pickle = &z;
      break;
    }
  }
  fail_if(pickle == nullptr, errc::corrupt, "zip has no data.pkl");
  std::string_view const prefix =
      std::string_view(pickle->name).substr(0, pickle->name.size() - 9);
  std::map<std::string, pickle_storage> storages;
  if (pickle->method == 0) {
    storages = scan_pickle_storages(
        file.subspan(pickle->data_offset, pickle->compressed));
  }

  std::vector<region> regions;
  for (zip_entry const& z : entries) {
    regions.push_back(parse_detail::opaque_region(
        z.local_offset, z.data_offset - z.local_offset,
        "zip local header: " + z.name));
    region r;
    r.offset = z.data_offset;
    r.length = z.compressed;
    r.name = z.name;
    std::string_view const key = storage_key(z.name);
    if (z.method == 0 && !key.empty() && z.compressed == z.uncompressed) {
      r.kind = region_kind::tensor;
      auto const it = storages.find(std::string(key));
      if (storage_prefix(z.name) == prefix && it != storages.end()) {
        // Trust the pickle's type only if its element count fits the bytes.
        uint64_t bytes = 0;
        if (!__builtin_mul_overflow(it->second.numel,
                                    dtype_width(it->second.type), &bytes) &&
            bytes == r.length) {
          r.type = it->second.type;
          // (The shape was checked against the element count when taken;
          // checked again here, as a region's shape must hold its bytes.)
          uint64_t elements = it->second.shape.empty() ? 0 : 1;
          for (uint64_t d : it->second.shape) {
            if (__builtin_mul_overflow(elements, d, &elements)) elements = 0;
          }
          if (elements == it->second.numel) r.shape = it->second.shape;
        }
      }
    }
    regions.push_back(std::move(r));
  }
  regions.push_back(parse_detail::opaque_region(dir.offset, dir.size,
                                                "zip central directory"));
  regions.push_back(
      parse_detail::opaque_region(dir.end_offset, file.size() - dir.end_offset,
                                  "zip end of central directory"));
  parsed_file out;
  out.format = file_format::pytorch_zip;
  out.regions = parse_detail::merge_opaque(
      parse_detail::fill_gaps(std::move(regions), file.size(), "zip padding"));
  return out;
}

}  // namespace brevis::codec
