// Workloads: one request's context (index keys, attention keys and values) and its decode queries,
// synthetic (deterministic from a seed) or imported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/linear_attention.h"
#include "core/tensor.h"

namespace ip {

// Per-token kind, recorded so results can be broken down by it.
enum class TokenKind : std::uint8_t { text = 0, image = 1, sink = 2, needle = 3 };

struct Workload {
  Tensor<float> index_keys;     // [T, D]
  Tensor<float> index_queries;  // [Q, H, D]
  Tensor<float> head_weights;   // [Q, H], >= 0
  Tensor<float> attn_keys;      // [T, Da]   (empty: no attention stage)
  Tensor<float> attn_queries;   // [Q, Ha, Da]
  Tensor<float> values;         // [T, Dv]
  std::vector<TokenKind> kind;  // [T] (empty for imported workloads)
  GateParams gates;             // gates of the local linear branch (hybrid layer), a pure function of (seed, t, d)

  Index64 tokens() const { return index_keys.empty() ? 0 : index_keys.dim(0); }
  Index64 dim() const { return index_keys.empty() ? 0 : index_keys.dim(1); }
  Index64 steps() const { return index_queries.empty() ? 0 : index_queries.dim(0); }
  Index64 index_heads() const { return index_queries.empty() ? 0 : index_queries.dim(1); }
  bool has_attention() const { return !attn_keys.empty(); }
  std::size_t input_bytes() const {
    return index_keys.bytes() + index_queries.bytes() + head_weights.bytes() + attn_keys.bytes() +
           attn_queries.bytes() + values.bytes();
  }
};

// Checks shapes and finiteness; throws ip::Error naming the array and the problem. `what` prefixes
// messages (e.g. the file a workload came from).
void validate_workload(const Workload& w, const std::string& what = "workload");

// The dials of the synthetic generator. Keys live in a D-dimensional latent space with N(0,1) noise.
struct WorkloadSpec {
  Index64 tokens = 65536;  // T (of the longest request)
  int dim = 128;           // D, index key dimension
  int index_heads = 8;     // H
  int attn_dim = 128;      // Da (0: no attention keys, values or queries)
  int attn_heads = 4;      // Ha, sharing keys and values (MQA)
  int value_dim = 128;     // Dv
  int steps = 16;          // Q decode queries
  int requests = 1;        // B concurrent requests, each with its own context
  double length_spread = 0.0;  // request b has T * (1 - spread * u_b) tokens, u_b uniform in [0, 1)

  int topics = 64;              // topic clusters
  double topic_run = 48.0;      // mean length (tokens) of a run of one topic
  double topic_weight = 0.7;    // rho: key = rho * centre + sqrt(1 - rho^2) * noise
  double sharpness = 1.0;       // beta: query scale; on-topic logit gain is about beta * rho * sqrt(D)
  double head_noise = 0.5;      // per-head deviation of the index query heads
  double query_drift = 0.2;     // per-step random-walk step of the query (relative to its norm)
  double jump_prob = 0.1;       // probability that a step jumps to another topic
  int needles = 4;              // planted single tokens with their own direction
  double needle_strength = 1.5; // needle key = strength * direction + noise
  double needle_query_prob = 0.15;  // probability that a step looks for a needle
  int sinks = 4;                // attention sinks at the start of the context
  double sink_strength = 1.0;   // sink key along a direction that every query shares
  double image_fraction = 0.0;  // share of tokens in image-patch spans (multimodal case)
  int image_side = 32;          // patches per side of an image span (span = side^2 tokens)
  double attn_noise = 0.3;      // attention keys = latent + noise (index and attention agree partly)
  double gate_decay = 0.9;      // median gate of the local linear branch, in (0, 1]
  double gate_spread = 0.5;     // log-scale spread of the gates (0: every gate = gate_decay)
  int append_per_step = 0;      // growing context: each request gets tokens + steps * append_per_step tokens
  std::uint64_t seed = 0;
};

void validate_spec(const WorkloadSpec& s);

// The local branch's gates of request b: workload.gate_decay and gate_spread, seeded from (seed, b).
// generate_request uses them, and the runner gives them to imported workloads.
GateParams gate_params(const WorkloadSpec& spec, int request);

// Request b of the spec (0 <= b < requests). Deterministic: the same spec, b and seed give the same
// bits whatever the thread count.
Workload generate_request(const WorkloadSpec& spec, int request);

// Context length of request b.
Index64 request_tokens(const WorkloadSpec& spec, int request);

}  // namespace ip
