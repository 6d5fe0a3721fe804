// Host cost of the pieces of one fp8-gemm launch, without torch: cuTensorMapEncodeTiled, cudaLaunchKernelEx
// with and without the kernel's launch attributes (cluster shape, programmatic dependent launch), a plain
// <<<>>> launch, and the round trip of one launch between synchronizes. The kernel takes the sm_90a kernel's
// parameters (four tensor maps and a 128-byte block) and its launch shape (132 CTAs x 384 threads, ~200 KB of
// dynamic shared memory) but does nothing, so only launch costs are measured.
//
//   nvcc -O2 -arch=sm_90a -o launch_cost bench/fp8_gemm_launch_cost.cu && ./launch_cost
#include <algorithm>
#include <chrono>

#include "cuda_bench.h"

struct Params {
  long long words[16];
};

__global__ void __launch_bounds__(384, 1)
    empty_kernel(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b,
                 const __grid_constant__ CUtensorMap s, const __grid_constant__ CUtensorMap c, Params p) {
  if (p.words[0] == 42 && threadIdx.x == 1024) asm volatile("trap;");  // never: keeps the parameters live
}

using Clock = std::chrono::steady_clock;

// Mean µs per call of fn over `calls`, synchronizing every `batch` calls outside the timed part (the launches
// must not fill the queue and block).
template <class F>
double host_us(F fn, int calls = 20000, int batch = 200) {
  double total = 0;
  for (int done = 0; done < calls; done += batch) {
    const auto t0 = Clock::now();
    for (int i = 0; i < batch; ++i) fn();
    total += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    CHECK(cudaDeviceSynchronize());
  }
  return total / calls;
}

// Median µs of synchronize, fn, synchronize.
template <class F>
double round_trip_us(F fn, int calls = 2000) {
  static double t[4096];
  for (int i = 0; i < calls; ++i) {
    CHECK(cudaStreamSynchronize(0));
    const auto t0 = Clock::now();
    fn();
    CHECK(cudaStreamSynchronize(0));
    t[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  std::sort(t, t + calls);
  return t[calls / 2];
}

int main() {
  CHECK(cudaFree(nullptr));
  const auto encode = tensor_map_encoder();
  void *buf = nullptr;
  CHECK(cudaMalloc(&buf, 64 << 20));
  CUtensorMap map;
  const cuuint64_t dims[2] = {7168, 4096};
  const cuuint64_t strides[1] = {7168};
  const cuuint32_t box[2] = {128, 128}, estr[2] = {1, 1};
  auto encode_once = [&] {
    if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, buf, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      std::exit(2);
  };
  encode_once();
  Params p{};
  const int smem = 200 * 1024;
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));

  auto launch_ex = [&](int cluster, bool pdl, int attrs_used) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attrs[2]{};
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = cluster, attrs[0].val.clusterDim.y = 1, attrs[0].val.clusterDim.z = 1;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = pdl;
    cfg.gridDim = dim3(132), cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = smem, cfg.stream = 0;
    cfg.attrs = attrs, cfg.numAttrs = attrs_used;
    CHECK(cudaLaunchKernelEx(&cfg, empty_kernel, map, map, map, map, p));
  };
  auto plain = [&] { empty_kernel<<<132, 384, smem>>>(map, map, map, map, p); };
  int dev = 0;
  std::printf("host µs per call (mean of 20000):\n");
  std::printf("  cuTensorMapEncodeTiled               %6.2f\n", host_us(encode_once));
  std::printf("  cudaGetDevice                        %6.2f\n", host_us([&] { CHECK(cudaGetDevice(&dev)); }));
  std::printf("  getenv (unset name)                  %6.2f\n",
              host_us([&] { volatile const char *v = std::getenv("FP8GEMM_NOT_SET"); (void)v; }));
  std::printf("  <<<>>> launch                        %6.2f\n", host_us(plain));
  std::printf("  cudaLaunchKernelEx, no attributes    %6.2f\n", host_us([&] { launch_ex(1, false, 0); }));
  std::printf("  cudaLaunchKernelEx, cluster 1        %6.2f\n", host_us([&] { launch_ex(1, false, 1); }));
  std::printf("  cudaLaunchKernelEx, cluster 1 + PDL  %6.2f\n", host_us([&] { launch_ex(1, true, 2); }));
  std::printf("  cudaLaunchKernelEx, cluster 2 + PDL  %6.2f\n", host_us([&] { launch_ex(2, true, 2); }));
  std::printf("round trip µs (synchronize, launch, synchronize; median of 2000):\n");
  std::printf("  nothing                              %6.2f\n", round_trip_us([] {}));
  std::printf("  <<<>>> launch                        %6.2f\n", round_trip_us(plain));
  std::printf("  cudaLaunchKernelEx, no attributes    %6.2f\n", round_trip_us([&] { launch_ex(1, false, 0); }));
  std::printf("  cudaLaunchKernelEx, cluster 1 + PDL  %6.2f\n", round_trip_us([&] { launch_ex(1, true, 2); }));
  std::printf("  cudaLaunchKernelEx, cluster 2 + PDL  %6.2f\n", round_trip_us([&] { launch_ex(2, true, 2); }));
  std::printf("  4 encodes + cluster 1 + PDL launch   %6.2f\n", round_trip_us([&] {
                encode_once(), encode_once(), encode_once(), encode_once();
                launch_ex(1, true, 2);
              }));
  return 0;
}
