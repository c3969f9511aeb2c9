// CUB's DeviceReduce::Sum with an execution environment that requires a determinism level (CCCL >= 3.1): the
// competitor of issue 11's exact-sum benchmark. gpu_to_gpu (CUB's reproducible-float-accumulator reduction, the same
// bits on every GPU) or run_to_run (the default two-pass reduction, the same bits run to run on one GPU). float32
// input only (CUB's gpu_to_gpu takes float and double sums with 32-bit offsets). Built by
// experiments/cub_determinism.py with nvcc against the CCCL headers that CuPy bundles; called through ctypes.
#include <cub/device/device_reduce.cuh>
#include <cuda/__execution/determinism.h>
#include <cuda/__execution/require.h>
#include <cuda/stream_ref>

extern "C" int tcr_cub_sum_f32(const float* in, float* out, int n, cudaStream_t stream, int gpu_to_gpu) {
    const cuda::stream_ref s{stream};
    if (gpu_to_gpu) {
        const auto env = cuda::std::execution::env{
            cuda::execution::require(cuda::execution::determinism::gpu_to_gpu), s};
        return static_cast<int>(cub::DeviceReduce::Sum(in, out, n, env));
    }
    const auto env = cuda::std::execution::env{cuda::execution::require(cuda::execution::determinism::run_to_run), s};
    return static_cast<int>(cub::DeviceReduce::Sum(in, out, n, env));
}
