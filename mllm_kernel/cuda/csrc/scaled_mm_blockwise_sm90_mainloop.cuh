// CUTLASS's Hopper block-scaled FP8 mainloop with the scaling of each K block's partial sums
// overlapped with the next block's MMAs.
//
// CUTLASS's mainloop (MainloopSm90TmaGmmaWarpSpecializedBlockwiseFP8) multiplies a K block into
// one set of partial-sum registers, waits for all of its warpgroup MMAs, then scales the partial
// sums into the total: the tensor cores idle while the warpgroup waits for the MMAs to drain and
// runs the multiply-adds. Here the partial sums alternate between two register sets: block k+1's
// MMAs are issued into one set before block k's sums, in the other, are waited for (wait<1>) and
// scaled, so the scaling runs under the MMAs. It costs one more set of accumulator registers.
//
// Only `mma` changes: loads, shared memory, the pipeline and the parameters are CUTLASS's. It
// takes scales of one value per row and K block for A and one per K block for B's tile (the tile
// is one scale block wide along N), one K block per k tile, which is DeepSeek-V3's format with
// 128 x 128 x 128 and 64 x 128 x 128 tiles.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/collective_builder.hpp>

namespace mllm_kernel::device::gemm_sm90 {

template <class Base>
struct OverlappedBlockwiseMainloop : Base {
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Base::TiledMma;
  using Scale = typename Base::ElementBlockScale;

  static_assert(Base::ScaleNsPerTile == 1, "a tile must be one scale block wide along N");
  static_assert(Base::ScalePromotionInterval * cute::size<2>(typename TiledMma::AtomShape_MNK{}) ==
                    cute::size<2>(typename Base::TileShape{}),
                "a k tile must be one scale block deep");

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx, TensorStorage& shared_tensors,
                          Params const& /*mainloop_params*/) {
    using namespace cute;
    using SmemLayoutA = typename Base::SmemLayoutA;
    using SmemLayoutB = typename Base::SmemLayoutB;
    using SmemLayoutSFA = typename Base::SmemLayoutSFA;
    using SmemLayoutSFB = typename Base::SmemLayoutSFB;
    using TileShape = typename Base::TileShape;

    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M, BLK_K, PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N, BLK_K, PIPE)
    // The scales seen as (BLK_M, BLK_N, (BLK_K, PIPE)) tensors, broadcast along the other
    // operand's dimension, so that the MMA's C partition gives each thread its rows' scales.
    Tensor sSFA = make_tensor(
        make_smem_ptr(shared_tensors.smem_SFA.data()),
        make_layout(make_shape(get<0>(shape(SmemLayoutSFA{})), get<1>(TileShape{}),
                               make_shape(get<1>(shape(SmemLayoutSFA{})), get<2>(shape(SmemLayoutSFA{})))),
                    make_stride(get<0>(stride(SmemLayoutSFA{})), _0{},
                                make_stride(get<1>(stride(SmemLayoutSFA{})), get<2>(stride(SmemLayoutSFA{}))))));
    Tensor sSFB = make_tensor(
        make_smem_ptr(shared_tensors.smem_SFB.data()),
        make_layout(make_shape(get<0>(TileShape{}), get<0>(shape(SmemLayoutSFB{})),
                               make_shape(get<1>(shape(SmemLayoutSFB{})), get<2>(shape(SmemLayoutSFB{})))),
                    make_stride(_0{}, get<0>(stride(SmemLayoutSFB{})),
                                make_stride(get<1>(stride(SmemLayoutSFB{})), get<2>(stride(SmemLayoutSFB{}))))));

    constexpr int kMmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    Layout warp_group_thread_layout = make_layout(Int<kMmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    const int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));

    Tensor tCsSFA = tiled_mma.get_slice(thread_idx).partition_C(sSFA);  // (MMA, MMA_M, MMA_N, (MMA_K, PIPE))
    Tensor tCsSFB = tiled_mma.get_slice(thread_idx).partition_C(sSFB);
    Tensor tCrA = thread_mma.make_fragment_A(thread_mma.partition_A(sA));  // (MMA, MMA_M, MMA_K, PIPE)
    Tensor tCrB = thread_mma.make_fragment_B(thread_mma.partition_B(sB));  // (MMA, MMA_N, MMA_K, PIPE)

    // Two sets of partial sums and of their rows' scales (A's times B's), used in turn.
    Tensor part0 = make_fragment_like(accum);
    Tensor part1 = make_fragment_like(accum);
    Tensor scale0 = make_tensor_like<Scale>(tCsSFA(_, _, _, _0{}));
    Tensor scale1 = make_tensor_like<Scale>(tCsSFA(_, _, _, _0{}));
    Tensor scale_b = make_tensor_like<Scale>(tCsSFB(_, _, _, _0{}));

    // Waits for a stage, reads its scales and issues its MMAs into `part`.
    auto issue = [&](auto& part, auto& scale, PipelineState const& state) {
      pipeline.consumer_wait(state);
      const int stage = state.index();
      copy(tCsSFA(_, _, _, make_coord(_0{}, stage)), scale);
      copy(tCsSFB(_, _, _, make_coord(_0{}, stage)), scale_b);
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      warpgroup_fence_operand(part);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, _, k_block, stage), tCrB(_, _, k_block, stage), part);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_fence_operand(part);
      const Scale b = scale_b(_0{});
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(filter_zeros(scale)); ++i) filter_zeros(scale)(i) *= b;
    };
    // Adds finished partial sums, scaled, into the total.
    auto fold = [&](auto& part, auto const& scale) {
      warpgroup_fence_operand(part);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += part(i) * scale(i);
    };
    PipelineState smem_pipe_release = smem_pipe_read;
    // Issues the next stage's MMAs into `next`, then waits for the previous stage's, releases
    // that stage and folds its sums (`done`).
    auto step = [&](auto& next, auto& next_scale, auto& done, auto const& done_scale) {
      ++smem_pipe_read;
      issue(next, next_scale, smem_pipe_read);
      warpgroup_wait<1>();
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
      fold(done, done_scale);
    };

    clear(accum);
    issue(part0, scale0, smem_pipe_read);
    int k_left = k_tile_count - 1;  // blocks not issued yet
    // Each exit folds its last partial sums inside the loop, so that no set of them is live
    // where paths merge after it (ptxas would wait for the MMAs in flight there). The last
    // stage is released by mma_tail, every other one here once its MMAs are done.
    CUTLASS_PRAGMA_NO_UNROLL
    for (;;) {
      if (k_left == 0) {
        warpgroup_wait<0>();
        fold(part0, scale0);
        break;
      }
      step(part1, scale1, part0, scale0);
      if (--k_left == 0) {
        warpgroup_wait<0>();
        fold(part1, scale1);
        break;
      }
      step(part0, scale0, part1, scale1);
      --k_left;
    }
    warpgroup_fence_operand(accum);
  }
};

}  // namespace mllm_kernel::device::gemm_sm90
