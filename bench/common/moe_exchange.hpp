#pragma once
// The MoE workload of the benchmarks, and the dispatch/combine exchange
// written the usual way over a plain all-to-all-v: pack rows per
// destination, exchange counts, exchange rows into a staging buffer, then
// scatter them into the (local expert, source rank, token) layout; combine
// packs the expert outputs per source, exchanges them back and sums per
// token. vigil-perf runs it over vigilAllToAllV, bench/peers/mpi_moe.cpp over
// MPI_Alltoallv: the baselines of vigil's own dispatch and combine, doing
// the same work (float32 rows, routed experts only).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace moebench {

struct Shape {
  int W = 2, rank = 0;
  int64_t tokens = 256;  // per rank
  int64_t hidden = 1024;
  int64_t topK = 8;
  int64_t experts = 64;  // routed, a multiple of W
  int64_t local() const { return experts / W; }
  size_t rowBytes() const { return static_cast<size_t>(hidden) * sizeof(float); }
  int64_t selections() const { return tokens * topK; }  // rows this rank sends
};

// topK distinct experts per token (partial Fisher-Yates from a seeded LCG),
// weights 1/topK; x[t][h] from the same generator. The same on every run.
inline void makeWorkload(const Shape& s, std::vector<int32_t>& ids, std::vector<float>& weights,
                         std::vector<float>& x) {
  uint64_t state = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(s.rank + 1);
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  };
  ids.resize(static_cast<size_t>(s.tokens * s.topK));
  weights.assign(ids.size(), 1.0f / static_cast<float>(s.topK));
  std::vector<int32_t> perm(static_cast<size_t>(s.experts));
  for (int64_t t = 0; t < s.tokens; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t k = 0; k < s.topK; ++k) {
      const auto j = static_cast<size_t>(k + next() % static_cast<uint32_t>(s.experts - k));
      std::swap(perm[static_cast<size_t>(k)], perm[j]);
      ids[static_cast<size_t>(t * s.topK + k)] = perm[static_cast<size_t>(k)];
    }
  }
  x.resize(static_cast<size_t>(s.tokens * s.hidden));
  for (float& v : x) v = static_cast<float>(next() % 2001) / 1000.0f - 1.0f;
}

// AllToAllV: void(const void* send, const size_t* sendBytes, const size_t* sendDispls,
//                 void* recv, const size_t* recvBytes, const size_t* recvDispls), all in bytes.
class Baseline {
 public:
  explicit Baseline(const Shape& s) : s_(s) {}

  // Returns the rows received; expandX holds them in the (local expert, source, token) layout.
  template <class AllToAllV>
  int64_t dispatch(const float* x, const int32_t* ids, float* expandX, AllToAllV&& a2av) {
    const int W = s_.W;
    const int64_t L = s_.local(), K = s_.topK;
    const size_t row = s_.rowBytes();
    sendCount_.assign(static_cast<size_t>(W * L), 0);
    recvCount_.assign(static_cast<size_t>(W * L), 0);
    for (int64_t i = 0; i < s_.tokens * K; ++i) ++sendCount_[static_cast<size_t>(ids[i])];  // expert e = d*L + j
    // Counts: L per peer.
    std::vector<size_t> cb(static_cast<size_t>(W), static_cast<size_t>(L) * 8), cd(static_cast<size_t>(W));
    for (int d = 0; d < W; ++d) cd[static_cast<size_t>(d)] = static_cast<size_t>(d * L) * 8;
    a2av(sendCount_.data(), cb.data(), cd.data(), recvCount_.data(), cb.data(), cd.data());
    // Pack: per destination, in (local expert, token) order.
    std::vector<int64_t> next(static_cast<size_t>(W * L));
    std::exclusive_scan(sendCount_.begin(), sendCount_.end(), next.begin(), int64_t{0});
    sendBuf_.resize(static_cast<size_t>(s_.selections()) * row);
    rowOf_.resize(static_cast<size_t>(s_.selections()));
    for (int64_t t = 0; t < s_.tokens; ++t) {
      for (int64_t k = 0; k < K; ++k) {
        const int64_t pos = next[static_cast<size_t>(ids[t * K + k])]++;
        rowOf_[static_cast<size_t>(t * K + k)] = pos;
        std::memcpy(sendBuf_.data() + static_cast<size_t>(pos) * row, x + t * s_.hidden, row);
      }
    }
    // Rows: one block per peer, into staging.
    sb_.assign(static_cast<size_t>(W), 0);
    rb_.assign(static_cast<size_t>(W), 0);
    for (int d = 0; d < W; ++d) {
      for (int64_t j = 0; j < L; ++j) {
        sb_[static_cast<size_t>(d)] += static_cast<size_t>(sendCount_[static_cast<size_t>(d * L + j)]) * row;
        rb_[static_cast<size_t>(d)] += static_cast<size_t>(recvCount_[static_cast<size_t>(d * L + j)]) * row;
      }
    }
    sd_.assign(static_cast<size_t>(W), 0);
    rd_.assign(static_cast<size_t>(W), 0);
    std::exclusive_scan(sb_.begin(), sb_.end(), sd_.begin(), size_t{0});
    std::exclusive_scan(rb_.begin(), rb_.end(), rd_.begin(), size_t{0});
    staging_.resize(rd_.back() + rb_.back());
    a2av(sendBuf_.data(), sb_.data(), sd_.data(), staging_.data(), rb_.data(), rd_.data());
    // Scatter into the final layout.
    start_.assign(static_cast<size_t>(W * L), 0);
    int64_t total = 0;
    for (int64_t j = 0; j < L; ++j) {
      for (int r = 0; r < W; ++r) {
        start_[static_cast<size_t>(r * L + j)] = total;
        total += recvCount_[static_cast<size_t>(r * L + j)];
      }
    }
    for (int r = 0; r < W; ++r) {
      size_t from = rd_[static_cast<size_t>(r)];
      for (int64_t j = 0; j < L; ++j) {
        const auto n = static_cast<size_t>(recvCount_[static_cast<size_t>(r * L + j)]);
        std::memcpy(
            reinterpret_cast<uint8_t*>(expandX) + static_cast<size_t>(start_[static_cast<size_t>(r * L + j)]) * row,
            staging_.data() + from, n * row);
        from += n * row;
      }
    }
    return total;
  }

  // out[t] = sum over k of weights[t][k] * expertOut[row(t, k)], in float32.
  template <class AllToAllV>
  void combine(const float* expertOut, const float* weights, float* out, AllToAllV&& a2av) {
    const int W = s_.W;
    const int64_t L = s_.local(), K = s_.topK;
    const size_t row = s_.rowBytes();
    // Pack the expert outputs per source, in the order the source sent them.
    for (int r = 0; r < W; ++r) {
      size_t to = rd_[static_cast<size_t>(r)];
      for (int64_t j = 0; j < L; ++j) {
        const auto n = static_cast<size_t>(recvCount_[static_cast<size_t>(r * L + j)]);
        std::memcpy(staging_.data() + to,
                    reinterpret_cast<const uint8_t*>(expertOut) +
                        static_cast<size_t>(start_[static_cast<size_t>(r * L + j)]) * row,
                    n * row);
        to += n * row;
      }
    }
    a2av(staging_.data(), rb_.data(), rd_.data(), sendBuf_.data(), sb_.data(), sd_.data());
    for (int64_t t = 0; t < s_.tokens; ++t) {
      float* o = out + t * s_.hidden;
      std::fill(o, o + s_.hidden, 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        const float w = weights[t * K + k];
        const auto* src = reinterpret_cast<const float*>(
            sendBuf_.data() + static_cast<size_t>(rowOf_[static_cast<size_t>(t * K + k)]) * row);
        for (int64_t h = 0; h < s_.hidden; ++h) o[h] += w * src[h];
      }
    }
  }

 private:
  Shape s_;
  std::vector<int64_t> sendCount_, recvCount_, rowOf_, start_;
  std::vector<size_t> sb_, sd_, rb_, rd_;
  std::vector<uint8_t> sendBuf_, staging_;
};

}  // namespace moebench
