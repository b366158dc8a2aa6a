// The mpi process group: ddp::ProcessGroup over MPI's nonblocking collectives
// (MPI_Iallreduce and friends). Chapter 05.
//
// MPI brings its own rendezvous: the launcher (mpirun, or srun --mpi=pmix) tells every
// process its rank and how to reach the others, so this group needs no Store. Sub-groups
// (new_group, dist/new_group.hpp) split its communicator and share its communication
// thread (Note [One thread for every mpi group] in the .cpp). It does not do
// point-to-point messages or fault tolerance: a failed collective breaks the group, and
// its sub-groups with it (see Note [Teardown after a failure] in the .cpp).
#pragma once

#include <chrono>
#include <memory>

#include "dist/process_group.hpp"

namespace ddp {

// Initialises MPI (MPI_Init_thread, asking for MPI_THREAD_SERIALIZED) and returns rank
// `MPI_COMM_WORLD rank` of a group spanning MPI_COMM_WORLD. `timeout` bounds every
// collective: one still unfinished after it fails (and breaks the group).
//
// MPI can be initialised once per process: MPI_Init after MPI_Finalize is an error in
// MPI itself. So there is at most one mpi group at a time (its sub-groups aside), and
// none after the first has been destroyed (the last of it and its sub-groups to go calls
// MPI_Finalize); both are checked and throw ddp::Error. When the program called MPI_Init itself, the group uses that MPI (if its
// thread level is high enough) and leaves finalising it to the program.
//
// CUDA tensors are staged through host memory (the MPI library only sees host
// buffers), so any number of ranks may share one GPU.
std::unique_ptr<ProcessGroup> make_process_group_mpi(
    std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace ddp
