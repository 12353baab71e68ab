//===- OptionBinder.h - one options struct, several surfaces ----*- C++ -*-===//
//
// An options struct (TrainingOptions) declares its options once, in
//
//   template <typename Binder> void bindOptions(Binder &b) {
//     b.opt("kfac-damping", precondition.damping, "K-FAC damping");
//     b.opt("optimizer", optimizer.optimizer, "Update rule", optimizerValues());
//   }
//
// and a binder turns the calls into one surface's options: FlagBinder into a
// tool's llvm::cl flags (the struct's fields are their storage), and
// BoundPipelineOptions into the options of a registered pass pipeline
// (`pf-opt --pf-training="kfac-damping=..."`). Either way the field's value
// when bound is the default, and `--help` shows it.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_OPTIONBINDER_H
#define PF_TRANSFORMS_OPTIONBINDER_H

#include "pf/Transforms/OptionEnums.h"

#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace mlir::pf {

/// llvm::cl's double parser, refusing NaN and infinities: no floating-point
/// option of pf means anything with them (a NaN learning rate, mask share or
/// damping passes every range check and trains garbage).
class FiniteDoubleParser : public llvm::cl::parser<double> {
public:
  using llvm::cl::parser<double>::parser;
  bool parse(llvm::cl::Option &option, llvm::StringRef argName, llvm::StringRef arg,
             double &value) {
    if (llvm::cl::parser<double>::parse(option, argName, arg, value))
      return true;
    if (!std::isfinite(value))
      return option.error("'" + arg + "' is not a finite number");
    return false;
  }
};

namespace detail {
/// The llvm::cl parser of a bound field: FiniteDoubleParser for doubles.
template <typename T>
using BoundParser =
    std::conditional_t<std::is_same_v<T, double>, FiniteDoubleParser, llvm::cl::parser<T>>;

/// A default as it is spelled on the command line.
template <typename T>
std::string optionValueText(const llvm::cl::generic_parser_base *parser, const T &value) {
  if constexpr (std::is_enum_v<T>) {
    return choiceName(*parser, value).str();
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value.empty() ? "''" : value;
  } else {
    // Shortest text that reads back as the same number (1e-05, not 1.000000e-05).
    char buffer[32];
    auto end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
    return std::string(buffer, end);
  }
}

template <typename Opt>
const llvm::cl::generic_parser_base *enumParser(Opt &option) {
  if constexpr (std::is_base_of_v<llvm::cl::generic_parser_base,
                                  std::remove_reference_t<decltype(option.getParser())>>)
    return &option.getParser();
  else
    return nullptr;
}

/// Sets `option`'s help text to "<description> (default: <value>)", kept in
/// `storage` (llvm::cl keeps a StringRef).
template <typename Opt, typename T>
void describe(Opt &option, llvm::StringRef description, const T &value,
              std::deque<std::string> &storage) {
  storage.push_back((description + " (default: " +
                     optionValueText(enumParser(option), value) + ")")
                        .str());
  option.setDescription(storage.back());
}
} // namespace detail

/// Binds each field to a flag of the tool (`--name`), in `category`. The
/// binder must outlive the command-line parsing, the fields the flags' use.
class FlagBinder {
public:
  explicit FlagBinder(llvm::cl::OptionCategory &category) : category(category) {}

  template <typename T, typename... Mods>
  void opt(llvm::StringRef name, T &field, llvm::StringRef description, const Mods &...mods) {
    auto flag = std::make_unique<llvm::cl::opt<T, /*ExternalStorage=*/true,
                                               detail::BoundParser<T>>>(
        name, llvm::cl::location(field), llvm::cl::cat(category), mods...);
    detail::describe(*flag, description, field, descriptions);
    auto *bound = flag.get();
    texts[name] = [bound, &field] {
      return detail::optionValueText(detail::enumParser(*bound), field);
    };
    flags.push_back(std::move(flag));
  }

  /// The value of flag `name` as the command line spells it ("" if unbound).
  std::string valueText(llvm::StringRef name) const {
    auto it = texts.find(name);
    return it == texts.end() ? "" : it->second();
  }

  /// The bound flags given on the command line, as "--name".
  std::vector<std::string> given() const {
    std::vector<std::string> names;
    for (const auto &flag : flags)
      if (flag->getNumOccurrences() > 0)
        names.push_back(("--" + flag->ArgStr).str());
    return names;
  }

private:
  llvm::cl::OptionCategory &category;
  std::vector<std::unique_ptr<llvm::cl::Option>> flags;
  std::deque<std::string> descriptions;
  llvm::StringMap<std::function<std::string()>> texts;
};

/// The keys of a pass-options string ("a=1 b={x y} c='d e' f"), in order:
/// each whitespace-separated entry's text up to its '=' (quotes and braces
/// keep their spaces, as MLIR's parser reads them).
inline std::vector<std::string> optionKeys(llvm::StringRef spec) {
  std::vector<std::string> keys;
  size_t i = 0, n = spec.size();
  while (i < n) {
    while (i < n && llvm::isSpace(spec[i]))
      ++i;
    if (i >= n)
      break;
    size_t start = i, equals = llvm::StringRef::npos;
    int depth = 0;
    char quote = 0;
    for (; i < n && (depth > 0 || quote || !llvm::isSpace(spec[i])); ++i) {
      char c = spec[i];
      if (quote) {
        quote = c == quote ? 0 : quote;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        depth = std::max(depth - 1, 0);
      } else if (c == '=' && equals == llvm::StringRef::npos && depth == 0) {
        equals = i;
      }
    }
    keys.push_back(spec.slice(start, equals == llvm::StringRef::npos ? i : equals).str());
  }
  return keys;
}

/// The options of a registered pass pipeline, declared by
/// `Values::bindOptions`; `get()` returns them as a `Values`.
template <typename Values>
class BoundPipelineOptions : public PassPipelineOptions<BoundPipelineOptions<Values>> {
  using Base = PassPipelineOptions<BoundPipelineOptions<Values>>;
  template <typename T>
  using PipelineOption = std::conditional_t<
      std::is_same_v<T, double>, typename Base::template Option<double, FiniteDoubleParser>,
      typename Base::template Option<T>>;

  /// Declares one pipeline option per bound field, its default the field's.
  struct Declare {
    BoundPipelineOptions &self;
    template <typename T, typename... Mods>
    void opt(llvm::StringRef name, T &field, llvm::StringRef description, const Mods &...mods) {
      auto option = std::make_unique<PipelineOption<T>>(self, name, llvm::cl::init(field), mods...);
      detail::describe(*option, description, field, self.descriptions);
      self.options.push_back(std::move(option));
    }
  };
  /// Reads the options back in the order Declare made them.
  struct Read {
    const BoundPipelineOptions &self;
    size_t next = 0;
    template <typename T, typename... Mods>
    void opt(llvm::StringRef, T &field, llvm::StringRef, const Mods &...) {
      field = static_cast<const PipelineOption<T> &>(*self.options[next++]).getValue();
    }
  };

public:
  BoundPipelineOptions() {
    Values defaults;
    Declare declare{*this};
    defaults.bindOptions(declare);
  }

  Values get() const {
    Values values;
    Read read{*this};
    values.bindOptions(read);
    return values;
  }

  /// parseFromString, refusing a key given twice (the parser would keep the
  /// last and drop the first silently) and an entry whose key is no option
  /// of these ("=4" or "''=4", which the parser skips silently); given()
  /// then lists the keys.
  LogicalResult parseOnce(llvm::StringRef spec, llvm::raw_ostream &errors = llvm::errs()) {
    keys = optionKeys(spec);
    llvm::StringSet<> seen;
    for (const std::string &key : keys)
      if (key.empty()) {
        errors << "an entry names no option ('=' without a name before it)\n";
        return failure();
      } else if (!llvm::any_of(options, [&](const auto &o) { return o->ArgStr == key; })) {
        errors << "no such option '" << key << "'\n";
        return failure();
      } else if (!seen.insert(key).second) {
        errors << "'" << key << "' is given twice (one value per option)\n";
        return failure();
      }
    return this->parseFromString(spec, errors);
  }
  /// The keys of the string parseOnce read, in order.
  const std::vector<std::string> &given() const { return keys; }

private:
  std::vector<std::string> keys;
  std::vector<std::unique_ptr<llvm::cl::Option>> options;
  std::deque<std::string> descriptions;
};

} // namespace mlir::pf

#endif // PF_TRANSFORMS_OPTIONBINDER_H
