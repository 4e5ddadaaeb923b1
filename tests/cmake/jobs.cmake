# jobs/: the whole pipeline (jobs/pipeline.sh --local) on tiny generated data: count, shards,
# pretraining with GeneMask and random masking, export-hf, the promoter dataset, the sweep and
# the report; then a second run that resumes. Pretraining needs LibTorch.
if(GENEMASK_WITH_TORCH)
  add_test(NAME jobs_pipeline_local COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_pipeline_local.sh)
  set_tests_properties(jobs_pipeline_local PROPERTIES TIMEOUT 600
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHON=${GENEMASK_PYTHON};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  # The same pipeline submitted with sbatch to a real single-node Slurm started by the test
  # (slurm-wlm + munge; needs root, as CI has: otherwise reported as skipped); then the
  # pretrain and sweep jobs with a 1-minute time limit: warning signal, requeue, resume,
  # COMPLETED (about 3 minutes in all).
  add_test(NAME jobs_pipeline_slurm COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_pipeline_slurm.sh)
  set_tests_properties(jobs_pipeline_slurm PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHON=${GENEMASK_PYTHON}")
  # Many hosts on this machine (tests/jobs/cluster.sh: network namespaces, a 3-node Slurm,
  # Open MPI over TCP): count, shards, pretrain, sweep, report and jobs/pipeline.sh across
  # hosts against one host; a node lost mid-pretrain and mid-sweep, a slow, a hung and a cut
  # link, locks and temporaries across hosts (about 3 minutes; needs root, as CI has).
  add_test(NAME jobs_multihost COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_multihost.sh)
  set_tests_properties(jobs_multihost PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHON=${GENEMASK_PYTHON}")
  # The README's main job (scripts/demo.sh), made small, on the real default chr22 (which
  # scripts/default-genome.sh fetches with apt-get download on first use).
  add_test(NAME demo_quick COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_demo.sh)
  set_tests_properties(demo_quick PROPERTIES TIMEOUT 900
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHON=${GENEMASK_PYTHON};OMPI_MCA_rmaps_base_oversubscribe=1")
  # bench/masking_study.sh (pretraining replicates, the replicate report, the masking
  # audit), made small, on the same chr22.
  add_test(NAME masking_study_quick COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_masking_study.sh)
  set_tests_properties(masking_study_quick PROPERTIES TIMEOUT 900
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHON=${GENEMASK_PYTHON};OMPI_MCA_rmaps_base_oversubscribe=1")
  # bench/paper_scale.sh (the LOGO study at the paper's budget on a GPU), tiny on the CPU.
  add_test(NAME paper_scale_quick COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_paper_scale.sh)
  set_tests_properties(paper_scale_quick PROPERTIES TIMEOUT 600
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHON=${GENEMASK_PYTHON};OMPI_MCA_rmaps_base_oversubscribe=1")
  # The benchmark scripts (bench/*_bench.sh, the genome makers, finetune_bench.py) on tiny
  # inputs: the user's files under BENCH_DIR kept, no figure from a run that failed partway,
  # no output over an input, caches whole, no peer ratio over counts not shown equal, a
  # failed command named with its message (about 2 minutes).
  add_test(NAME bench_scripts_quick COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_bench_scripts.sh)
  set_tests_properties(bench_scripts_quick PROPERTIES TIMEOUT 600
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHON=${GENEMASK_PYTHON};OMPI_MCA_rmaps_base_oversubscribe=1")
endif()
# cmake --install into a prefix, the prefix moved, the tiny pipeline run from there (the
# binary finds its libraries and plugin through its RUNPATH, the scripts find the binary).
if(GENEMASK_WITH_TORCH)
  add_test(NAME install_relocated COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_install.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(install_relocated PROPERTIES TIMEOUT 600 ENVIRONMENT "PYTHON=${GENEMASK_PYTHON}")
endif()
