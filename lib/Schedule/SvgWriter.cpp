//===- SvgWriter.cpp - Timeline picture in the style of the paper ---------===//
//
// One row per device: a compute lane (idle time shows as the grey row
// background) and a thin communication lane under it. K-FAC work placed after
// a flush has a black outline; inversion pieces that belong to the previous
// refresh (steady-state overlap) a dashed one. Dashed vertical lines separate
// the steps of the refresh window.
//
// Layer "results" (docs/schedule.md): reads a timeline and its report.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

namespace pf::sched {
namespace {

struct Category {
  const char *label;
  const char *colour;
};

/// Legend order and colours (forward blue, backward orange, curvature green,
/// inversion purple, preconditioning red, communication grey, idle light).
const Category kForward{"forward", "#4e79a7"};
const Category kBackward{"backward", "#f28e2b"};
const Category kBackwardWeight{"backward (weight)", "#ffbe7d"};
const Category kCurvatureA{"curvature A", "#59a14f"};
const Category kCurvatureB{"curvature B", "#8cd17d"};
const Category kInversionA{"inversion A", "#b07aa1"};
const Category kInversionB{"inversion B", "#d4a6c8"};
const Category kPrecondition{"precondition", "#e15759"};
const Category kComm{"communication", "#8c8c8c"};
const Category kIdle{"idle", "#e8e8e8"};
// Measured timelines only (in the legend when present).
const Category kInversion{"inversion", "#b07aa1"};
const Category kUpdate{"update", "#76b7b2"};
const Category kOther{"other", "#9c755f"};
const Category kAccumulate{"accumulate", "#bab0ac"};

const Category &categoryOf(ItemKind kind) {
  switch (kind) {
  case ItemKind::Forward:
    return kForward;
  case ItemKind::Backward:
  case ItemKind::BackwardInput:
    return kBackward;
  case ItemKind::BackwardWeight:
    return kBackwardWeight;
  case ItemKind::CurvatureA:
    return kCurvatureA;
  case ItemKind::CurvatureB:
    return kCurvatureB;
  case ItemKind::InversionA:
    return kInversionA;
  case ItemKind::InversionB:
    return kInversionB;
  case ItemKind::Precondition:
    return kPrecondition;
  case ItemKind::Inversion:
    return kInversion;
  case ItemKind::Update:
    return kUpdate;
  case ItemKind::Other:
    return kOther;
  case ItemKind::Accumulate:
    return kAccumulate;
  default:
    return kComm;
  }
}

std::string escapeXml(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    default: out += c;
    }
  }
  return out;
}

/// A round tick spacing giving about `target` ticks over `span`.
double tickSpacing(double span, int target) {
  double raw = span / target;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (raw <= f * magnitude)
      return f * magnitude;
  return 10 * magnitude;
}

class SvgBuilder {
public:
  SvgBuilder(const Timeline &tl, const Report &r) : tl_(tl), r_(r) {
    // Wide enough for the longest row label (about 6.5 px a character).
    for (const std::string &label : tl.rowLabels)
      left_ = std::max(left_, 16 + 6.5 * double(label.size()));
    window_ = tl.windowTime() > 0 ? tl.windowTime() : 1;
    scale_ = kPlotWidth / window_;
    height_ = kTop + tl.devices * kRowPitch + kAxis;
  }

  std::string build() {
    os_.precision(6);
    os_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\""
        << left_ + kPlotWidth + kRight << "\" height=\"" << height_
        << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
    os_ << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    title();
    legend();
    rows();
    items();
    steps();
    axis();
    os_ << "</svg>\n";
    return os_.str();
  }

private:
  static constexpr double kRight = 20, kPlotWidth = 1400;
  static constexpr double kTop = 58, kLane = 16, kCommLane = 5, kRowPitch = 26;
  static constexpr double kAxis = 34;

  double x(double t) const { return left_ + t * scale_; }
  double rowY(int device) const { return kTop + device * kRowPitch; }

  void title() {
    if (!r_.title.empty()) {
      os_ << "<text x=\"" << left_ << "\" y=\"16\" font-size=\"13\">"
          << escapeXml(r_.title) << "</text>\n";
      return;
    }
    char refresh[96];
    if (r_.staggered)
      std::snprintf(refresh, sizeof refresh, "staggered refresh, period %d, mean K=%.2f",
                    r_.refreshSteps, r_.meanRefreshInterval);
    else
      std::snprintf(refresh, sizeof refresh, "K=%d", r_.refreshSteps);
    char buffer[320];
    std::snprintf(buffer, sizeof buffer,
                  "%s, D=%d, N=%d, policy %s: %s, step %.1f ms, utilization "
                  "%.1f%% -> %.1f%%",
                  r_.schedule.c_str(), r_.devices, r_.microbatches, r_.policy.c_str(), refresh,
                  r_.stepTimeMs, 100 * r_.utilizationWithoutKfac, 100 * r_.utilizationWithKfac);
    os_ << "<text x=\"" << left_ << "\" y=\"16\" font-size=\"13\">" << buffer
        << "</text>\n";
  }

  void legend() {
    std::vector<const Category *> shown = {
        &kForward,    &kBackward,    &kBackwardWeight, &kCurvatureA, &kCurvatureB,
        &kInversionA, &kInversionB, &kPrecondition,   &kComm,       &kIdle};
    bool present[4] = {false, false, false, false};
    tl_.forEachItem([&](const TimelineItem &it) {
      present[0] |= it.kind == ItemKind::Inversion;
      present[1] |= it.kind == ItemKind::Update;
      present[2] |= it.kind == ItemKind::Accumulate;
      present[3] |= it.kind == ItemKind::Other;
    });
    const Category *extra[4] = {&kInversion, &kUpdate, &kAccumulate, &kOther};
    for (int i = 0; i < 4; ++i)
      if (present[i])
        shown.insert(shown.end() - 2, extra[i]);
    double lx = left_;
    for (const Category *c : shown) {
      os_ << "<rect x=\"" << lx << "\" y=\"26\" width=\"12\" height=\"12\" fill=\""
          << c->colour << "\" stroke=\"#555\" stroke-width=\"0.5\"/>"
          << "<text x=\"" << lx + 16 << "\" y=\"36\">" << c->label << "</text>\n";
      lx += 24 + 6.5 * std::string(c->label).size();
    }
    os_ << "<text x=\"" << lx << "\" y=\"36\" fill=\"#444\">outline: after a "
        << "flush; dashed: previous refresh</text>\n";
  }

  void rows() {
    for (int d = 0; d < tl_.devices; ++d) {
      std::string label = size_t(d) < tl_.rowLabels.size() ? escapeXml(tl_.rowLabels[d])
                                                            : "GPU " + std::to_string(d);
      os_ << "<text x=\"" << left_ - 8 << "\" y=\"" << rowY(d) + 12
          << "\" text-anchor=\"end\">" << label << "</text>"
          << "<rect x=\"" << left_ << "\" y=\"" << rowY(d) << "\" width=\""
          << kPlotWidth << "\" height=\"" << kLane << "\" fill=\""
          << kIdle.colour << "\"/>\n";
    }
  }

  void items() {
    const bool tooltips = tl_.numItems() < 20000;
    tl_.forEachItem([&](const TimelineItem &it) {
      const bool comm = it.lane == Lane::Comm;
      double y = rowY(it.device) + (comm ? kLane + 1 : 0);
      double h = comm ? kCommLane : kLane;
      double w = std::max(it.duration() * scale_, 0.3);
      os_ << "<rect x=\"" << x(it.start) << "\" y=\"" << y << "\" width=\"" << w
          << "\" height=\"" << h << "\" fill=\"" << categoryOf(it.kind).colour
          << "\"";
      if (it.refreshLag > 0)
        os_ << " stroke=\"black\" stroke-width=\"0.8\" stroke-dasharray=\"2,1\"";
      else if (it.outsideBubble)
        os_ << " stroke=\"black\" stroke-width=\"0.8\"";
      os_ << ">";
      if (tooltips)
        os_ << "<title>" << itemKindName(it.kind) << " stage " << it.stage << " micro " << it.micro
            << " layer " << it.layer;
      if (tooltips && r_.staggered && isKfac(it.kind))
        os_ << " refresh " << it.refresh; // which of the layer's refreshes
      if (tooltips)
        os_ << " step " << it.step << ": " << it.start << "-" << it.end << " ms</title>";
      os_ << "</rect>\n";
    });
  }

  void steps() {
    for (size_t k = 0; k < tl_.stepStart.size(); ++k) {
      double sx = x(tl_.stepStart[k]);
      os_ << "<line x1=\"" << sx << "\" y1=\"" << kTop - 6 << "\" x2=\"" << sx
          << "\" y2=\"" << kTop + tl_.devices * kRowPitch
          << "\" stroke=\"#333\" stroke-dasharray=\"4,3\"/>"
          << "<text x=\"" << sx + 3 << "\" y=\"" << kTop - 8
          << "\" fill=\"#333\">step " << k << "</text>\n";
    }
  }

  void axis() {
    double y = kTop + tl_.devices * kRowPitch + 4;
    double tick = tickSpacing(window_, 10);
    os_ << "<line x1=\"" << left_ << "\" y1=\"" << y << "\" x2=\""
        << left_ + kPlotWidth << "\" y2=\"" << y << "\" stroke=\"black\"/>\n";
    for (double t = 0; t <= window_ + 1e-9; t += tick)
      os_ << "<line x1=\"" << x(t) << "\" y1=\"" << y << "\" x2=\"" << x(t)
          << "\" y2=\"" << y + 4 << "\" stroke=\"black\"/><text x=\"" << x(t)
          << "\" y=\"" << y + 16 << "\" text-anchor=\"middle\">" << t
          << "</text>\n";
    os_ << "<text x=\"" << left_ + kPlotWidth << "\" y=\"" << y + 28
        << "\" text-anchor=\"end\">time (ms)</text>\n";
  }

  const Timeline &tl_;
  const Report &r_;
  double left_ = 70, window_ = 1, scale_ = 1, height_ = 0;
  std::ostringstream os_;
};

} // namespace

std::string timelineToSvg(const Timeline &timeline, const Report &report) {
  return SvgBuilder(timeline, report).build();
}

} // namespace pf::sched
