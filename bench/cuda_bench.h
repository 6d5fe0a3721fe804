// Shared by the standalone CUDA microbenchmarks in bench/ (each built alone with nvcc, no torch).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                                \
  do {                                                                                          \
    const cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// The driver's cuTensorMapEncodeTiled through the runtime (no -lcuda needed).
inline decltype(&cuTensorMapEncodeTiled) tensor_map_encoder() {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || fn == nullptr) {
    std::fprintf(stderr, "the driver has no cuTensorMapEncodeTiled\n");
    std::exit(1);
  }
  return reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(fn);
}
