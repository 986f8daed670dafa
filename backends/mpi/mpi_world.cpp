// MpiWorld over MPI (see mpi_world.hpp). Large buffers go in pieces of at most
// 1 GiB elements, since MPI counts are int.
#include "backends/mpi/mpi_world.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <list>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.hpp"

#ifdef PERFSIM_HAVE_MPI
// The C API only: OpenMPI's and MPICH's deprecated C++ bindings need a library
// of their own.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace perfsim {

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  }
  // srun starts one task per rank; SLURM_NTASKS alone is also set inside a
  // batch allocation, where perfsim runs as one process unless srun started it
  // (SLURM_STEP_ID set).
  if (std::getenv("SLURM_STEP_ID") != nullptr)
    if (const char* v = std::getenv("SLURM_NTASKS")) return std::max(1, std::atoi(v));
  return 1;
}

int launcher_local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var)) return std::max(0, std::atoi(v));
  return 0;
}

// One GPU per rank (mpi_world.hpp): the rank's local index picks it among the GPUs the node shows this process
// (CUDA_VISIBLE_DEVICES when set, else all), before anything touches CUDA.
void use_local_gpu() {
  // A rank's streams (the step's seven, and each NCCL communicator's own) share the device's
  // hardware work queues; at CUDA's default of 8 two streams may share one, and a transfer
  // waiting for another rank then holds up the kernels queued behind it, which that rank may be
  // waiting for. 32, the most, keeps them apart; a value the user set stays.
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  const int local = launcher_local_rank();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string pick = std::to_string(local);
  if (visible != nullptr && *visible != '\0') {
    std::vector<std::string> ids;
    std::string id;
    for (const char* c = visible;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!id.empty()) ids.push_back(id);
        id.clear();
        if (*c == '\0') break;
      } else {
        id += *c;
      }
    }
    if (ids.size() == 1) return;                                // the launcher gave this rank its GPU
    if (static_cast<std::size_t>(local) >= ids.size()) return;  // more ranks than GPUs: leave it
    pick = ids[static_cast<std::size_t>(local)];
  }
  ::setenv("CUDA_VISIBLE_DEVICES", pick.c_str(), 1);
}


#ifndef PERFSIM_HAVE_MPI

bool mpi_available() { return false; }
MpiWorld::MpiWorld() {
  throw NotExecutable(
      "perfsim was built without MPI: install OpenMPI "
      "(scripts/install_deps.sh) "
      "and rebuild to run several ranks");
}
MpiWorld::~MpiWorld() = default;
void MpiWorld::all_reduce_sum(float*, int64_t, RankGroup) {}
void MpiWorld::reduce_scatter_sum(const float*, float*, int64_t, RankGroup) {}
void MpiWorld::all_gather(const void*, void*, int64_t, RankGroup) {}
void MpiWorld::all_to_all(const void*, void*, int64_t, RankGroup) {}
void MpiWorld::send(const void*, int64_t, int, int) {}
void MpiWorld::recv(void*, int64_t, int, int) {}
void MpiWorld::barrier() {}
std::vector<std::string> MpiWorld::gather_to_root(const std::string&) { return {}; }
void MpiWorld::broadcast(void*, int64_t) {}
void MpiWorld::abort(int code) { std::_Exit(code); }
struct MpiWorld::Groups {};

#else

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw NotExecutable(fmt::format("{} failed: {}", call, std::string(text, static_cast<std::size_t>(len))));
}

// Pieces of a buffer that MPI's int counts can carry.
constexpr int64_t piece = INT_MAX / 2;

}  // namespace

bool mpi_available() { return true; }

struct MpiWorld::Groups {
  std::map<std::pair<int, int>, MPI_Comm> comms;
  MPI_Comm of(MpiWorld& w, RankGroup g);
  // Sends in flight: each one's copy of the data and its requests.
  struct Send {
    std::vector<char> data;
    std::vector<MPI_Request> requests;
  };
  std::list<Send> sends;
  // Forgets the sends that have completed; with `all`, waits for every one first.
  void reap(bool all);
};

void MpiWorld::Groups::reap(bool all) {
  for (auto it = sends.begin(); it != sends.end();) {
    int done = 0;
    if (all)
      check(MPI_Waitall(static_cast<int>(it->requests.size()), it->requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    else
      check(MPI_Testall(static_cast<int>(it->requests.size()), it->requests.data(), &done, MPI_STATUSES_IGNORE),
            "MPI_Testall");
    it = all || done != 0 ? sends.erase(it) : std::next(it);
  }
}

MpiWorld::MpiWorld() : m_groups(std::make_unique<Groups>()) {
  int ready = 0;
  check(MPI_Initialized(&ready), "MPI_Initialized");
  if (ready == 0) {
    int provided = 0;
    // Serialized, not funneled: a script runs on its own large-stack thread while the main one
    // waits (core/large_stack.hpp), and a perfsim.measure inside it may reach the ranks.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &m_rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &m_size), "MPI_Comm_size");
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  m_host.assign(name, static_cast<std::size_t>(len));
}

MpiWorld::~MpiWorld() {
  try {
    m_groups->reap(true);
  } catch (const std::exception&) {
    // A peer is gone; finalizing is all that is left.
  }
  for (auto& [key, comm] : m_groups->comms) {
    if (comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF) MPI_Comm_free(&comm);
  }
  int done = 0;
  MPI_Finalized(&done);
  if (done == 0) MPI_Finalize();
}

MPI_Comm MpiWorld::Groups::of(MpiWorld& w, RankGroup g) {
  const int m_rank = w.m_rank, m_size = w.m_size;
  if (g.size < 1 || g.stride < 1 || g.size * g.stride > m_size)
    throw NotExecutable(
        fmt::format("a group of {} ranks {} apart does not fit a world of {} ranks", g.size, g.stride, m_size));
  const auto key = std::make_pair(g.size, g.stride);
  if (auto it = comms.find(key); it != comms.end()) return it->second;
  MPI_Comm comm = MPI_COMM_SELF;
  if (g.size == m_size) {
    comm = MPI_COMM_WORLD;
  } else if (g.size > 1) {
    std::vector<int> members(static_cast<std::size_t>(g.size));
    for (int i = 0; i < g.size; ++i) members[static_cast<std::size_t>(i)] = g.member(m_rank, i);
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    check(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
    check(MPI_Group_incl(world_group, g.size, members.data(), &group), "MPI_Group_incl");
    // The tag keeps the creations of different groups apart.
    check(MPI_Comm_create_group(MPI_COMM_WORLD, group, g.stride * 4096 + g.size, &comm), "MPI_Comm_create_group");
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  comms[key] = comm;
  return comm;
}

void MpiWorld::all_reduce_sum(float* data, int64_t count, RankGroup g) {
  MPI_Comm comm = m_groups->of(*this, g);
  for (int64_t at = 0; at < count; at += piece) {
    const int n = static_cast<int>(std::min(piece, count - at));
    check(MPI_Allreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce");
  }
}

void MpiWorld::reduce_scatter_sum(const float* in, float* out, int64_t count, RankGroup g) {
  MPI_Comm comm = m_groups->of(*this, g);
  if (count * g.size <= piece) {
    check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm),
          "MPI_Reduce_scatter_block");
    return;
  }
  // Too large for one call: reduce this rank's block from everyone, block by
  // block.
  std::vector<float> block;
  for (int i = 0; i < g.size; ++i) {
    for (int64_t at = 0; at < count; at += piece) {
      const int n = static_cast<int>(std::min(piece, count - at));
      float* dst = i == g.place(m_rank) ? out + at : nullptr;
      check(MPI_Reduce(in + static_cast<int64_t>(i) * count + at, dst, n, MPI_FLOAT, MPI_SUM, i, comm), "MPI_Reduce");
    }
  }
}

void MpiWorld::all_gather(const void* in, void* out, int64_t bytes, RankGroup g) {
  if (bytes > piece)
    throw NotExecutable(fmt::format("all_gather of {} bytes a rank: at most {} on CPU ranks", bytes, piece));
  check(MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE,
                      m_groups->of(*this, g)),
        "MPI_Allgather");
}

void MpiWorld::all_to_all(const void* in, void* out, int64_t bytes, RankGroup g) {
  if (bytes > piece)
    throw NotExecutable(fmt::format("all_to_all of {} bytes a block: at most {} on CPU ranks", bytes, piece));
  check(MPI_Alltoall(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE,
                     m_groups->of(*this, g)),
        "MPI_Alltoall");
}

void MpiWorld::send(const void* data, int64_t bytes, int to, int tag) {
  m_groups->reap(false);
  // A copy the sender may not overwrite until MPI is done with it; the caller's buffer is free at
  // once.
  Groups::Send& s = m_groups->sends.emplace_back();
  s.data.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  for (int64_t at = 0; at < bytes; at += piece) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Isend(s.data.data() + at, static_cast<int>(std::min(piece, bytes - at)), MPI_BYTE, to, tag,
                    MPI_COMM_WORLD, &r),
          "MPI_Isend");
    s.requests.push_back(r);
  }
}

void MpiWorld::recv(void* data, int64_t bytes, int from, int tag) {
  auto* p = static_cast<char*>(data);
  for (int64_t at = 0; at < bytes; at += piece)
    check(MPI_Recv(p + at, static_cast<int>(std::min(piece, bytes - at)), MPI_BYTE, from, tag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
}

void MpiWorld::barrier() {
  m_groups->reap(true);
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

std::vector<std::string> MpiWorld::gather_to_root(const std::string& text) {
  const int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<std::size_t>(m_rank == 0 ? m_size : 0));
  check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<int> offsets(lens.size());
  int total = 0;
  for (std::size_t i = 0; i < lens.size(); ++i) {
    offsets[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  check(MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD),
        "MPI_Gatherv");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < lens.size(); ++i)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lens[i])));
  return out;
}

void MpiWorld::broadcast(void* data, int64_t bytes) {
  auto* p = static_cast<char*>(data);
  for (int64_t at = 0; at < bytes; at += piece)
    check(MPI_Bcast(p + at, static_cast<int>(std::min(piece, bytes - at)), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

void MpiWorld::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#endif

}  // namespace perfsim
