#include "core/weights.h"

#include "core/error.h"

namespace ip {

std::string_view to_string(Weighting w) {
  switch (w) {
    case Weighting::uniform: return "uniform";
    case Weighting::positional: return "positional";
    case Weighting::cosine: return "cosine";
    case Weighting::tfidf: return "tfidf";
    case Weighting::hybrid: return "hybrid";
    case Weighting::maxmin: return "maxmin";
    case Weighting::exact: return "exact";
  }
  return "?";
}

Weighting parse_weighting(std::string_view s) {
  for (Weighting w : {Weighting::uniform, Weighting::positional, Weighting::cosine, Weighting::tfidf,
                      Weighting::hybrid, Weighting::maxmin, Weighting::exact})
    if (s == to_string(w)) return w;
  throw Error(fmt::format(
      "unknown weighting '{}' (expected uniform, positional, cosine, tfidf, hybrid, maxmin or exact)", s));
}

std::string_view to_string(CosineReference r) { return r == CosineReference::query ? "query" : "group_mean"; }

CosineReference parse_cosine_reference(std::string_view s) {
  if (s == "group_mean" || s == "mean") return CosineReference::group_mean;
  if (s == "query") return CosineReference::query;
  throw Error(fmt::format("unknown cosine reference '{}' (expected group_mean or query)", s));
}

}  // namespace ip
