// Status plumbing shared by every weft package.
//
// WEFT_RETURN_IF_ERROR(expr)      returns the status of `expr` if it is not OK.
// WEFT_ASSIGN_OR_RETURN(lhs, expr) unwraps an absl::StatusOr or returns its error.
#ifndef WEFT_CORE_BASE_STATUS_MACROS_H_
#define WEFT_CORE_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define WEFT_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::absl::Status weft_status_ = (expr);         \
    if (!weft_status_.ok()) return weft_status_;  \
  } while (0)

#define WEFT_STATUS_CONCAT_INNER_(a, b) a##b
#define WEFT_STATUS_CONCAT_(a, b) WEFT_STATUS_CONCAT_INNER_(a, b)

#define WEFT_ASSIGN_OR_RETURN(lhs, expr) \
  WEFT_ASSIGN_OR_RETURN_IMPL_(WEFT_STATUS_CONCAT_(weft_statusor_, __LINE__), lhs, expr)

#define WEFT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

#endif  // WEFT_CORE_BASE_STATUS_MACROS_H_
