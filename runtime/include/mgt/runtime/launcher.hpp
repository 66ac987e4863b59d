// What the process launcher (mpirun, srun) says about this job, read from its environment without
// initialising MPI, and how to end the whole job from one rank (docs/runtime_run.md).
#pragma once

#include <cstdint>
#include <string>

namespace mgt::rt {

/// The launcher's view of this process: world size and rank, or 1 and 0 when no launcher started it.
struct LauncherEnvironment {
  int64_t world_size = 1;
  std::string world_size_variable;  ///< the variable that gave it (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)
  int64_t rank = 0;                 ///< OMPI_COMM_WORLD_RANK or PMI_RANK
};

/// Reads Open MPI's, PMI's and Slurm's variables (the first one set with a value > 1 wins).
LauncherEnvironment launcher_environment();

/// Ends every rank of the job with `exit_code` (MPI_Abort on MPI_COMM_WORLD): for an error on one
/// rank while the others may be waiting in a collective. Needs MPI initialised (a communicator).
[[noreturn]] void abort_job(int exit_code);

}  // namespace mgt::rt
