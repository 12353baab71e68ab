//===- ProfileFuzzer.cpp - bytes -> pf::sched::parseProfile ---------------===//
//
// A profile that parses must serialise (profileToJson) into one that parses
// again to the same layers: the round trip CostModel.h promises.
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Schedule/CostModel.h"

namespace pf::fuzz {

int fuzzProfile(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  auto model = pf::sched::parseProfile(text, "fuzz.json");
  if (!model)
    return 0;
  auto again = pf::sched::parseProfile(pf::sched::profileToJson(*model), "round-trip.json");
  if (!again || again->layers.size() != model->layers.size())
    __builtin_trap(); // profileToJson wrote what parseProfile refuses
  return 0;
}

} // namespace pf::fuzz
