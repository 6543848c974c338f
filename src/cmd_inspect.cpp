// `brevis inspect FILE.brv`: one row per region with its program and sizes;
// reads only the index (no payload is decoded).

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "codec/core/error.h"
#include "codec/dsl/program.h"
#include "src/archive_io.h"
#include "src/commands.h"
#include "src/input.h"
#include "src/report.h"

namespace brevis::cli {
namespace {

std::string shape_text(std::vector<uint64_t> const& shape) {
  if (shape.empty()) return "-";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string ratio_text(uint64_t in, uint64_t out) {
  if (out == 0) return in == 0 ? "-" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f",
                static_cast<double>(in) / static_cast<double>(out));
  return buf;
}

struct row {
  std::string name, type, shape, in, out, ratio, program;
  // How the program was chosen (archives with choice records): estimated
  // bytes, search expansions, milliseconds.
  std::string est, exp, ms;
};

void print_table(std::vector<row> const& rows, bool choices) {
  size_t w[9] = {};
  for (row const& r : rows) {
    std::string const* cols[9] = {&r.name,  &r.type, &r.shape, &r.in, &r.out,
                                  &r.ratio, &r.est,  &r.exp,   &r.ms};
    for (int c = 0; c < 9; ++c) w[c] = std::max(w[c], cols[c]->size());
  }
  w[0] = std::min<size_t>(w[0], 60);  // long names push the row, not the table
  for (row const& r : rows) {
    std::printf("%-*s  %-*s  %-*s  %*s  %*s  %*s  ", int(w[0]), r.name.c_str(),
                int(w[1]), r.type.c_str(), int(w[2]), r.shape.c_str(),
                int(w[3]), r.in.c_str(), int(w[4]), r.out.c_str(), int(w[5]),
                r.ratio.c_str());
    if (choices) {
      std::printf("%*s  %*s  %*s  ", int(w[6]), r.est.c_str(), int(w[7]),
                  r.exp.c_str(), int(w[8]), r.ms.c_str());
    }
    std::printf("%s\n", r.program.c_str());
  }
}

void inspect_one(inspect_options const& opt, std::string const& path) {
  input in = load_input(path);
  codec::archive_reader reader = open_archive(in);
  auto const regions = reader.regions();
  auto const programs = reader.programs();
  auto const chunks = reader.chunks();

  std::vector<uint64_t> out_bytes(regions.size(), 0);
  uint64_t payload = 0, refs = 0, fallbacks = 0;
  for (auto const& c : chunks) {
    if (c.region < regions.size()) {
      out_bytes[c.region] += c.payload_length;
      if (!c.is_ref && c.program != regions[c.region].program) ++fallbacks;
    }
    payload += c.payload_length;
    refs += c.is_ref ? 1 : 0;
  }

  std::vector<row> rows;
  rows.push_back({"region", "dtype", "shape", "bytes in", "bytes out", "ratio",
                  "program", "estimated", "expansions", "ms"});
  bool choices = false;
  for (size_t r = 0; r < regions.size(); ++r) {
    auto const& e = regions[r];
    std::string name = e.info.name.empty() ? "(unnamed)" : e.info.name;
    if (e.info.kind == codec::region_kind::opaque) name = "[" + name + "]";
    std::string program = e.program < programs.size()
                              ? codec::program_text(programs[e.program])
                              : "?";
    rows.push_back(
        {name, codec::dtype_name(e.info.type), shape_text(e.info.shape),
         std::to_string(e.info.length), std::to_string(out_bytes[r]),
         ratio_text(e.info.length, out_bytes[r]), program, "", "", ""});
    if (e.how) {
      choices = true;
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.2f", e.how->ms);
      rows.back().est =
          std::to_string(static_cast<uint64_t>(e.how->estimated_bytes));
      rows.back().exp = std::to_string(e.how->expansions);
      rows.back().ms = ms;
    }
  }
  uint64_t const archive_size = in.data().size();
  rows.push_back(
      {"total", "", std::to_string(regions.size()) + " regions",
       std::to_string(reader.original_size()), std::to_string(archive_size),
       ratio_text(reader.original_size(), archive_size), "", "", "", ""});

  if (opt.inputs.size() > 1) std::printf("%s:\n", path.c_str());
  print_table(rows, choices);
  std::printf(
      "archive: %llu bytes (payload %llu, header+index %llu); %zu chunks of "
      "up to %u bytes (%llu repeated, %llu fallback); %zu programs\n",
      static_cast<unsigned long long>(archive_size),
      static_cast<unsigned long long>(payload),
      static_cast<unsigned long long>(archive_size -
                                      std::min(payload, archive_size)),
      chunks.size(), reader.chunk_size(), static_cast<unsigned long long>(refs),
      static_cast<unsigned long long>(fallbacks), programs.size());

  if (opt.range) {
    auto const [offset, length] = *opt.range;
    uint64_t const size = reader.original_size();
    if (offset > size || length > size - offset) {
      codec::fail(codec::errc::io, "range " + std::to_string(offset) + ":" +
                                       std::to_string(length) +
                                       " is beyond the end of the file (" +
                                       std::to_string(size) + " bytes)");
    }
    auto const [first, last] = reader.chunks_covering(offset, length);
    uint64_t need = 0;
    for (size_t i = first; i < last && i < chunks.size(); ++i) {
      need += chunks[i].payload_length;
    }
    std::printf(
        "range %llu:%llu needs %zu chunk%s (%zu..%zu), %llu payload "
        "bytes\n",
        static_cast<unsigned long long>(offset),
        static_cast<unsigned long long>(length), last - first,
        last - first == 1 ? "" : "s", first, last > first ? last - 1 : first,
        static_cast<unsigned long long>(need));
  }
  std::fflush(stdout);
}

}  // namespace

int run_inspect(inspect_options const& opt) {
  return for_each_input(
      opt.inputs, [&](std::string const& path) { inspect_one(opt, path); });
}

}  // namespace brevis::cli
