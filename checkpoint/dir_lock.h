// DirLock: one job at a time per checkpoint directory. A second job on the
// same --checkpoint_dir (a copied command, a restart while the old job still
// runs) would remove the first one's save in progress as a leftover and
// prune its checkpoints; rank 0 of each job holds this lock instead, and
// the second job stops at startup naming the first.
//
// The lock is flock(2) on <dir>/.weft.lock, so the kernel releases it when
// the holder exits, however it exits: no stale lock to remove by hand.
#ifndef WEFT_CHECKPOINT_DIR_LOCK_H_
#define WEFT_CHECKPOINT_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace weft::ckpt {

inline constexpr char kLockFile[] = ".weft.lock";

class DirLock {
 public:
  // Creates `dir` if needed and takes its lock, writing this process's pid,
  // host and start time into the file for the next job's error. Another
  // holder: FailedPrecondition naming it. A filesystem without locks
  // (ENOLCK, EOPNOTSUPP): a lock that holds nothing, with a note saying so.
  static absl::StatusOr<std::unique_ptr<DirLock>> Acquire(const std::string& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // Non-empty when the directory could not be locked (the reason): the
  // trainer prints it, since two jobs there then go unnoticed.
  const std::string& note() const { return note_; }

 private:
  DirLock(int fd, std::string note) : fd_(fd), note_(std::move(note)) {}
  int fd_ = -1;
  std::string note_;
};

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_DIR_LOCK_H_
