//===- Profile.cpp - Measured per-layer costs from JSON -------------------===//
//
// Format: docs/profile-format.md. Callers only ever see an Expected with a
// message naming the file, the layer and the key.
//
// nlohmann::json's templates are instantiated both here and in code built
// without exceptions (pf's default); the linker keeps one copy, which may be
// the one that aborts instead of throwing. So nothing here relies on the
// library throwing: the text is parsed with allow_exceptions = false (a SAX
// pass recovers the error position), every value's type is checked before it
// is read, and only this file's own ProfileError is thrown and caught inside
// parseProfile.
//
// Layer "costs" (docs/schedule.md): uses only CostModel.h.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/CostModel.h"
#include "pf/Schedule/Limits.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

using nlohmann::json;

namespace pf::sched {
namespace {

const std::set<std::string> kTopLevelKeys = {
    "name",  "source", "units", "comment", "p2p", "allreduce", "factor_allreduce",
    "defaults", "layers", "block", "link_gbs"};
const std::set<std::string> kBlockKeys = {"hidden", "heads", "seq_len", "micro_batch"};
const std::set<std::string> kLayerKeys = {
    "name",          "index",          "comment",         "forward",
    "backward",      "backward_input", "backward_weight", "curvature",
    "curvature_a",   "curvature_b",    "inversion",       "inversion_a",
    "inversion_b",   "precondition",   "allreduce",       "factor_allreduce",
    "activation_bytes", "parameters",  "kfac_linears"};
/// Layer keys of the memory model (docs/profile-format.md); not times.
const char *const kMemoryKeys[] = {"activation_bytes", "parameters", "kfac_linears"};

/// Thrown inside this file only; converted to an error message at the API.
struct ProfileError {
  std::string message;
};

[[noreturn]] void fail(const std::string &message) { throw ProfileError{message}; }

/// The member `key` of an object, or null (never throws).
const json *member(const json &object, const std::string &key) {
  if (!object.is_object())
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string stringMember(const json &object, const std::string &key,
                         const std::string &fallback) {
  const json *v = member(object, key);
  return v && v->is_string() ? v->get<std::string>() : fallback;
}

/// What a profile number is, for its messages: "a number of milliseconds"
/// with unit " ms", or "a number" without one; its limit and the limit's name.
struct NumberKind {
  const char *what, *unit;
  double limit;
  const char *limitName;
};
constexpr NumberKind kTime{"a number of milliseconds", " ms", kMaxProfileTimeMs,
                           "kMaxProfileTimeMs"};
constexpr NumberKind kQuantity{"a number", "", kMaxProfileQuantity, "kMaxProfileQuantity"};

/// Reads a non-negative, finite number no larger than the kind's limit.
double boundedValue(const json &value, const std::string &where, const std::string &key,
                    const NumberKind &kind) {
  if (!value.is_number())
    fail(where + ": '" + key + "' must be " + kind.what);
  double v = value.get<double>();
  if (!std::isfinite(v))
    fail(where + ": '" + key + "' is not finite");
  std::ostringstream os;
  if (v < 0)
    os << where << ": '" << key << "' is negative (" << v << kind.unit << ")";
  else if (v > kind.limit)
    os << where << ": '" << key << "' is " << v << kind.unit << ", over the limit of "
       << kind.limit << kind.unit << " (" << kind.limitName << ")";
  if (!os.str().empty())
    fail(os.str());
  return v;
}

/// Reads a non-negative, finite time in ms.
double timeValue(const json &value, const std::string &where, const std::string &key) {
  return boundedValue(value, where, key, kTime);
}

/// Reads a non-negative, finite count (bytes, parameters, a width).
double quantityValue(const json &value, const std::string &where, const std::string &key) {
  return boundedValue(value, where, key, kQuantity);
}

/// "kfac_linears": [[in, out], ...], the shapes of the layer's K-FAC linears.
std::vector<std::pair<double, double>> linearShapes(const json &value,
                                                    const std::string &where) {
  const std::string key = "kfac_linears";
  if (!value.is_array())
    fail(where + ": '" + key + "' must be an array of [in, out] pairs");
  std::vector<std::pair<double, double>> shapes;
  for (const json &shape : value) {
    if (!shape.is_array() || shape.size() != 2)
      fail(where + ": '" + key + "' must be an array of [in, out] pairs");
    shapes.emplace_back(quantityValue(shape[0], where, key),
                        quantityValue(shape[1], where, key));
  }
  return shapes;
}

void checkKeys(const json &object, const std::set<std::string> &allowed,
               const std::string &where, std::vector<std::string> &warnings);

/// "block": {"hidden", "heads", "seq_len", "micro_batch"}, positive integers.
BlockShape blockShape(const json &value, const std::string &source,
                      std::vector<std::string> &warnings) {
  const std::string where = source + ": 'block'";
  if (!value.is_object())
    fail(where + " must be an object with hidden, heads, seq_len, micro_batch");
  checkKeys(value, kBlockKeys, where, warnings);
  auto size = [&](const char *key) {
    const json *v = member(value, key);
    if (!v)
      fail(where + ": missing key '" + key + "'");
    if (!v->is_number_integer() || v->get<long long>() < 1 ||
        v->get<long long>() > (1 << 24))
      fail(where + ": '" + key + "' must be an integer from 1 to 16777216");
    return static_cast<int>(v->get<long long>());
  };
  return {size("hidden"), size("heads"), size("seq_len"), size("micro_batch")};
}

/// A layer entry merged over the profile's "defaults".
class LayerFields {
public:
  LayerFields(const json &layer, const json *defaults, std::string where)
      : layer_(layer), defaults_(defaults), where_(std::move(where)) {}

  const json *find(const std::string &key) const {
    if (const json *v = member(layer_, key))
      return v;
    return defaults_ ? member(*defaults_, key) : nullptr;
  }
  bool has(const std::string &key) const { return find(key) != nullptr; }
  double get(const std::string &key) const {
    const json *v = find(key);
    if (!v)
      fail(where_ + ": missing key '" + key + "'");
    return timeValue(*v, where_, key);
  }
  double getOr(const std::string &key, double fallback) const {
    return has(key) ? get(key) : fallback;
  }

  /// Reads a total and its optional two-way split ("backward" into
  /// "backward_input" + "backward_weight", ...). A missing split halves the
  /// total; a missing total is the sum of a complete split.
  std::pair<double, double> split(const std::string &total,
                                  const std::string &first,
                                  const std::string &second) const {
    bool hasTotal = has(total), hasFirst = has(first), hasSecond = has(second);
    if (!hasTotal && !(hasFirst && hasSecond))
      fail(where_ + ": missing key '" + total + "' (or both '" + first +
           "' and '" + second + "')");
    if (!hasFirst && !hasSecond) {
      double t = get(total);
      return {t / 2, t / 2};
    }
    if (hasFirst && hasSecond) {
      double a = get(first), b = get(second);
      if (hasTotal) {
        double t = get(total);
        if (std::fabs(a + b - t) > 1e-6 * std::max(1.0, t) + 1e-9) {
          std::ostringstream os;
          os << where_ << ": '" << first << "' + '" << second << "' = " << a + b
             << " ms but '" << total << "' = " << t << " ms";
          fail(os.str());
        }
      }
      return {a, b};
    }
    // One half given: the other is the rest of the total.
    double t = get(total);
    double known = get(hasFirst ? first : second);
    if (known > t + 1e-9)
      fail(where_ + ": '" + (hasFirst ? first : second) + "' exceeds '" +
           total + "'");
    double rest = std::max(0.0, t - known);
    return hasFirst ? std::make_pair(known, rest) : std::make_pair(rest, known);
  }

private:
  const json &layer_;
  const json *defaults_;
  std::string where_;
};

void checkKeys(const json &object, const std::set<std::string> &allowed,
               const std::string &where, std::vector<std::string> &warnings) {
  for (auto it = object.begin(); it != object.end(); ++it)
    if (!allowed.count(it.key()))
      warnings.push_back(where + ": unknown key '" + it.key() + "' ignored");
}

LayerCost parseLayer(const json &entry, const json *defaults, int position,
                     const std::string &source,
                     std::vector<std::string> &warnings) {
  std::string where = source + ": layer " + std::to_string(position);
  if (!entry.is_object())
    fail(where + ": must be an object");
  const std::string name = stringMember(entry, "name", "");
  if (!name.empty())
    where += " (" + name + ")";
  checkKeys(entry, kLayerKeys, where, warnings);
  LayerFields fields(entry, defaults, where);

  LayerCost layer;
  layer.name = name.empty() ? "layer" + std::to_string(position) : name;
  layer.forward = fields.get("forward");
  std::tie(layer.backwardInput, layer.backwardWeight) =
      fields.split("backward", "backward_input", "backward_weight");
  std::tie(layer.curvatureA, layer.curvatureB) =
      fields.split("curvature", "curvature_a", "curvature_b");
  std::tie(layer.inversionA, layer.inversionB) =
      fields.split("inversion", "inversion_a", "inversion_b");
  layer.precondition = fields.get("precondition");
  layer.allreduce = fields.getOr("allreduce", 0);
  layer.factorAllreduce = fields.getOr("factor_allreduce", 0);
  if (const json *v = fields.find("activation_bytes"))
    layer.memory.activationBytes = quantityValue(*v, where, "activation_bytes");
  if (const json *v = fields.find("parameters"))
    layer.memory.parameters = quantityValue(*v, where, "parameters");
  if (const json *v = fields.find("kfac_linears"))
    layer.memory.kfacLinears = linearShapes(*v, where);
  return layer;
}

/// Orders the entries by their "index" fields when present and reports gaps,
/// so that a profile with a layer left out is caught, not silently shifted.
std::vector<const json *> orderLayers(const json &layers,
                                      const std::string &source) {
  std::vector<const json *> entries;
  for (const json &entry : layers)
    entries.push_back(&entry);
  size_t withIndex = 0;
  for (const json *e : entries)
    if (member(*e, "index"))
      ++withIndex;
  if (withIndex == 0)
    return entries;
  if (withIndex != entries.size())
    fail(source + ": either every layer has an 'index' or none does");

  std::vector<const json *> ordered;
  for (const json *e : entries) {
    const json &idx = *member(*e, "index");
    if (!idx.is_number_integer() || idx.get<long long>() < 0)
      fail(source + ": layer 'index' must be a non-negative integer");
    long long i = idx.get<long long>();
    if (i >= static_cast<long long>(entries.size()) + 1024)
      fail(source + ": layer index " + std::to_string(i) + " is far beyond the " +
           std::to_string(entries.size()) + " layers listed");
    if (i >= static_cast<long long>(ordered.size()))
      ordered.resize(i + 1, nullptr);
    if (ordered[i])
      fail(source + ": layer index " + std::to_string(i) + " appears twice");
    ordered[i] = e;
  }
  for (size_t i = 0; i < ordered.size(); ++i)
    if (!ordered[i])
      fail(source + ": layer " + std::to_string(i) + " is missing (indices go "
           "up to " + std::to_string(ordered.size() - 1) + ")");
  return ordered;
}

/// Records the first syntax error of a SAX parse; accepts everything else.
class SyntaxErrorCollector : public nlohmann::json_sax<json> {
public:
  std::string message;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t &) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) override {
    message = e.what();
    return false;
  }
};

json parseJson(const std::string &text, const std::string &source) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded())
    return doc;
  SyntaxErrorCollector collector;
  json::sax_parse(text, &collector);
  fail(source + ": not valid JSON: " + collector.message);
}

CostModel parseProfileOrThrow(const std::string &text,
                              const std::string &source) {
  json doc = parseJson(text, source);
  if (!doc.is_object())
    fail(source + ": the profile must be a JSON object");

  CostModel model;
  checkKeys(doc, kTopLevelKeys, source, model.warnings);
  model.name = stringMember(doc, "name", source);
  if (const json *units = member(doc, "units"))
    if (!units->is_string() || units->get<std::string>() != "ms")
      fail(source + ": 'units' must be \"ms\"");
  for (const char *key : {"p2p", "allreduce"})
    if (!member(doc, key))
      fail(source + ": missing key '" + key +
           "' (communication cost in ms; 0 when not modelled)");
  model.p2p = timeValue(*member(doc, "p2p"), source, "p2p");
  double allreduce = timeValue(*member(doc, "allreduce"), source, "allreduce");
  const json *factor = member(doc, "factor_allreduce");
  double factorAllreduce =
      factor ? timeValue(*factor, source, "factor_allreduce") : 0.0;

  if (const json *block = member(doc, "block"))
    model.block = blockShape(*block, source, model.warnings);
  if (const json *link = member(doc, "link_gbs"))
    model.linkGBs = quantityValue(*link, source, "link_gbs");

  const json *defaults = member(doc, "defaults");
  if (defaults) {
    if (!defaults->is_object())
      fail(source + ": 'defaults' must be an object");
    checkKeys(*defaults, kLayerKeys, source + ": defaults", model.warnings);
  }
  const json *layers = member(doc, "layers");
  if (!layers || !layers->is_array())
    fail(source + ": missing key 'layers' (an array of per-layer times)");
  if (layers->empty())
    fail(source + ": 'layers' is empty");
  if (layers->size() > static_cast<size_t>(kMaxLayers))
    fail(source + ": " + std::to_string(layers->size()) + " layers exceed the limit of " +
         std::to_string(kMaxLayers) + " (kMaxLayers)");

  std::vector<const json *> entries = orderLayers(*layers, source);
  auto givenFor = [&](const json &entry, const char *key) {
    return member(entry, key) || (defaults && member(*defaults, key));
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    LayerCost layer = parseLayer(*entries[i], defaults, static_cast<int>(i),
                                 source, model.warnings);
    // Top-level communication costs apply to layers that do not set their own.
    if (!givenFor(*entries[i], "allreduce"))
      layer.allreduce = allreduce;
    if (!givenFor(*entries[i], "factor_allreduce"))
      layer.factorAllreduce = factorAllreduce;
    for (const char *key : kMemoryKeys)
      model.hasMemory |= givenFor(*entries[i], key);
    model.layers.push_back(std::move(layer));
  }
  return model;
}

} // namespace

Expected<CostModel> parseProfile(const std::string &jsonText,
                                 const std::string &source) {
  try {
    return parseProfileOrThrow(jsonText, source);
  } catch (const ProfileError &e) {
    return Status::error(e.message);
  } catch (const std::exception &e) {
    return Status::error(source + ": " + e.what());
  }
}

Expected<CostModel> loadProfile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open the profile");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parseProfile(buffer.str(), path);
}

std::string profileToJson(const CostModel &model) {
  try {
    json doc;
    doc["name"] = model.name;
    doc["units"] = "ms";
    doc["p2p"] = model.p2p;
    doc["allreduce"] = model.layers.empty() ? 0.0 : model.layers[0].allreduce;
    if (model.block.known() && !model.block.split)
      doc["block"] = {{"hidden", model.block.hidden},
                      {"heads", model.block.heads},
                      {"seq_len", model.block.seqLen},
                      {"micro_batch", model.block.microBatch}};
    if (model.linkGBs > 0)
      doc["link_gbs"] = model.linkGBs;
    json layers = json::array();
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const LayerCost &l = model.layers[i];
      layers.push_back({{"name", l.name},
                        {"index", i},
                        {"forward", l.forward},
                        {"backward_input", l.backwardInput},
                        {"backward_weight", l.backwardWeight},
                        {"curvature_a", l.curvatureA},
                        {"curvature_b", l.curvatureB},
                        {"inversion_a", l.inversionA},
                        {"inversion_b", l.inversionB},
                        {"precondition", l.precondition},
                        {"allreduce", l.allreduce},
                        {"factor_allreduce", l.factorAllreduce}});
      if (model.hasMemory) {
        json shapes = json::array();
        for (const auto &[in, out] : l.memory.kfacLinears)
          shapes.push_back({in, out});
        layers.back()["activation_bytes"] = l.memory.activationBytes;
        layers.back()["parameters"] = l.memory.parameters;
        layers.back()["kfac_linears"] = std::move(shapes);
      }
    }
    doc["layers"] = std::move(layers);
    return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  } catch (const std::exception &e) {
    return std::string("{\"error\": \"") + e.what() + "\"}\n";
  }
}

} // namespace pf::sched
