// The ranks of a run started by mpirun or srun: MPI's world as a perfsim
// Communicator. Built when MPI is found (PERFSIM_HAVE_MPI); without it
// `launched_by_launcher()` still tells a user who started perfsim under mpirun
// that this build cannot take part.
#pragma once
#include <memory>
#include <string>

#include "core/run/communicator.hpp"

namespace perfsim {

// The world size a launcher set in the environment (OpenMPI's
// OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE, PMIx's PMIX_SIZE... , Slurm's
// SLURM_NTASKS under srun); 1 when none did.
[[nodiscard]] int launcher_world_size();
// This process's place among the ranks of its node as the launcher set it (OpenMPI's
// OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, Slurm's SLURM_LOCALID); 0 when none did.
[[nodiscard]] int launcher_local_rank();
// One GPU per rank: narrows CUDA_VISIBLE_DEVICES to the GPU of this rank's local index among
// those the node shows it (all, or the list already set); leaves a single-GPU list, or fewer
// GPUs than ranks, alone; raises CUDA_DEVICE_MAX_CONNECTIONS to 32 unless set. Call before anything
// touches CUDA.
void use_local_gpu();
// Whether perfsim was built with MPI.
[[nodiscard]] bool mpi_available();

// MPI initialized for the life of the object (MPI_Init_thread, funnelled);
// errors come back as exceptions rather than MPI's default abort, so the caller
// can name the rank that failed. Throws NotExecutable when perfsim was built
// without MPI.
class MpiWorld final : public Communicator {
 public:
  MpiWorld();
  ~MpiWorld() override;
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  [[nodiscard]] int rank() const override { return m_rank; }
  [[nodiscard]] int size() const override { return m_size; }
  [[nodiscard]] std::string host() const override { return m_host; }

  void all_reduce_sum(float* data, int64_t count, RankGroup g) override;
  void reduce_scatter_sum(const float* in, float* out, int64_t count, RankGroup g) override;
  void all_gather(const void* in, void* out, int64_t bytes, RankGroup g) override;
  void all_to_all(const void* in, void* out, int64_t bytes, RankGroup g) override;
  void send(const void* data, int64_t bytes, int to, int tag = 0) override;
  void recv(void* data, int64_t bytes, int from, int tag = 0) override;
  void barrier() override;
  [[nodiscard]] std::vector<std::string> gather_to_root(const std::string& text) override;
  void broadcast(void* data, int64_t bytes) override;
  [[noreturn]] void abort(int code) override;

 private:
  // The communicator of the group holding this rank, made on first use. Only
  // the group's members take part in making it (MPI_Comm_create_group), so
  // ranks of other groups, which may run other graphs (pipeline stages), need
  // not ask for the same groups in the same order.
  struct Groups;  // (size, stride) -> MPI_Comm, defined where mpi.h is included

  int m_rank = 0;
  int m_size = 1;
  std::string m_host;
  std::unique_ptr<Groups> m_groups;
};

}  // namespace perfsim
