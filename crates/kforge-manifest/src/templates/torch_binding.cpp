#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

// The op namespace is the unique ops name `_<name>_<backend>_<id>` that the builder defines as
// TORCH_EXTENSION_NAME, so several builds of this kernel can be loaded side by side.
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("{{py}}(Tensor! out, Tensor input) -> ()");
{{impls}}
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
