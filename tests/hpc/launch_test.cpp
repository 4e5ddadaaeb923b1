// How a process tells from its environment whether it is one rank of several, and whether
// its MPI world fits the Slurm step it runs in: made-up environments of each launch.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hpc/mpi.hpp"

using genemask::hpc::EnvLookup;
using genemask::hpc::launched_by_mpi;
using genemask::hpc::slurm_step_tasks;
using genemask::hpc::slurm_world_problem;

namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// What srun sets for task `procid` of a step of `tasks` tasks (without its MPI plugin's).
std::map<std::string, std::string> srun_task(int tasks, int procid) {
  return {{"SLURM_JOB_ID", "77"},          {"SLURM_STEP_ID", "0"},
          {"SLURM_NTASKS", std::to_string(tasks)}, {"SLURM_NPROCS", std::to_string(tasks)},
          {"SLURM_STEP_NUM_TASKS", std::to_string(tasks)}, {"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_LOCALID", std::to_string(procid)}, {"SLURM_NODEID", "0"}};
}

}  // namespace

TEST(Launch, PlainCommandAndOneRankLaunchesRunWithoutMpi) {
  EXPECT_FALSE(launched_by_mpi(env_of({})));
  EXPECT_FALSE(launched_by_mpi(env_of({{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}})));
  // srun --gpus=1 script: one task, with or without the pmi2/pmix plugin's variables.
  auto one = srun_task(1, 0);
  EXPECT_FALSE(launched_by_mpi(env_of(one)));
  one["PMI_SIZE"] = "1";
  one["PMI_RANK"] = "0";
  one["PMIX_RANK"] = "0";
  EXPECT_FALSE(launched_by_mpi(env_of(one)));
  // A batch script itself: job-level SLURM_NTASKS, but not a task of a step.
  EXPECT_FALSE(launched_by_mpi(env_of({{"SLURM_JOB_ID", "77"}, {"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "0"}})));
  EXPECT_EQ(slurm_step_tasks(env_of({{"SLURM_JOB_ID", "77"}, {"SLURM_NTASKS", "8"}})), 0);
}

TEST(Launch, EveryRankOfSeveralJoinsMpi) {
  EXPECT_TRUE(launched_by_mpi(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}})));
  EXPECT_TRUE(launched_by_mpi(env_of({{"PMI_SIZE", "4"}, {"PMI_RANK", "0"}})));  // MPICH's hydra
  EXPECT_TRUE(launched_by_mpi(env_of({{"PMIX_RANK", "3"}})));
  // srun -n 4 --mpi=pmix: rank 0 has PMIX_RANK=0 and SLURM_PROCID=0, yet must join.
  auto r0 = srun_task(4, 0);
  r0["PMIX_RANK"] = "0";
  EXPECT_TRUE(launched_by_mpi(env_of(r0)));
  EXPECT_EQ(slurm_step_tasks(env_of(r0)), 4);
  EXPECT_TRUE(launched_by_mpi(env_of({{"GENEMASK_FORCE_MPI", "1"}})));
  EXPECT_FALSE(launched_by_mpi(env_of({{"GENEMASK_FORCE_MPI", "0"}})));
}

TEST(Launch, SlurmWorldCheckAllowsNestedLaunchesAndCatchesSingletons) {
  // srun -n 4 with MPI wiring: a world of 4.
  EXPECT_EQ(slurm_world_problem(4, env_of(srun_task(4, 2))), "");
  // srun -n 4 without wiring: each task is a world of 1 doing the whole job.
  const std::string why = slurm_world_problem(1, env_of(srun_task(4, 2)));
  EXPECT_NE(why.find("the Slurm step has 4 tasks"), std::string::npos) << why;
  // mpiexec -n 2 inside `srun --gpus=1 scripts/gpu-check.sh` (one task): nested, allowed.
  auto nested = srun_task(1, 0);
  nested["OMPI_COMM_WORLD_SIZE"] = "2";
  EXPECT_EQ(slurm_world_problem(2, env_of(nested)), "");
  EXPECT_TRUE(launched_by_mpi(env_of(nested)));
  // mpirun inside a batch script: not a step's task, nothing to compare.
  EXPECT_EQ(slurm_world_problem(3, env_of({{"SLURM_JOB_ID", "77"}, {"SLURM_NTASKS", "8"}})), "");
  EXPECT_EQ(slurm_world_problem(1, env_of({})), "");
}

TEST(Launch, MpiTimeoutComesFromTheEnvironmentAndRefusesNonsense) {
  using genemask::hpc::kDefaultMpiTimeoutS;
  using genemask::hpc::mpi_timeout_s;
  EXPECT_EQ(mpi_timeout_s(env_of({})), kDefaultMpiTimeoutS);
  EXPECT_EQ(mpi_timeout_s(env_of({{"GENEMASK_MPI_TIMEOUT", ""}})), kDefaultMpiTimeoutS);
  EXPECT_EQ(mpi_timeout_s(env_of({{"GENEMASK_MPI_TIMEOUT", "0"}})), 0);  // no limit
  EXPECT_EQ(mpi_timeout_s(env_of({{"GENEMASK_MPI_TIMEOUT", "15"}})), 15);
  EXPECT_EQ(mpi_timeout_s(env_of({{"GENEMASK_MPI_TIMEOUT", "1000000000"}})), 1000000000);
  // A sign or space, and a value whose nanoseconds would overflow the watchdog's clock (which
  // then ended the job at the first wait of a second), are refused.
  for (const char* bad : {"-1", "1.5", "ten", "15s", " 5", "+5", "5 ", "1000000001", "10000000000",
                          "99999999999999999999"}) {
    try {
      mpi_timeout_s(env_of({{"GENEMASK_MPI_TIMEOUT", bad}}));
      ADD_FAILURE() << "accepted GENEMASK_MPI_TIMEOUT=" << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("GENEMASK_MPI_TIMEOUT='") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}
