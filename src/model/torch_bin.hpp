#pragma once
// pytorch_model.bin: a torch.save'd (zip) state_dict, as DNABERT-6's release and
// transformers' older saves ship their weights. The file is untrusted input: it is read
// with LibTorch's zip reader and unpickler (no Python objects are built), and every tensor
// must lie inside the data record that backs it.
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace genemask::model {

/// The named tensors of a torch.save'd state_dict. Errors are io::InputError naming `path`.
std::vector<std::pair<std::string, torch::Tensor>> read_pytorch_bin(const std::string& path);
/// The same from a stream; `name` names it in errors (the fuzz target reads from memory).
std::vector<std::pair<std::string, torch::Tensor>> read_pytorch_bin(std::istream& in, const std::string& name);

}  // namespace genemask::model
