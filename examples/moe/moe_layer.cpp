// vigil MoE example: one mixture-of-experts layer with expert parallelism.
// Start with `vigil-run -n 4 vigil-example-moe`.
//
// Every rank owns a batch of tokens. A router picks the top-2 of 6 routed
// experts for each token; the routed experts live on ranks 1..3 (two each) and
// one shared expert, which every token also goes through, lives on rank 0:
//
//   1. route    each rank scores its own tokens: logits -> softmax -> top-k ids and weights
//   2. dispatch vigilMoeDispatch sends every token to the ranks holding its experts
//   3. experts  each rank runs its experts on the rows it received, grouped by local expert
//   4. combine  vigilMoeCombine sends the outputs back; each token gets
//               out[t] = w[t,0] * expert0(x[t]) + w[t,1] * expert1(x[t]) + shared(x[t])
//
// Each rank then computes the same layer for its own tokens without any
// communication and checks that the two agree (bit for bit: combine adds in
// float32 in slot order, then the shared expert, and so does the check).

#include <vigil/vigil.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

// Every vigil call returns a vigilResult_t; on failure vigilGetLastError(c) says what went wrong and how to fix it.
#define CHECK_AT(c, call)                                                                                   \
  do {                                                                                                      \
    vigilResult_t rc_ = (call);                                                                             \
    if (rc_ != vigilSuccess) {                                                                              \
      std::fprintf(stderr, "%s failed: %s\n  %s\n", #call, vigilGetErrorString(rc_), vigilGetLastError(c)); \
      return 1;                                                                                             \
    }                                                                                                       \
  } while (0)
#define CHECK(call) CHECK_AT(comm, call)
// Calls without a communicator (and vigilCommDestroy) leave their error as the thread's: vigilGetLastError(NULL).
#define CHECK_LOCAL(call) CHECK_AT(nullptr, call)

namespace {

constexpr int kHidden = 32;      // H: width of a token
constexpr int kExperts = 6;      // E: routed experts, spread over ranks 1..W-1
constexpr int kTopK = 2;         // K: routed experts per token
constexpr int kSharedRanks = 1;  // ranks [0, 1) hold the shared expert
constexpr int kMaxTokens = 16;   // upper bound of tokens per rank, the same on every rank

// Deterministic numbers in [-1, 1) (splitmix64): the same on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  float Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / static_cast<float>(1 << 23) - 1.0f;  // 24 random bits
  }
  std::vector<float> Fill(size_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = scale * Next();
    return v;
  }

 private:
  uint64_t state_;
};

// The layer's weights. Fixed seeds: every rank builds the same model.
struct Model {
  std::vector<float> router = Rng(1).Fill(kHidden * kExperts, 1.0f);  // [H, E]
  std::vector<float> experts = Rng(2).Fill(static_cast<size_t>(kExperts) * kHidden * kHidden,
                                           1.0f / std::sqrt(static_cast<float>(kHidden)));  // [E, H, H]
  std::vector<float> shared = Rng(3).Fill(kHidden * kHidden, 1.0f / std::sqrt(static_cast<float>(kHidden)));  // [H, H]
};

// y = W x for one token (W is [H, H], row-major).
void MatVec(const float* w, const float* x, float* y) {
  for (int i = 0; i < kHidden; ++i) {
    float sum = 0.0f;
    for (int j = 0; j < kHidden; ++j) sum += w[i * kHidden + j] * x[j];
    y[i] = sum;
  }
}

// Routed expert e: ReLU(W_e x).
void RoutedExpert(const Model& m, int e, const float* x, float* y) {
  MatVec(&m.experts[static_cast<size_t>(e) * kHidden * kHidden], x, y);
  for (int i = 0; i < kHidden; ++i) y[i] = std::max(y[i], 0.0f);
}

// Shared expert: tanh(W_s x).
void SharedExpert(const Model& m, const float* x, float* y) {
  MatVec(m.shared.data(), x, y);
  for (int i = 0; i < kHidden; ++i) y[i] = std::tanh(y[i]);
}

// Router: logits = x R, softmax, the K most likely experts (ties: lower id),
// their probabilities renormalised to sum to 1.
void Route(const Model& m, const float* x, int32_t* ids, float* weights) {
  float prob[kExperts];
  float max_logit = -INFINITY;
  for (int e = 0; e < kExperts; ++e) {
    prob[e] = 0.0f;
    for (int h = 0; h < kHidden; ++h) prob[e] += x[h] * m.router[h * kExperts + e];
    max_logit = std::max(max_logit, prob[e]);
  }
  for (float& p : prob) p = std::exp(p - max_logit);  // the softmax's denominator cancels below
  int order[kExperts];
  for (int e = 0; e < kExperts; ++e) order[e] = e;
  std::stable_sort(order, order + kExperts, [&](int a, int b) { return prob[a] > prob[b]; });
  float total = 0.0f;
  for (int k = 0; k < kTopK; ++k) total += prob[order[k]];
  for (int k = 0; k < kTopK; ++k) {
    ids[k] = order[k];
    weights[k] = prob[order[k]] / total;
  }
}

}  // namespace

int main() {
  vigilComm_t comm = nullptr;
  CHECK(vigilCommInitFromEnv(&comm));
  int rank = 0, world = 0;
  CHECK(vigilCommUserRank(comm, &rank));
  CHECK(vigilCommCount(comm, &world));
  if (world <= kSharedRanks || kExperts % (world - kSharedRanks) != 0) {
    std::fprintf(stderr, "run with 2, 3, 4 or 7 ranks: %d routed experts over %d ranks\n", kExperts,
                 world - kSharedRanks);
    return 2;
  }
  const Model model;
  const int routed_per_rank = kExperts / (world - kSharedRanks);        // L on ranks 1..W-1
  const int local_experts = rank < kSharedRanks ? 1 : routed_per_rank;  // a shared-expert rank has L = 1
  auto global_expert = [&](int j) { return (rank - kSharedRanks) * routed_per_rank + j; };  // local j on a routed rank

  // This rank's tokens: a different count and different values on every rank.
  const int64_t bs = 6 + (7 * rank + 2) % 11;
  const std::vector<float> x = Rng(100 + static_cast<uint64_t>(rank)).Fill(static_cast<size_t>(bs) * kHidden, 1.0f);

  // 1. Route: K expert ids and weights per token.
  std::vector<int32_t> ids(static_cast<size_t>(bs) * kTopK);
  std::vector<float> weights(static_cast<size_t>(bs) * kTopK);
  for (int64_t t = 0; t < bs; ++t) Route(model, &x[t * kHidden], &ids[t * kTopK], &weights[t * kTopK]);

  // 2. Dispatch. The configuration must be the same on every rank (except epRankId).
  vigilMoeConfig cfg = {};
  cfg.size = sizeof(cfg);
  cfg.epWorldSize = world;
  cfg.epRankId = rank;
  cfg.moeExpertNum = kExperts;
  cfg.sharedExpertNum = 1;
  cfg.sharedExpertRankNum = kSharedRanks;
  cfg.hidden = kHidden;
  cfg.topK = kTopK;
  cfg.maxTokensPerRank = kMaxTokens;
  cfg.quantMode = vigilMoeQuantNone;                       // rows travel as float32
  cfg.expertTokenNumsType = vigilMoeExpertTokenNumsCount;  // expertTokenNums[j] = rows for local expert j

  // expandX must hold the most rows this rank can receive.
  const int64_t capacity = vigilMoeRequiredRows(&cfg, rank);
  if (capacity < 0) {
    std::fprintf(stderr, "vigilMoeRequiredRows refused the configuration\n");
    return 1;
  }
  std::vector<float> expand_x(static_cast<size_t>(capacity) * kHidden);
  std::vector<int64_t> expert_token_nums(static_cast<size_t>(local_experts));
  std::vector<int32_t> ep_recv_counts(static_cast<size_t>(world) * local_experts);
  int64_t recv_rows = 0;

  vigilMoeDispatchArgs dispatch = {};
  dispatch.x = x.data();
  dispatch.xType = vigilFloat32;
  dispatch.bs = bs;
  dispatch.expertIds = ids.data();
  dispatch.expertScales = nullptr;  // the weights are applied by combine
  dispatch.expandX = expand_x.data();
  dispatch.expandXRows = capacity;
  dispatch.expertTokenNums = expert_token_nums.data();
  dispatch.epRecvCounts = ep_recv_counts.data();
  dispatch.recvRows = &recv_rows;

  size_t dispatch_bytes = 0;
  CHECK(vigilMoeDispatchGetWorkspaceSize(&cfg, &dispatch, comm, &dispatch_bytes));
  std::vector<uint8_t> dispatch_ws(dispatch_bytes);
  vigilMoeHandle_t handle = nullptr;  // remembers where every row came from, for combine
  CHECK(vigilMoeDispatch(&cfg, &dispatch, dispatch_ws.data(), dispatch_ws.size(), &handle, comm, nullptr));

  // 3. Run the local experts. expandX holds the received rows grouped by local
  // expert j: expertTokenNums[j] rows for j = 0, then for j = 1, ...
  // On rank 0 they all belong to the shared expert; on rank r >= 1, local
  // expert j is the global routed expert (r - 1) * L + j.
  std::vector<float> expert_out(static_cast<size_t>(recv_rows) * kHidden);
  int64_t row = 0;
  for (int j = 0; j < local_experts; ++j) {
    for (int64_t i = 0; i < expert_token_nums[j]; ++i, ++row) {
      const float* in = &expand_x[row * kHidden];
      float* out = &expert_out[row * kHidden];
      if (rank < kSharedRanks) {
        SharedExpert(model, in, out);
      } else {
        RoutedExpert(model, global_expert(j), in, out);
      }
    }
  }

  // 4. Combine: the outputs go back to the tokens' ranks and are summed per
  // token, routed slots weighted by expertScales, the shared expert's row added.
  std::vector<float> y(static_cast<size_t>(bs) * kHidden);
  vigilMoeCombineArgs combine = {};
  combine.expandX = expert_out.data();
  combine.xType = vigilFloat32;
  combine.expertScales = weights.data();
  combine.sharedExpertX = nullptr;  // the shared expert already ran on rank 0
  combine.out = y.data();
  size_t combine_bytes = 0;
  CHECK(vigilMoeCombineGetWorkspaceSize(&cfg, handle, comm, &combine_bytes));
  std::vector<uint8_t> combine_ws(combine_bytes);
  CHECK(vigilMoeCombine(&cfg, handle, &combine, combine_ws.data(), combine_ws.size(), comm, nullptr));
  CHECK_LOCAL(vigilMoeHandleDestroy(handle));

  // The check: the same layer on this rank alone, summed in combine's order.
  float max_diff = 0.0f, max_ref = 0.0f;
  std::vector<float> expert_y(kHidden);
  for (int64_t t = 0; t < bs; ++t) {
    float acc[kHidden] = {};
    for (int k = 0; k < kTopK; ++k) {
      RoutedExpert(model, ids[t * kTopK + k], &x[t * kHidden], expert_y.data());
      for (int i = 0; i < kHidden; ++i) acc[i] += weights[t * kTopK + k] * expert_y[i];
    }
    SharedExpert(model, &x[t * kHidden], expert_y.data());
    for (int i = 0; i < kHidden; ++i) {
      acc[i] += expert_y[i];
      const float diff = std::fabs(y[t * kHidden + i] - acc[i]);
      max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);  // a NaN counts as an infinite difference
      max_ref = std::max(max_ref, std::fabs(acc[i]));
    }
  }
  std::string received;  // rows per local expert, e.g. "expert 2: 9 rows, expert 3: 12 rows"
  for (int j = 0; j < local_experts; ++j) {
    const std::string name = rank < kSharedRanks ? "shared expert" : "expert " + std::to_string(global_expert(j));
    received += (j ? ", " : "") + name + ": " + std::to_string(expert_token_nums[j]) + " rows";
  }
  std::printf("rank %d: %lld tokens, received %s, max |distributed - single rank| = %g\n", rank,
              static_cast<long long>(bs), received.c_str(), static_cast<double>(max_diff));

  // Every rank learns the largest difference relative to its outputs' scale, and the token total.
  float worst[2] = {max_diff, max_diff / std::max(max_ref, 1e-30f)};
  CHECK(vigilAllReduce(worst, worst, 2, vigilFloat32, vigilMax, comm, nullptr));
  int64_t tokens = bs;
  CHECK(vigilAllReduce(&tokens, &tokens, 1, vigilInt64, vigilSum, comm, nullptr));
  const bool ok = worst[1] <= 1e-6f;
  if (rank == 0) {
    const char* verdict = worst[0] == 0.0f ? "bit-exact" : ok ? "within 1e-6 relative" : "WRONG";
    std::printf("moe layer: %d ranks, %lld tokens, max |distributed - single rank| = %g (%s)\n", world,
                static_cast<long long>(tokens), static_cast<double>(worst[0]), verdict);
  }
  std::fflush(stdout);
  CHECK(vigilCommFinalize(comm));
  CHECK_LOCAL(vigilCommDestroy(comm));
  return ok ? 0 : 1;
}
