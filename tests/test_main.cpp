// doctest entry point; every other tests/*.cpp adds cases.
//
// A watchdog stops the run when one test case runs longer than PERFSIM_TEST_CASE_SECONDS
// (default 300 s; sanitizer builds are the slowest), naming the case and its time, so a case
// that hangs fails on its own line rather than as the whole suite's ctest timeout.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

class CaseWatchdog : public doctest::IReporter {
 public:
  explicit CaseWatchdog(const doctest::ContextOptions&) {
    const char* env = std::getenv("PERFSIM_TEST_CASE_SECONDS");
    if (env != nullptr && std::atof(env) > 0) m_limit = std::atof(env);
  }
  ~CaseWatchdog() override {
    {
      const std::lock_guard<std::mutex> lock(m_mutex);
      m_done = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) m_thread.join();
  }

  void test_case_start(const doctest::TestCaseData& tc) override {
    const std::lock_guard<std::mutex> lock(m_mutex);
    m_case = std::string(tc.m_file.c_str()) + ": " + tc.m_name;
    m_started = std::chrono::steady_clock::now();
    m_running = true;
    if (!m_thread.joinable()) m_thread = std::thread([this] { watch(); });
    m_wake.notify_all();
  }
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    const std::lock_guard<std::mutex> lock(m_mutex);
    m_running = false;
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(m_mutex);
    while (!m_done) {
      if (!m_running) {
        m_wake.wait(lock);
        continue;
      }
      const auto deadline = m_started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            std::chrono::duration<double>(m_limit));
      const auto started = m_started;
      if (m_wake.wait_until(lock, deadline) == std::cv_status::timeout && m_running && m_started == started) {
        std::fprintf(stderr, "\nunit: test case '%s' still running after %.0f s (PERFSIM_TEST_CASE_SECONDS): stopped\n",
                     m_case.c_str(), m_limit);
        std::fflush(stderr);
        _exit(1);
      }
    }
  }

  double m_limit = 300;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::thread m_thread;
  std::string m_case;
  std::chrono::steady_clock::time_point m_started;
  bool m_running = false;
  bool m_done = false;
};

}  // namespace

DOCTEST_REGISTER_LISTENER("case_watchdog", 1, CaseWatchdog);
