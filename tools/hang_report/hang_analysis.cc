#include "tools/hang_report/hang_analysis.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "core/base/errors.h"
#include "core/base/json.h"
#include "core/base/status_macros.h"

namespace weft::hang {
namespace {

std::string Str(const JsonValue& o, const char* key) {
  const JsonValue* v = o.Find(key);
  return v != nullptr && v->is_string() ? v->string : "";
}

int64_t Int(const JsonValue& o, const char* key) {
  const JsonValue* v = o.Find(key);
  if (v == nullptr || !v->is_number()) return 0;
  return v->AsInt64().value_or(static_cast<int64_t>(v->number));
}

std::string Clock(int64_t us) {
  if (us <= 0) return "?";
  return absl::FormatTime("%H:%M:%E3S UTC", absl::FromUnixMicros(us), absl::UTCTimeZone());
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

std::string GroupName(const DumpedOp& op) {
  return absl::StrCat("'", op.group, "' (", RankList(op.ranks), ")");
}

std::string OpName(const DumpedOp& op) { return absl::StrCat(op.op, " #", op.seq); }

// How long the others must have waited on an op before a rank that never
// issued it, or an op no rank finished, counts as a divergence.
constexpr int64_t kPendingUs = 1000000;

// A group as every rank sees it: its name and members.
using GroupKey = std::pair<std::string, std::vector<int>>;

struct GroupView {
  // rank -> seq -> op (collectives only).
  std::map<int, std::map<int64_t, const DumpedOp*>> ops;
};

// The last op a rank recorded, as "all_reduce #7 on group 'tp' (ranks 0, 1), started".
std::string LastOp(const RankDump& d) {
  if (d.ops.empty()) return "none recorded";
  const DumpedOp& op = d.ops.back();
  return absl::StrCat(OpName(op), " on group ", GroupName(op), ", ", op.state);
}

}  // namespace

absl::StatusOr<RankDump> ParseDump(const std::string& text, const std::string& what) {
  WEFT_ASSIGN_OR_RETURN(JsonValue j, ParseJson(text, {.what = what}));
  if (!j.is_object() || j.Find("weft_flight_recorder") == nullptr) {
    return InvalidArgument(absl::StrCat(what, " is not a flight recorder dump"),
                           "a rank_<r>.json a weft rank wrote", "");
  }
  RankDump d;
  d.rank = static_cast<int>(Int(j, "rank"));
  d.world_size = static_cast<int>(Int(j, "world_size"));
  d.reason = Str(j, "reason");
  d.host = Str(j, "host");
  d.dumped_us = Int(j, "dumped_us");
  const JsonValue* entries = j.Find("entries");
  if (entries == nullptr || !entries->is_array()) {
    return InvalidArgument(absl::StrCat(what, " has no entries array"), "\"entries\": [...]");
  }
  for (const JsonValue& e : entries->array) {
    DumpedOp op;
    op.group = Str(e, "group");
    if (const JsonValue* r = e.Find("ranks"); r != nullptr && r->is_array()) {
      for (const JsonValue& x : r->array) op.ranks.push_back(static_cast<int>(x.number));
    }
    op.seq = Int(e, "seq");
    const JsonValue* p2p = e.Find("point_to_point");
    op.point_to_point = p2p != nullptr && p2p->boolean;
    op.op = Str(e, "op");
    op.detail = Str(e, "detail");
    op.fingerprint = Str(e, "fingerprint");
    op.state = Str(e, "state");
    op.issued_us = Int(e, "issued_us");
    op.started_us = Int(e, "started_us");
    op.ended_us = Int(e, "ended_us");
    d.ops.push_back(std::move(op));
  }
  return d;
}

absl::StatusOr<std::vector<RankDump>> ReadDumps(const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    return NotFound(absl::StrCat("cannot read ", dir, ": ", ec.message()),
                    "the directory the ranks wrote their flight recorder dumps to",
                    "the trainer prints it when it dumps (--flight_dir)");
  }
  std::vector<RankDump> dumps;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    absl::string_view n = name;
    int rank;
    if (!absl::ConsumePrefix(&n, "rank_") || !absl::ConsumeSuffix(&n, ".json") ||
        !absl::SimpleAtoi(n, &rank)) {
      continue;
    }
    std::ifstream f(entry.path());
    std::stringstream text;
    text << f.rdbuf();
    WEFT_ASSIGN_OR_RETURN(RankDump d, ParseDump(text.str(), entry.path().string()));
    dumps.push_back(std::move(d));
  }
  if (dumps.empty()) {
    return NotFound(absl::StrCat("no rank_<r>.json in ", dir), "every rank's flight recorder dump",
                    "ranks dump on a failure, on SIGTERM and on SIGUSR2 (kill -USR2 PID)");
  }
  std::sort(dumps.begin(), dumps.end(),
            [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  return dumps;
}

Report Analyze(const std::vector<RankDump>& dumps) {
  Report report;
  std::map<int, const RankDump*> by_rank;
  int world = 0;
  for (const RankDump& d : dumps) {
    by_rank[d.rank] = &d;
    world = std::max({world, d.world_size, d.rank + 1});
  }
  for (int r = 0; r < world; ++r) {
    if (by_rank.count(r) == 0) report.missing.push_back(r);
  }
  std::map<GroupKey, GroupView> groups;
  for (const RankDump& d : dumps) {
    for (const DumpedOp& op : d.ops) {
      if (op.point_to_point) continue;
      groups[{op.group, op.ranks}].ops[d.rank][op.seq] = &op;
    }
  }
  for (const auto& [key, view] : groups) {
    const std::vector<int>& members = key.second;
    std::vector<int> dumped, undumped;
    for (int m : members) (by_rank.count(m) ? dumped : undumped).push_back(m);
    int64_t lo = 0, hi = 0;
    for (int m : dumped) {
      auto it = view.ops.find(m);
      if (it == view.ops.end()) continue;  // this rank never issued on the group
      lo = std::max(lo, it->second.begin()->first);
      hi = std::max(hi, it->second.rbegin()->first);
    }
    auto last_seq = [&](int m) -> int64_t {
      auto it = view.ops.find(m);
      return it == view.ops.end() ? 0 : it->second.rbegin()->first;
    };
    for (int64_t k = std::max<int64_t>(lo, 1); k <= hi; ++k) {
      std::vector<int> have, skipped, behind;
      const DumpedOp* sample = nullptr;
      int64_t issued = 0;
      for (int m : dumped) {
        auto rit = view.ops.find(m);
        const DumpedOp* op = nullptr;
        if (rit != view.ops.end()) {
          auto sit = rit->second.find(k);
          if (sit != rit->second.end()) op = sit->second;
        }
        if (op != nullptr) {
          have.push_back(m);
          if (sample == nullptr) sample = op;
          issued = issued == 0 ? op->issued_us : std::min(issued, op->issued_us);
        } else {
          (last_seq(m) > k ? skipped : behind).push_back(m);
        }
      }
      if (sample == nullptr) continue;
      // A rank that dumped within a second of the others issuing #k may just
      // not have got there yet (a SIGUSR2 snapshot of a healthy run): only a
      // rank the others waited on longer is named.
      behind.erase(std::remove_if(behind.begin(), behind.end(),
                                  [&](int b) {
                                    return by_rank.at(b)->dumped_us - issued < kPendingUs;
                                  }),
                   behind.end());
      Divergence d;
      d.group = GroupName(*sample);
      d.seq = k;
      d.op = OpName(*sample);
      d.issued_us = issued;
      d.others = have;
      if (!skipped.empty() || !behind.empty()) {
        if (!skipped.empty()) {
          d.kind = Divergence::Kind::kSkipped;
          d.culprits = skipped;
          d.line = absl::StrCat(RankList(skipped), " never issued ", d.op, " on group ", d.group,
                                ", though ", skipped.size() == 1 ? "it" : "they",
                                " issued later ops there; ", RankList(have), " issued it (",
                                sample->fingerprint, ") at ", Clock(issued), " and waited");
        } else {
          d.kind = Divergence::Kind::kBehind;
          d.culprits = behind;
          std::string where;
          for (int b : behind) {
            absl::StrAppend(&where, "; rank ", b, "'s last op there was #", last_seq(b),
                            ", its last op of all ", LastOp(*by_rank.at(b)));
          }
          d.line = absl::StrCat(RankList(behind), " never reached ", d.op, " on group ", d.group,
                                ": ", RankList(have), " issued it at ", Clock(issued),
                                " and waited", where);
        }
        report.divergences.push_back(std::move(d));
        break;
      }
      std::map<std::string, std::vector<int>> by_fingerprint;
      for (int m : have) by_fingerprint[view.ops.at(m).at(k)->fingerprint].push_back(m);
      if (by_fingerprint.size() > 1) {
        // The majority is taken as right (ties: the one rank 0's side has).
        auto majority = by_fingerprint.begin();
        for (auto it = by_fingerprint.begin(); it != by_fingerprint.end(); ++it) {
          if (it->second.size() > majority->second.size() ||
              (it->second.size() == majority->second.size() &&
               it->second.front() < majority->second.front())) {
            majority = it;
          }
        }
        d.kind = Divergence::Kind::kMismatch;
        d.others = majority->second;
        std::string theirs;
        for (const auto& [fp, ranks] : by_fingerprint) {
          if (fp == majority->first) continue;
          d.culprits.insert(d.culprits.end(), ranks.begin(), ranks.end());
          absl::StrAppend(&theirs, theirs.empty() ? "" : ", ", "'", fp, "' (", RankList(ranks), ")");
        }
        std::sort(d.culprits.begin(), d.culprits.end());
        d.op = OpName(*view.ops.at(majority->second.front()).at(k));
        d.line = absl::StrCat(RankList(d.culprits), " issued ", d.op, " on group ", d.group, " as ",
                              theirs, " where ", RankList(majority->second), " issued '",
                              majority->first, "'");
        report.divergences.push_back(std::move(d));
        break;
      }
      const bool none_ended = std::none_of(have.begin(), have.end(), [&](int m) {
        return view.ops.at(m).at(k)->ended();
      });
      std::vector<int> not_done;
      for (int m : have) {
        const std::string& state = view.ops.at(m).at(k)->state;
        if (state != "completed" && state != "waited") not_done.push_back(m);
      }
      if (!not_done.empty() && !undumped.empty()) {
        d.kind = Divergence::Kind::kBehind;
        d.culprits = undumped;
        d.line = absl::StrCat(RankList(undumped), " left no dump, and ", d.op, " on group ",
                              d.group, " (issued at ", Clock(issued), ") did not complete on ",
                              RankList(not_done), ": ", undumped.size() == 1 ? "it" : "they",
                              " died or hung before writing one");
        report.divergences.push_back(std::move(d));
        break;
      }
      int64_t first_dump = 0;
      for (int m : have) {
        const int64_t t = by_rank.at(m)->dumped_us;
        first_dump = first_dump == 0 ? t : std::min(first_dump, t);
      }
      if (none_ended && first_dump - issued >= kPendingUs) {
        d.kind = Divergence::Kind::kStuck;
        d.line = absl::StrCat("every rank of group ", d.group, " issued ", d.op, " (",
                              sample->fingerprint, ") at ", Clock(issued),
                              " and none finished it: the ranks agree, suspect the network "
                              "or the backend");
        report.divergences.push_back(std::move(d));
        break;
      }
    }
  }
  std::sort(report.divergences.begin(), report.divergences.end(),
            [](const Divergence& a, const Divergence& b) { return a.issued_us < b.issued_us; });
  if (!report.divergences.empty()) {
    report.verdict = report.divergences.front().line;
  } else if (!report.missing.empty()) {
    report.verdict = absl::StrCat(RankList(report.missing),
                                  " left no dump; the others' recorded ops agree");
  } else {
    report.verdict = "the ranks' recorded ops agree: every group's ranks issued the same "
                     "collectives, and none is left waiting";
  }
  for (const RankDump& d : dumps) {
    // The reason carries the rank's whole error; its start says enough here.
    constexpr size_t kReasonChars = 120;
    const std::string reason = d.reason.size() > kReasonChars
                                   ? absl::StrCat(d.reason.substr(0, kReasonChars), "...")
                                   : d.reason;
    report.details.push_back(absl::StrCat("rank ", d.rank, d.host.empty() ? "" : " on ", d.host,
                                          ": dumped at ", Clock(d.dumped_us), " (", reason,
                                          "), ", d.ops.size(), " ops kept, the last ",
                                          LastOp(d)));
  }
  for (int r : report.missing) report.details.push_back(absl::StrCat("rank ", r, ": no dump"));
  return report;
}

}  // namespace weft::hang
