//===- PipelineOptionsFuzzer.cpp - the --pipeline "..." option string -----===//
//
// pf-train --pipeline and pf-run --pipeline read their option string with
// BoundPipelineOptions<PipelineRunOptions>::parseOnce
// (include/pf/Transforms/OptionBinder.h: the keys split out, a key given
// twice refused, then MLIR's pass-option parser, parseFromString, with
// llvm::cl's value parsers) and check the values with
// checkPipelineRunOptions: the input bytes are that string. It may be
// refused; it must never crash. A string that parses must
//   - name an option with every key parseOnce saw (given()): what
//     checkPipelineRunOptions decides from, so a key it did not see as MLIR
//     did, or an entry that names no option and is skipped, would let an
//     option through unchecked;
//   - print (MLIR's PassOptions::print, how pass pipelines are written back,
//     e.g. in crash reproducers) into a string that parses again, and
//     printing that gives the same text: the values survive the round trip
//     (a double to the 7 significant digits llvm's printing keeps).
//
// llvm::cl reports a bad value on llvm::errs() whatever stream the caller
// gives, so stderr is silenced around the parsing (QuietStderr) unless
// PF_FUZZ_VERBOSE=1.
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Transforms/OptionBinder.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

namespace pf::fuzz {
namespace {
using Options = mlir::pf::BoundPipelineOptions<mlir::pf::PipelineRunOptions>;

/// The option names PipelineRunOptions declares.
struct OptionNames {
  llvm::StringSet<> names;
  template <typename T, typename... Mods>
  void opt(llvm::StringRef name, T &, llvm::StringRef, const Mods &...) {
    names.insert(name);
  }
};

const llvm::StringSet<> &optionNames() {
  static const OptionNames *names = [] {
    auto *collect = new OptionNames;
    mlir::pf::PipelineRunOptions defaults;
    defaults.bindOptions(*collect);
    return collect;
  }();
  return names->names;
}

/// Parses `spec` into `options`; false when it is refused.
bool parse(llvm::StringRef spec, Options &options) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  bool ok;
  {
    QuietStderr quiet;
    ok = succeeded(options.parseOnce(spec, os));
  }
  if (!ok && verbose()) // llvm::cl's own messages went to stderr above
    llvm::errs() << "refused" << (errors.empty() ? "\n" : ": " + errors);
  return ok;
}

/// The options as MLIR prints them, without the enclosing braces (the form
/// parseFromString reads).
std::string printed(const Options &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  options.print(os);
  llvm::StringRef body = text;
  if (body.starts_with("{") && body.ends_with("}"))
    body = body.drop_front().drop_back();
  return body.str();
}
} // namespace

int fuzzPipelineOptions(const uint8_t *data, size_t size) {
  // A command-line argument holds no NUL; neither does a string of them.
  llvm::StringRef spec(reinterpret_cast<const char *>(data), size);
  spec = spec.take_until([](char c) { return c == '\0'; });
  Options options;
  if (!parse(spec, options))
    return 0;
  for (const std::string &key : options.given())
    if (!optionNames().contains(key)) {
      if (verbose())
        llvm::errs() << "accepted, with the key '" << key << "' that names no option\n";
      __builtin_trap(); // an entry MLIR skipped or read otherwise: unchecked
    }
  // What pf-train and pf-run do next.
  std::string error = mlir::pf::checkPipelineRunOptions(options.get(), options.given());
  if (verbose())
    llvm::errs() << (error.empty() ? std::string("checked") : "refused by the check: " + error)
                 << "\n";
  std::string first = printed(options);
  Options again;
  if (!parse(first, again)) {
    if (verbose())
      llvm::errs() << "printed as '" << first << "', which is refused\n";
    __builtin_trap(); // print wrote what parseFromString refuses
  }
  std::string second = printed(again);
  if (second != first) {
    if (verbose())
      llvm::errs() << "printed '" << first << "', read back and printed '" << second << "'\n";
    __builtin_trap(); // a value changed on the way
  }
  if (verbose())
    llvm::errs() << "parsed: " << first << "\n";
  return 0;
}

} // namespace pf::fuzz
