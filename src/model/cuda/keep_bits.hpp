#pragma once
// The fused residual LayerNorm's dropout keep mask as bits (fusions.hpp's ln-lean): whether
// element j of row r was kept is bit j % 8 of byte r * keep_bytes_per_row(H) + j / 8, whichever
// kernel (8-element chunks or one element a lane) wrote it and whichever reads it, so the
// forward and the backward need not take the same path (their pointers' alignments decide
// that apart). Plain C++ as well as CUDA, so that the CPU tests check the layout.
#include <cstdint>

#include "model/cuda/host_device.hpp"

namespace genemask::model::cuda {

/// Bytes of keep bits per row of H elements.
GENEMASK_HOST_DEVICE constexpr int keep_bytes_per_row(int H) { return (H + 7) / 8; }
/// The byte holding row r's element j.
GENEMASK_HOST_DEVICE constexpr int64_t keep_byte(int64_t r, int H, int j) {
  return r * keep_bytes_per_row(H) + j / 8;
}
/// Whether element j is kept, from its byte.
GENEMASK_HOST_DEVICE constexpr bool kept_bit(uint8_t byte, int j) { return ((byte >> (j % 8)) & 1) != 0; }

/// The one-element kernel: lane `lane` holds element j = 32 k + lane, and the warp's ballot of
/// the k-th flags (bit `lane` set where lane's element is kept, clear where it is past H) holds
/// bytes 4 k .. 4 k + 3 of the row. Lane 8 i writes byte 4 k + i, ballot_byte(ballot, 8 i),
/// where that byte has an element (32 k + 8 i < H): each byte of the row once.
GENEMASK_HOST_DEVICE constexpr bool writes_ballot_byte(int lane, int k, int H) {
  return lane % 8 == 0 && 32 * k + lane < H;
}
GENEMASK_HOST_DEVICE constexpr uint8_t ballot_byte(uint32_t ballot, int lane) {
  return static_cast<uint8_t>((ballot >> lane) & 0xffu);
}

}  // namespace genemask::model::cuda
