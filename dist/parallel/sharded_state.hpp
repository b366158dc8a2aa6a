// A sharded optimizer's state in the layout of the unsharded optimizer of the same
// parameters, and back. Chapter 09.
//
// ZeRO-1, ZeRO-2 and FSDP step one local optimizer over this rank's slices of flat buffers
// (FlatParameter j -> the local optimizer's parameter j), so its state is named
// "exp_avg.<j>" and holds a slice. consolidate_optimizer_state all-gathers every slice and
// cuts the flat buffers back into parameters: "exp_avg.<i>" of parameter i's shape, what
// nn::AdamW over the model's parameters() would hold. A checkpoint keeps that one
// consolidated state, which any number of ranks resumes, sharded or not:
// shard_optimizer_state cuts this rank's slices out of it again. Float32 entries are
// sliced; int64 entries (AdamW's step counts) hold one value per flat buffer and are
// copied to each of its parameters. A sharded checkpoint (sharded_checkpoint.hpp) cuts its
// flat buffers back into parameters with the same two functions, unflatten_optimizer_entry
// and sort_by_parameter, so that both forms of a checkpoint hold the same bits.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dist/parallel/flat_parameter.hpp"
#include "dist/process_group.hpp"
#include "nn/optimizer.hpp"

namespace ddp {

// "exp_avg_sq.12" -> ("exp_avg_sq", 12); "optimizer.exp_avg.3" -> ("optimizer.exp_avg", 3):
// the index after the last dot, and what comes before it. The one parser of these names,
// for the optimizer's state here and for the entries a sharded checkpoint reads back from
// its files (sharded_checkpoint.cpp). Throws ddp::Error naming `source` (who read `name`,
// from which file) and the entry unless `name` is "<kind>.<digits>" with a kind.
std::pair<std::string, std::size_t> split_entry_name(const std::string& name,
                                                     std::string_view source);

// Where the parameters of one flat buffer lie in it, and which of the model's parameters
// they are: what cutting the buffer back into parameters needs. Made from a live
// FlatParameter (places_of), or read back from a sharded checkpoint's manifest.
struct FlatPlaces {
  std::vector<std::size_t> index;    // each parameter's position in the model's parameters()
  std::vector<std::int64_t> offset;  // its first element in the flat buffer
  std::vector<Shape> shape;
};
// `parameters`: the model's; every parameter of `flat` must be among them.
FlatPlaces places_of(const FlatParameter& flat, const std::vector<Variable>& parameters);

// The local optimizer's entry "<kind>.<j>" as consolidated entries "<kind>.<i>", one per
// parameter i of flat buffer j, appended to `full`. `whole`: flat buffer j's state
// (float32, at least its real elements; the padding is not read), cut at `places`; or a
// step count (int64), copied to each parameter.
void unflatten_optimizer_entry(const std::string& kind, const Tensor& whole,
                               const FlatPlaces& places, nn::StateDict& full);
// Puts the consolidated entries in the order an unsharded optimizer lists its state: by
// parameter, then by kind in the order they came.
void sort_by_parameter(nn::StateDict& full);

// Every rank calls it (one all-gather per sliced entry, in the local state's order) and
// gets the whole consolidated state. `flats[j]` is the local optimizer's parameter j;
// `parameters` are the model's, whose positions name the entries.
nn::StateDict consolidate_optimizer_state(const nn::Optimizer& local,
                                          const std::vector<const FlatParameter*>& flats,
                                          const std::vector<Variable>& parameters,
                                          ProcessGroup& group);

// This rank's slices of `full` (consolidated), named as the local optimizer names them:
// load them with local.load_state_dict. `source` names `full` in the messages.
nn::StateDict shard_optimizer_state(const nn::StateDict& full,
                                    const std::vector<const FlatParameter*>& flats,
                                    const std::vector<Variable>& parameters,
                                    std::string_view source);

}  // namespace ddp
