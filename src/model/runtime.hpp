#pragma once
// Thread count and device choice for every model command (pretrain, embed, finetune,
// variants), and what the LibTorch offers (`genemask --version`).
#include <torch/torch.h>

#include <string>

#include "model/runtime_info.hpp"

namespace genemask::model {

/// Sets LibTorch's intra-op threads: `requested`, or the node's cores shared by
/// `ranks_on_node` ranks for 0. Returns the count.
int set_intra_op_threads(int requested, int ranks_on_node = 1);

/// The LibTorch version, its CUDA build, and the GPUs visible now (never throws).
RuntimeInfo runtime_info();

/// "cpu", or "cuda" with GPU ordinal `index`. For cuda, a LibTorch without CUDA, no
/// visible GPU, or an ordinal past the visible GPUs is a one-line error that says how to
/// check. `flag` names the option in that message.
torch::Device pick_device(const std::string& device, int index, const std::string& flag = "--gpu");

/// The device of an MPI rank: for cuda, the GPU of its node-local rank (modulo the GPUs
/// visible), so that ranks of a node spread over its GPUs.
torch::Device pick_rank_device(const std::string& device, int local_rank);

}  // namespace genemask::model
