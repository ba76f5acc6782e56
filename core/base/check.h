// WEFT_CHECK: aborts on programmer errors (broken invariants), never on bad
// user input, which gets an absl::Status instead. Debian's absl has no
// absl/log, hence this small replacement.
//
//   WEFT_CHECK(n > 0) << "n=" << n;
//   WEFT_CHECK_EQ(a.numel(), b.numel());
#ifndef WEFT_CORE_BASE_CHECK_H_
#define WEFT_CORE_BASE_CHECK_H_

#include <sstream>

namespace weft::internal {

// Collects the message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & CheckFailure(...).stream() << ...` parse.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace weft::internal

#define WEFT_CHECK(cond)                \
  (cond) ? (void)0                      \
         : ::weft::internal::Voidify() & \
               ::weft::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define WEFT_CHECK_OP_(a, op, b) \
  WEFT_CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define WEFT_CHECK_EQ(a, b) WEFT_CHECK_OP_(a, ==, b)
#define WEFT_CHECK_NE(a, b) WEFT_CHECK_OP_(a, !=, b)
#define WEFT_CHECK_LT(a, b) WEFT_CHECK_OP_(a, <, b)
#define WEFT_CHECK_LE(a, b) WEFT_CHECK_OP_(a, <=, b)
#define WEFT_CHECK_GT(a, b) WEFT_CHECK_OP_(a, >, b)
#define WEFT_CHECK_GE(a, b) WEFT_CHECK_OP_(a, >=, b)

// Aborts when a Status that cannot fail in correct code is not OK.
#define WEFT_CHECK_OK(expr)                                      \
  do {                                                           \
    const auto& weft_check_status_ = (expr);                     \
    WEFT_CHECK(weft_check_status_.ok()) << weft_check_status_;  \
  } while (0)

#endif  // WEFT_CORE_BASE_CHECK_H_
