#pragma once
// Each thread's zstd contexts, kept for its life: creating one per call
// cost more than coding small values, and a fresh compression context's
// tables (MiBs at the levels the index takes) were new memory for every
// archive, paged in and zeroed.

#include <zstd.h>

namespace brevis::codec {

/// The calling thread's compression context, for ZSTD_compressCCtx (which
/// resets its parameters every call). Throws errc::limit if none can be
/// created.
ZSTD_CCtx* thread_zstd_cctx();
/// The calling thread's decompression context, for ZSTD_decompressDCtx.
/// Its parameters and dictionary are sticky and every user shares them:
/// none may set any. Throws errc::limit if none can be created.
ZSTD_DCtx* thread_zstd_dctx();

}  // namespace brevis::codec
