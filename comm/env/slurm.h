// Slurm's compressed host and task lists.
//
//   ExpandSlurmNodelist("node[01-03,07],gpu5")  -> node01 node02 node03 node07 gpu5
//   ExpandSlurmNodelist("rack[1-2]-n[1-2]")     -> rack1-n1 rack1-n2 rack2-n1 rack2-n2
//   ExpandSlurmTaskCounts("2(x3),1")            -> 2 2 2 1
// Zero padding follows the range's lower bound, as Slurm writes it.
#ifndef WEFT_COMM_ENV_SLURM_H_
#define WEFT_COMM_ENV_SLURM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::comm {

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(absl::string_view nodelist);
absl::StatusOr<std::vector<int>> ExpandSlurmTaskCounts(absl::string_view counts);

}  // namespace weft::comm

#endif  // WEFT_COMM_ENV_SLURM_H_
