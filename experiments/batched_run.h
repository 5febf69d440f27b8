// select.batched = true on the cuda backend: a point's B requests decode together through the batched
// decoder (kernels/batched_decode.h): one pool launch builds the B indexes, then each step runs one score,
// one top-k and one attention launch for all B requests, with no padding to the longest request.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/pipeline.h"
#include "core/workload.h"

namespace ip::exp {

// Why the point's batch cannot run batched (empty when it can): its requests differ in shape or have no
// attention stage, or the decoder's estimate, with one request's fidelity work beside it, exceeds the free
// device memory. The runner asks before it starts the backend, so that backend = auto can run the point
// on the cpu instead. Needs a device to answer "fits"; without CUDA it says so.
std::string batched_skip_reason(const std::vector<Workload>& reqs, const PipelineParams& p);

// Device bytes a batched point of generated requests needs: the decoder's allocation for the B requests
// (kernels/batched_decode.h) plus, with p.fidelity, one request's work on the cuda backend beside it. NaN
// in a build without CUDA. Throws ip::Error for a configuration the decoder refuses.
double batched_device_bytes(const WorkloadSpec& s, const PipelineParams& p);

// One RequestResult per request, as run_request would give for a scheme that does not learn, except that
// every request of a step carries the batch's times: pool_ms (step 0) is the one pool launch of all B,
// score_ms, topk_ms and attention_ms are the three launches of the step for all B (CUDA events), layer_ms
// their sum. With p.fidelity the exact indexer and dense attention run per request on `fidelity` (the
// runner passes the point's backend). Returns an empty vector and sets `skip_reason` for the reasons of
// batched_skip_reason. Each request's arrays are copied to the device from where they lie (no packed
// host copy). Needs a build with CUDA (throws ip::Error otherwise). Config validation (config.cc) has
// refused what the batched decoder cannot do: learning schemes, the issue-7 features, no attention.
// `kernel_forms`, when given, receives the decoder's kernel forms (BatchedDecoder::kernel_forms).
std::vector<RequestResult> run_batched(const std::vector<Workload>& reqs, const PipelineParams& p, Backend& fidelity,
                                       std::string& skip_reason,
                                       const std::function<void(std::size_t, std::size_t)>& on_step = {},
                                       std::string* kernel_forms = nullptr);

}  // namespace ip::exp
