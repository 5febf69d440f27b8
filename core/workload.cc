#include "core/workload.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "core/parallel.h"
#include "core/rng.h"

namespace ip {
namespace {

// Independent random streams of one request.
enum Stream : std::uint64_t {
  kTopic = 1, kSink, kNeedleDir, kNeedlePos, kLayout, kToken, kAttn, kValue, kQuery, kHead, kImage, kProj, kLength, kGate
};

void fill_normal(Rng& rng, float* x, int n, double scale = 1.0) {
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(scale * rng.normal());
}

struct Layout {
  std::vector<TokenKind> kind;
  std::vector<std::int32_t> topic;  // topic id (text), image span id (image), needle id (needle)
  std::vector<std::int32_t> px, py; // patch coordinates of image tokens
  std::int32_t images = 0;
};

Layout make_layout(const WorkloadSpec& s, Index64 T, std::uint64_t base) {
  Layout L;
  L.kind.assign(T, TokenKind::text);
  L.topic.assign(T, 0);
  L.px.assign(T, 0);
  L.py.assign(T, 0);
  Rng rng(hash_key(base, kLayout));
  const Index64 span = static_cast<Index64>(s.image_side) * s.image_side;
  const double f = s.image_fraction;
  // Probability that a new span is an image, so that images cover about `f` of the tokens.
  const double p_img = f <= 0.0 ? 0.0 : f >= 1.0 ? 1.0 : f * s.topic_run / (span * (1.0 - f) + f * s.topic_run);
  Index64 t = std::min<Index64>(s.sinks, T);
  for (Index64 i = 0; i < t; ++i) L.kind[i] = TokenKind::sink;
  while (t < T) {
    if (p_img > 0.0 && rng.uniform() < p_img) {
      const Index64 n = std::min(span, T - t);
      for (Index64 i = 0; i < n; ++i) {
        L.kind[t + i] = TokenKind::image;
        L.topic[t + i] = L.images;
        L.px[t + i] = static_cast<std::int32_t>(i % s.image_side);
        L.py[t + i] = static_cast<std::int32_t>(i / s.image_side);
      }
      ++L.images;
      t += n;
    } else {
      const double u = std::max(rng.uniform(), 1e-12);
      const Index64 n = std::min<Index64>(T - t, std::max<Index64>(1, std::llround(-std::log(u) * s.topic_run)));
      const auto z = static_cast<std::int32_t>(rng.below(s.topics));
      for (Index64 i = 0; i < n; ++i) L.topic[t + i] = z;
      t += n;
    }
  }
  Rng prng(hash_key(base, kNeedlePos));
  const Index64 free = T - std::min<Index64>(s.sinks, T);
  for (int n = 0; n < s.needles && n < free; ++n) {
    Index64 pos;
    do {  // each needle gets its own token: redraw on a collision (same draws as before when none occurs)
      pos = std::min<Index64>(s.sinks, T) + static_cast<Index64>(prng.below(free));
    } while (L.kind[pos] == TokenKind::needle);
    L.kind[pos] = TokenKind::needle;
    L.topic[pos] = n;
  }
  return L;
}

std::vector<float> directions(std::uint64_t base, Stream stream, int count, int D) {
  std::vector<float> v(static_cast<std::size_t>(count) * D);
  for (int i = 0; i < count; ++i) {
    Rng rng(hash_key(base, stream, i));
    fill_normal(rng, v.data() + static_cast<std::size_t>(i) * D, D);
  }
  return v;
}

}  // namespace

void validate_spec(const WorkloadSpec& s) {
  IP_REQUIRE(s.tokens >= 1, "workload.tokens = {} (the context must not be empty)", s.tokens);
  IP_REQUIRE(s.tokens <= INT32_MAX, "workload.tokens = {} exceeds the 32-bit id range", s.tokens);
  IP_REQUIRE(s.dim >= 1, "workload.dim = {} (must be >= 1)", s.dim);
  IP_REQUIRE(s.index_heads >= 1, "workload.index_heads = {} (must be >= 1)", s.index_heads);
  IP_REQUIRE(s.attn_dim >= 0, "workload.attn_dim = {} (must be >= 0)", s.attn_dim);
  IP_REQUIRE(s.attn_dim == 0 || (s.attn_heads >= 1 && s.value_dim >= 1),
             "workload.attn_dim > 0 (attention) needs workload.attn_heads >= 1 and workload.value_dim >= 1");
  IP_REQUIRE(s.steps >= 1, "workload.steps = {} (must be >= 1)", s.steps);
  IP_REQUIRE(s.requests >= 1, "workload.requests = {} (must be >= 1)", s.requests);
  IP_REQUIRE(s.length_spread >= 0.0 && s.length_spread < 1.0, "workload.length_spread = {} outside [0, 1)",
             s.length_spread);
  IP_REQUIRE(s.topics >= 1, "workload.topics = {} (must be >= 1)", s.topics);
  IP_REQUIRE(s.topic_run >= 1.0, "workload.topic_run = {} (must be >= 1)", s.topic_run);
  IP_REQUIRE(s.topic_weight >= 0.0 && s.topic_weight <= 1.0, "workload.topic_weight = {} outside [0, 1]",
             s.topic_weight);
  for (auto [p, key] : {std::pair{s.jump_prob, "jump_prob"}, std::pair{s.needle_query_prob, "needle_query_prob"},
                        std::pair{s.image_fraction, "image_fraction"}})
    IP_REQUIRE(p >= 0.0 && p <= 1.0, "workload.{} = {}: probability outside [0, 1]", key, p);
  IP_REQUIRE(s.needles >= 0 && s.sinks >= 0, "workload.needles = {} and workload.sinks = {} must be >= 0", s.needles,
             s.sinks);
  IP_REQUIRE(s.needles <= s.tokens, "workload.needles = {} exceeds workload.tokens = {}: each needle takes a token of "
             "its own (after the sinks: a request shorter than workload.sinks + workload.needles plants fewer)",
             s.needles, s.tokens);
  IP_REQUIRE(s.image_side >= 1, "workload.image_side = {} (must be >= 1)", s.image_side);
  IP_REQUIRE(s.gate_decay > 0.0 && s.gate_decay <= 1.0, "workload.gate_decay = {} outside (0, 1]", s.gate_decay);
  IP_REQUIRE(std::isfinite(s.gate_spread) && s.gate_spread >= 0.0 && s.gate_spread <= 10.0,
             "workload.gate_spread = {} outside [0, 10]", s.gate_spread);
  IP_REQUIRE(s.append_per_step >= 0, "workload.append_per_step = {} (must be >= 0)", s.append_per_step);
  IP_REQUIRE(s.tokens + static_cast<Index64>(s.steps) * s.append_per_step <= INT32_MAX,
             "workload.tokens + workload.steps * workload.append_per_step exceeds the 32-bit id range");
  for (auto [x, key] : {std::pair{s.sharpness, "sharpness"}, std::pair{s.head_noise, "head_noise"},
                        std::pair{s.query_drift, "query_drift"}, std::pair{s.needle_strength, "needle_strength"},
                        std::pair{s.sink_strength, "sink_strength"}, std::pair{s.attn_noise, "attn_noise"}})
    IP_REQUIRE(std::isfinite(x) && x >= 0.0, "workload.{} = {} (must be finite, >= 0)", key, x);
}

Index64 request_tokens(const WorkloadSpec& s, int request) {
  if (s.length_spread == 0.0) return s.tokens;
  Rng rng(hash_key(s.seed, kLength, static_cast<std::uint64_t>(request)));
  const double u = rng.uniform();
  return std::max<Index64>(1, s.tokens - static_cast<Index64>(std::floor(s.length_spread * u * s.tokens)));
}

GateParams gate_params(const WorkloadSpec& s, int request) {
  const std::uint64_t base = hash_key(s.seed, 0xB10C, static_cast<std::uint64_t>(request));
  return GateParams{static_cast<float>(s.gate_decay), static_cast<float>(s.gate_spread), hash_key(base, kGate)};
}

Workload generate_request(const WorkloadSpec& s, int request) {
  validate_spec(s);
  IP_REQUIRE(request >= 0 && request < s.requests, "workload: request {} outside [0, {})", request, s.requests);
  const std::uint64_t base = hash_key(s.seed, 0xB10C, static_cast<std::uint64_t>(request));
  // A growing context: the decode steps append steps * append_per_step tokens to the prompt.
  const Index64 T = request_tokens(s, request) + static_cast<Index64>(s.steps) * s.append_per_step;
  const int D = s.dim, H = s.index_heads, Q = s.steps;
  const Layout L = make_layout(s, T, base);

  const auto topic = directions(base, kTopic, s.topics, D);
  const auto sink = directions(base, kSink, 1, D);
  // Needles planted: one token each after the sinks (fewer than workload.needles in a request shortened by
  // workload.length_spread). Queries aim only at planted ones.
  const int planted = static_cast<int>(std::min<Index64>(s.needles, T - std::min<Index64>(s.sinks, T)));
  const auto needle = directions(base, kNeedleDir, std::max(1, planted), D);
  constexpr int kModes = 4;  // smooth spatial modes per image
  const auto image = directions(base, kImage, std::max(1, L.images) * (1 + kModes), D);

  Workload w;
  w.kind = L.kind;
  w.gates = gate_params(s, request);
  w.index_keys.reshape({T, D});
  const double rho = s.topic_weight, sig = std::sqrt(1.0 - rho * rho);
  parallel_for(T, 4096, [&](Index64 b, Index64 e) {
    std::vector<float> eps(D);
    for (Index64 t = b; t < e; ++t) {
      Rng rng(hash_key(base, kToken, static_cast<std::uint64_t>(t)));
      fill_normal(rng, eps.data(), D);
      float* x = w.index_keys.data() + t * D;
      const int z = L.topic[t];
      switch (L.kind[t]) {
        case TokenKind::text:
          for (int d = 0; d < D; ++d) x[d] = static_cast<float>(rho * topic[z * D + d] + sig * eps[d]);
          break;
        case TokenKind::image: {
          // A smooth field over the patch grid: neighbouring patches have nearly equal keys.
          const float* img = image.data() + static_cast<std::size_t>(z) * (1 + kModes) * D;
          for (int d = 0; d < D; ++d) x[d] = static_cast<float>(rho * img[d] + sig * 0.3 * eps[d]);
          for (int m = 0; m < kModes; ++m) {
            const double fx = (m % 2) + 1, fy = (m / 2) + 1, ph = 0.7 * m;
            const double c = std::cos(2 * std::numbers::pi * (fx * L.px[t] + fy * L.py[t]) / s.image_side + ph);
            const float* v = img + (1 + m) * D;
            for (int d = 0; d < D; ++d) x[d] += static_cast<float>(sig * 0.68 * c * v[d]);
          }
          break;
        }
        case TokenKind::sink:
          for (int d = 0; d < D; ++d) x[d] = static_cast<float>(s.sink_strength * sink[d] + 0.3 * eps[d]);
          break;
        case TokenKind::needle:
          for (int d = 0; d < D; ++d) x[d] = static_cast<float>(s.needle_strength * needle[z * D + d] + 0.3 * eps[d]);
          break;
      }
    }
  });

  // Decode queries: a latent u per step that drifts and sometimes jumps to another topic or a needle.
  std::vector<float> u(static_cast<std::size_t>(Q) * D);
  {
    Rng rng(hash_key(base, kQuery));
    std::vector<float> drift(D, 0.0f);
    const float* focus = topic.data();
    for (int q = 0; q < Q; ++q) {
      if (q == 0 || rng.uniform() < s.jump_prob) {
        std::fill(drift.begin(), drift.end(), 0.0f);
        if (planted > 0 && rng.uniform() < s.needle_query_prob)
          focus = needle.data() + rng.below(planted) * D;
        else
          focus = topic.data() + rng.below(s.topics) * D;
      } else {
        for (int d = 0; d < D; ++d) drift[d] += static_cast<float>(s.query_drift * rng.normal());
      }
      for (int d = 0; d < D; ++d) u[q * D + d] = focus[d] + drift[d] + sink[d];
    }
  }
  w.index_queries.reshape({Q, H, D});
  w.head_weights.reshape({Q, H});
  const double qscale = s.sharpness / std::sqrt(static_cast<double>(D));
  for (int q = 0; q < Q; ++q) {
    Rng rng(hash_key(base, kHead, static_cast<std::uint64_t>(q)));
    for (int j = 0; j < H; ++j) {
      float* qh = w.index_queries.data() + (static_cast<Index64>(q) * H + j) * D;
      for (int d = 0; d < D; ++d) qh[d] = static_cast<float>(qscale * (u[q * D + d] + s.head_noise * rng.normal()));
      w.head_weights.data()[q * H + j] = static_cast<float>(std::exp(0.5 * rng.normal()) / H);
    }
  }

  if (s.attn_dim > 0) {
    const int Da = s.attn_dim, Ha = s.attn_heads, Dv = s.value_dim;
    // Attention space = latent space when Da == D, else a fixed random projection (norm-preserving on average).
    std::vector<float> P;
    if (Da != D) P = directions(base, kProj, Da, D);
    const float pscale = 1.0f / std::sqrt(static_cast<float>(D));
    auto project = [&](const float* x, float* y) {
      if (P.empty()) {
        std::copy(x, x + D, y);
        return;
      }
      for (int a = 0; a < Da; ++a) {
        float acc = 0.0f;
        for (int d = 0; d < D; ++d) acc += P[static_cast<std::size_t>(a) * D + d] * x[d];
        y[a] = acc * pscale;
      }
    };
    w.attn_keys.reshape({T, Da});
    w.values.reshape({T, Dv});
    const auto vcentre = directions(base, kValue, s.topics, Dv);
    parallel_for(T, 4096, [&](Index64 b, Index64 e) {
      for (Index64 t = b; t < e; ++t) {
        float* a = w.attn_keys.data() + t * Da;
        project(w.index_keys.data() + t * D, a);
        Rng rng(hash_key(base, kAttn, static_cast<std::uint64_t>(t)));
        for (int i = 0; i < Da; ++i) a[i] += static_cast<float>(s.attn_noise * rng.normal());
        float* v = w.values.data() + t * Dv;
        const float* vc = vcentre.data() + static_cast<std::size_t>(L.kind[t] == TokenKind::text ? L.topic[t] : 0) * Dv;
        for (int i = 0; i < Dv; ++i) v[i] = static_cast<float>(0.8 * vc[i] + 0.6 * rng.normal());
      }
    });
    w.attn_queries.reshape({Q, Ha, Da});
    const double ascale = s.sharpness;  // logits are divided by sqrt(Da) in attention
    for (int q = 0; q < Q; ++q) {
      std::vector<float> pu(Da);
      project(u.data() + static_cast<std::size_t>(q) * D, pu.data());
      Rng rng(hash_key(base, kHead, static_cast<std::uint64_t>(q), 1));
      for (int h = 0; h < Ha; ++h) {
        float* qa = w.attn_queries.data() + (static_cast<Index64>(q) * Ha + h) * Da;
        for (int i = 0; i < Da; ++i) qa[i] = static_cast<float>(ascale * (pu[i] + 0.2 * rng.normal()));
      }
    }
  }
  return w;
}

void validate_workload(const Workload& w, const std::string& what) {
  auto finite = [&](const Tensor<float>& t, const char* name) {
    for (Index64 i = 0; i < t.size(); ++i)
      IP_REQUIRE(std::isfinite(t.data()[i]), "{}: {} contains NaN or infinity (flat element {})", what, name, i);
  };
  IP_REQUIRE(w.index_keys.rank() == 2, "{}: index_keys must have rank 2 [T, D], has rank {}", what, w.index_keys.rank());
  const Index64 T = w.index_keys.dim(0), D = w.index_keys.dim(1);
  IP_REQUIRE(T >= 1, "{}: empty context (index_keys has 0 tokens)", what);
  IP_REQUIRE(D >= 1, "{}: index_keys has dimension 0", what);
  IP_REQUIRE(w.index_queries.rank() == 3, "{}: index_queries must have rank 3 [Q, H, D], has rank {}", what,
             w.index_queries.rank());
  IP_REQUIRE(w.index_queries.dim(2) == D, "{}: index_queries has D = {}, index_keys has D = {}", what,
             w.index_queries.dim(2), D);
  const Index64 Q = w.index_queries.dim(0), H = w.index_queries.dim(1);
  IP_REQUIRE(Q >= 1 && H >= 1, "{}: index_queries has shape [{}, {}, {}] (needs Q, H >= 1)", what, Q, H, D);
  IP_REQUIRE(w.head_weights.rank() == 2 && w.head_weights.dim(0) == Q && w.head_weights.dim(1) == H,
             "{}: head_weights must have shape [{}, {}]", what, Q, H);
  finite(w.index_keys, "index_keys");
  finite(w.index_queries, "index_queries");
  finite(w.head_weights, "head_weights");
  for (Index64 i = 0; i < w.head_weights.size(); ++i)
    IP_REQUIRE(w.head_weights.data()[i] >= 0.0f, "{}: head_weights has a negative entry ({})", what,
               w.head_weights.data()[i]);
  if (w.has_attention()) {
    IP_REQUIRE(w.attn_keys.rank() == 2 && w.attn_keys.dim(0) == T, "{}: attn_keys must have shape [{}, Da]", what, T);
    IP_REQUIRE(w.values.rank() == 2 && w.values.dim(0) == T, "{}: values must have shape [{}, Dv]", what, T);
    IP_REQUIRE(w.attn_queries.rank() == 3 && w.attn_queries.dim(0) == Q && w.attn_queries.dim(2) == w.attn_keys.dim(1),
               "{}: attn_queries must have shape [{}, Ha, {}]", what, Q, w.attn_keys.dim(1));
    finite(w.attn_keys, "attn_keys");
    finite(w.values, "values");
    finite(w.attn_queries, "attn_queries");
  }
  IP_REQUIRE(w.kind.empty() || static_cast<Index64>(w.kind.size()) == T, "{}: token kinds cover {} of {} tokens", what,
             w.kind.size(), T);
}

}  // namespace ip
