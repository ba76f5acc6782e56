#include "checkpoint/layout.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/base/errors.h"

namespace weft::ckpt {
namespace fs = std::filesystem;
namespace {

// "step_<N>" with an optional suffix; false for other names.
bool ParseStepName(const std::string& name, int64_t* step, std::string* suffix) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "step_")) return false;
  const size_t dot = rest.find('.');
  *suffix = dot == absl::string_view::npos ? "" : std::string(rest.substr(dot));
  return absl::SimpleAtoi(rest.substr(0, dot), step) && *step >= 0;
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

std::string StepDirName(int64_t step) { return absl::StrCat("step_", step); }

std::string RankFileName(int rank) { return absl::StrFormat("rank_%05d.bin", rank); }

absl::StatusOr<std::vector<CheckpointDir>> ListCheckpoints(const std::string& root) {
  std::vector<CheckpointDir> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    int64_t step = 0;
    std::string suffix;
    if (!e.is_directory() || !ParseStepName(e.path().filename().string(), &step, &suffix) ||
        !suffix.empty() || !fs::exists(e.path() / kMetadataFile)) {
      continue;
    }
    out.push_back({step, e.path().string()});
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", root, ": ", ec.message()));
  std::sort(out.begin(), out.end(),
            [](const CheckpointDir& a, const CheckpointDir& b) { return a.step < b.step; });
  return out;
}

absl::StatusOr<std::string> ResolveResume(const std::string& root, const std::string& resume) {
  if (resume != "latest" && resume != "auto") {
    std::error_code ec;
    if (!fs::exists(fs::path(resume) / kMetadataFile, ec)) {
      // A run's checkpoint directory (what sample and ckpt accept) is named
      // as one, with its newest step; `ckpt inspect DIR`, the old hint,
      // shows only that step, not a list.
      absl::StatusOr<std::vector<CheckpointDir>> inside = ListCheckpoints(resume);
      if (inside.ok() && !inside->empty()) {
        return NotFound(
            absl::StrCat("--resume=", resume, " is a directory of ", inside->size(),
                         " checkpoint(s), not one checkpoint"),
            "a complete checkpoint directory (step_<N>/), \"latest\" or \"auto\"",
            absl::StrCat("pass --resume=", inside->back().path, " (its newest), or --checkpoint_dir=",
                         resume, " --resume=latest"));
      }
      return NotFound(absl::StrCat("--resume=", resume, " has no ", kMetadataFile),
                      "a complete checkpoint directory (step_<N>/), \"latest\" or \"auto\"",
                      "a complete checkpoint is a step_<N>/ directory holding metadata.pb; "
                      "bazel run //tools:ckpt -- inspect DIR shows a directory's newest");
    }
    return resume;
  }
  if (root.empty()) {
    return InvalidArgument(absl::StrCat("--resume=", resume, " without --checkpoint_dir"),
                           "--checkpoint_dir=DIR to search for the latest checkpoint");
  }
  absl::StatusOr<std::vector<CheckpointDir>> all = ListCheckpoints(root);
  if (!all.ok()) return all.status();
  if (all->empty()) {
    if (resume == "auto") return std::string();
    return NotFound(absl::StrCat("no complete checkpoint under ", root),
                    "a step_<N>/ directory holding metadata.pb",
                    "train with --checkpoint_every=K first, or drop --resume");
  }
  return all->back().path;
}

absl::Status RemoveLeftovers(const std::string& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return absl::OkStatus();
  std::vector<fs::path> doomed;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    int64_t step = 0;
    std::string suffix;
    if (ParseStepName(e.path().filename().string(), &step, &suffix) &&
        (suffix == ".tmp" || suffix == ".old")) {
      doomed.push_back(e.path());
    }
  }
  for (const fs::path& p : doomed) {
    fs::remove_all(p, ec);
    if (ec) return absl::InternalError(absl::StrCat("removing ", p.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status Prune(const std::string& root, int keep_last) {
  if (keep_last <= 0) return absl::OkStatus();
  absl::StatusOr<std::vector<CheckpointDir>> all = ListCheckpoints(root);
  if (!all.ok()) return all.status();
  for (size_t i = 0; i + keep_last < all->size(); ++i) {
    const std::string old = (*all)[i].path + ".old";
    // Rename first: a crash mid-delete leaves a .old directory, never a
    // complete-looking checkpoint with files missing.
    if (std::rename((*all)[i].path.c_str(), old.c_str()) != 0) {
      return Errno("renaming", (*all)[i].path);
    }
    std::error_code ec;
    fs::remove_all(old, ec);
    if (ec) return absl::InternalError(absl::StrCat("removing ", old, ": ", ec.message()));
  }
  return FsyncPath(root);
}

absl::Status FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("opening", path);
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return rc == 0 ? absl::OkStatus() : Errno("fsync of", path);
}

absl::Status DurableRename(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (fs::exists(to, ec)) {
    return FailedPrecondition(absl::StrCat("checkpoint ", to, " already exists"),
                              "a new step directory",
                              "a second job is writing to the same --checkpoint_dir, or the "
                              "step was saved twice");
  }
  if (std::rename(from.c_str(), to.c_str()) != 0) return Errno("renaming", from);
  return FsyncPath(fs::path(to).parent_path().string());
}

}  // namespace weft::ckpt
