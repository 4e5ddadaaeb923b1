// The sweep's testing aids (hpc/sweep.hpp): injected failures count attempts. Serial.
#include <gtest/gtest.h>

#include "hpc/sweep.hpp"

using namespace genemask;

namespace {

TEST(SweepRunner, InjectedFailuresCountAttempts) {
  auto runner = hpc::with_injected_failures(hpc::simulated_runner(0), {hpc::parse_failure_rule("m|*|10|*:2")});
  hpc::Job job;
  job.key = "m|t|10|4";
  job.shots = 10;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    job.attempt = attempt;
    if (attempt <= 2) {
      EXPECT_THROW(runner(job, {}), std::runtime_error);
    } else {
      const auto m = runner(job, {});
      EXPECT_EQ(m.test.accuracy, hpc::simulated_metrics(job.key).test.accuracy);
    }
  }
  job.key = "m|t|100|4";  // no match
  job.attempt = 1;
  EXPECT_NO_THROW(runner(job, {}));
  EXPECT_EQ(hpc::parse_failure_rule("x:always").attempts, -1);
  EXPECT_THROW(hpc::parse_failure_rule("x:many"), std::runtime_error);
}

}  // namespace
