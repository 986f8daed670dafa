#include "core/large_stack.hpp"

#include <pthread.h>

#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

namespace perfsim {

namespace {

thread_local bool t_on_large_stack = false;

struct Job {
  const std::function<void()>* fn;
  std::exception_ptr error;
};

void* run_job(void* arg) {
  auto* job = static_cast<Job*>(arg);
  t_on_large_stack = true;
  try {
    (*job->fn)();
  } catch (...) {
    job->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

void run_on_large_stack(const std::function<void()>& fn) {
  if (t_on_large_stack) {
    fn();
    return;
  }
  Job job{&fn, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, large_stack_bytes);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, run_job, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    // No thread to be had (a limit on threads or address space): run here, as before.
    fn();
    return;
  }
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace perfsim
