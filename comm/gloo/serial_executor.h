// SerialExecutor: one worker thread running tasks in submission order.
//
// The gloo backend runs every op of a group here, so ops complete in issue
// order on every rank (the order collectives must match in) and a gloo
// context is only ever touched by one thread. Destruction runs the tasks
// already queued (each bounded by its op timeout), then joins.
#ifndef WEFT_COMM_GLOO_SERIAL_EXECUTOR_H_
#define WEFT_COMM_GLOO_SERIAL_EXECUTOR_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace weft::comm::gloo_internal {

class SerialExecutor {
 public:
  SerialExecutor();
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  void Submit(std::function<void()> task);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the fields above exist
};

}  // namespace weft::comm::gloo_internal

#endif  // WEFT_COMM_GLOO_SERIAL_EXECUTOR_H_
