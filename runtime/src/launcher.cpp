// The launcher's environment and the job-wide abort (launcher.hpp).
#include "mgt/runtime/launcher.hpp"

#include <mpi.h>

#include <cstdlib>

namespace mgt::rt {

LauncherEnvironment launcher_environment() {
  LauncherEnvironment env;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* v = std::getenv(var);
    if (v && std::atoll(v) > 1) {
      env.world_size = std::atoll(v);
      env.world_size_variable = var;
      break;
    }
  }
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = std::getenv("PMI_RANK");
  if (rank) env.rank = std::atoll(rank);
  return env;
}

void abort_job(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return; the compiler does not know it
}

}  // namespace mgt::rt
