//===- TraceWriter.cpp - Chrome trace / Perfetto JSON of a timeline -------===//
//
// Written by hand rather than through a JSON library: a window of a large
// pipeline has hundreds of thousands of events and this stays linear and
// allocation-light. Every device is a thread (compute) plus a second thread
// for its communication; times are microseconds as the format requires.
//
// Layer "results" (docs/schedule.md): reads a timeline and its report.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Report.h"

#include <cstdio>
#include <sstream>

namespace pf::sched {
namespace {

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out;
}

std::string label(const TimelineItem &it) {
  std::ostringstream os;
  os << itemKindName(it.kind);
  if (it.layer >= 0)
    os << " L" << it.layer;
  else if (it.stage >= 0)
    os << " S" << it.stage;
  if (it.micro >= 0)
    os << " m" << it.micro;
  return os.str();
}

void metadata(std::ostringstream &os, const char *name, int tid,
              const std::string &value, bool &first) {
  os << (first ? "" : ",\n") << "{\"name\":\"" << name
     << "\",\"ph\":\"M\",\"pid\":0,\"tid\":" << tid
     << ",\"args\":{\"name\":\"" << escape(value) << "\"}}";
  first = false;
}

} // namespace

std::string timelineToChromeTrace(const Timeline &timeline,
                                  const Report &report) {
  std::ostringstream os;
  os.precision(12);
  os << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"schedule\":\"" << escape(report.schedule)
     << "\",\"policy\":\"" << escape(report.policy)
     << "\",\"refresh_steps\":" << report.refreshSteps << ",\"cost_model\":\""
     << escape(report.costModel)
     << "\",\"refresh_staggered\":" << (report.staggered ? "true" : "false")
     << ",\"mean_refresh_interval\":" << report.meanRefreshInterval << "},\n\"traceEvents\":[\n";
  bool first = true;
  metadata(os, "process_name", 0,
           report.title.empty()
               ? "pf-sched " + report.schedule + " / " + report.policy
               : report.title,
           first);
  for (int d = 0; d < timeline.devices; ++d) {
    metadata(os, "thread_name", 2 * d, "device " + std::to_string(d), first);
    metadata(os, "thread_name", 2 * d + 1,
             "device " + std::to_string(d) + " comm", first);
  }
  for (size_t k = 0; k < timeline.stepStart.size(); ++k)
    os << ",\n{\"name\":\"step " << k << "\",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,"
       << "\"tid\":0,\"ts\":" << timeline.stepStart[k] * 1e3 << "}";
  timeline.forEachItem([&](const TimelineItem &it) {
    int tid = 2 * it.device + (it.lane == Lane::Comm ? 1 : 0);
    os << ",\n{\"name\":\"" << label(it) << "\",\"cat\":\"" << itemKindName(it.kind)
       << "\",\"ph\":\"X\",\"pid\":0,\"tid\":" << tid << ",\"ts\":" << it.start * 1e3
       << ",\"dur\":" << it.duration() * 1e3 << ",\"args\":{\"step\":" << it.step
       << ",\"stage\":" << it.stage << ",\"micro\":" << it.micro << ",\"layer\":" << it.layer
       << ",\"pipe\":" << it.pipe << ",\"piece\":" << it.piece
       << ",\"outside_bubble\":" << (it.outsideBubble ? "true" : "false")
       << ",\"refresh_lag\":" << it.refreshLag << ",\"refresh\":" << it.refresh << "}}";
  });
  os << "\n]}\n";
  return os.str();
}

} // namespace pf::sched
