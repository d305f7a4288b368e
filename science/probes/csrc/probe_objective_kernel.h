// The probe's objective in one pass over its rows (science/probes/onepass.py): for a block of rows
// at a time, while it is in cache,
//   logits  l[k, r] = (double)(Σ_j V[k, j] · Xt[j, r]) + b[k]   (float32 dot, widened)
//   logp    = log_softmax over k (float64)
//   picked += Σ_r logp[y_r, r]
//   R[k, r] = (exp(logp[k, r]) − [k = y_r]) / Ntot              (float64; used as float32 below)
//   gb[k]  += Σ_r R[k, r];   G[k, j] += Σ_r R[k, r] · Xt[j, r]   (float32 products, float64 sums)
// the same arithmetic as science.probes.solver._Sums.add, whose two matrix products (MKL's, with
// K = 2–8 rows) run far below the matmul rate; here the logits are vectorised over rows (register
// tiles of K classes × G1 row vectors), the softmax runs on an L1-resident [K, RB] buffer, and the
// gradient's partial sums stay float32 vectors over row lanes, added into float64 every
// FLUSH_ROWS rows. BENCHMARKS.md "Lab scale" measures it against the two products.
//
// SIMD path: GCC vector extensions, 8 float lanes (AVX2 + FMA; also what runs on an AVX-512 CPU:
// the 16-lane tiling was not measured). Other CPUs: a scalar path with the same blocking.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>  // outside the namespace: its intrinsics are global names
#endif

namespace layerscope_probe {

constexpr int MAX_CLASSES = 8;  // the SIMD path's tiles; more classes take the torch path
constexpr long FLUSH_ROWS = 1024;  // rows summed in float32 per lane before the float64 add

// Rows per block: a block of ~80 KB (K ≤ 3) or ~160 KB of float32 features, 64..512 rows, a
// power of two (measured at D = 160 and 768 on a Zen 3 core: BENCHMARKS.md). At most 512 rows: the
// softmax multiplies a lane's row sums (each in [1, K]) over a block, K^(512/4) < 1e308.
inline long block_rows(long D, int K) {
    const long target = (K <= 3 ? 80 : 160) * 1024 / (4 * std::max<long>(D, 1));
    long rows = 64;
    while (rows * 2 <= target && rows < 512) rows *= 2;
    return rows;
}

struct Freer {
    void operator()(void* p) const { std::free(p); }
};
template <typename T>
using Buffer = std::unique_ptr<T[], Freer>;

template <typename T>
Buffer<T> aligned(long n) {  // 64-byte aligned, uninitialised; throws on failure
    void* p = nullptr;
    if (posix_memalign(&p, 64, (sizeof(T) * std::max<long>(n, 1) + 63) & ~size_t(63))) throw std::bad_alloc();
    return Buffer<T>(static_cast<T*>(p));
}

#if defined(__AVX2__) && defined(__FMA__)
#define LAYERSCOPE_PROBE_SIMD 1

constexpr int L = 8;    // float lanes
constexpr int DL = 4;   // double lanes (the same 256 bits)
constexpr int NREG = 16;
typedef float vf __attribute__((vector_size(32)));
typedef float vfu __attribute__((vector_size(32), aligned(4)));  // unaligned loads
typedef double vd __attribute__((vector_size(32)));
typedef long long vl __attribute__((vector_size(32)));
typedef long long vlu __attribute__((vector_size(32), aligned(8)));

inline vd vmax(vd a, vd b) { return a > b ? a : b; }
inline vf splat(float x) { return (vf)_mm256_set1_ps(x); }
inline vd splatd(double x) { return (vd)_mm256_set1_pd(x); }
inline vd load_cvt(const float* p) { return (vd)_mm256_cvtps_pd(_mm_load_ps(p)); }
inline void store_cvt(float* p, vd v) { _mm_store_ps(p, _mm256_cvtpd_ps((__m256d)v)); }

// exp(x) for x ≤ 0 (a logit minus its row's maximum), relative error ~2e-16: x = k ln2 + r with
// |r| ≤ ln2/2, a degree-13 Taylor polynomial in Estrin's scheme, 2^k from the exponent bits.
inline vd vexp(vd x) {
    x = vmax(x, splatd(-708.0));
    const double magic = 6755399441055744.0 + 1023.0;  // 1.5 · 2^52 + the exponent bias
    const vd t = x * 1.4426950408889634074 + magic;
    const vd k = t - magic;
    vd r = x - k * 0.6931471803691238164901733;
    r = r - k * 1.9082149292705877000e-10;
    const vd r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const vd q0 = 1.0 + r, q1 = 0.5 + r * (1.0 / 6.0), q2 = 1.0 / 24.0 + r * (1.0 / 120.0),
             q3 = 1.0 / 720.0 + r * (1.0 / 5040.0), q4 = 1.0 / 40320.0 + r * (1.0 / 362880.0),
             q5 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0), q6 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0);
    const vd s0 = q0 + q1 * r2, s1 = q2 + q3 * r2, s2 = q4 + q5 * r2;
    const vd p = (s0 + s1 * r4) + (s2 + q6 * r4) * r8;
    vl bits = (vl)t;
    bits <<= 52;
    return p * (vd)bits;
}

inline double hsum(vf v) {
    double s = 0.0;
    for (int i = 0; i < L; ++i) s += (double)v[i];
    return s;
}

// Register tiles for 16 vector registers: logits acc[K][G1] (G1 row vectors per class);
// gradient acc[KT][JT] (KT classes × JT features, vectors over row lanes).
template <int K> struct Tile;
template <> struct Tile<2> { static constexpr int G1 = 4, KT = 2, JT = 6; };
template <> struct Tile<3> { static constexpr int G1 = 3, KT = 3, JT = 3; };
template <> struct Tile<4> { static constexpr int G1 = 3, KT = 4, JT = 2; };
template <> struct Tile<5> { static constexpr int G1 = 2, KT = 5, JT = 2; };
template <> struct Tile<6> { static constexpr int G1 = 2, KT = 6, JT = 2; };
template <> struct Tile<7> { static constexpr int G1 = 1, KT = 4, JT = 2; };
template <> struct Tile<8> { static constexpr int G1 = 1, KT = 4, JT = 2; };

// Gradient for classes [K0, K0 + KT), then the next chunk: Gacc[j][k] += R[k, rows] · X[j, rows].
// pf_next: prefetch the next block's rows (at px + RB) into L2 while this one is summed.
template <int K, int K0, int KT, int JT>
inline void gradient(const float* x, long xld, long D, long RB, const float* R32, vf* Gacc, bool pf_next) {
    constexpr int KC = (K0 + KT <= K) ? KT : K - K0;
    long j = 0;
    for (; j + JT <= D; j += JT) {
        vf acc[KC][JT];
        for (int jj = 0; jj < JT; ++jj)
            for (int k = 0; k < KC; ++k) acc[k][jj] = Gacc[(j + jj) * K + K0 + k];
        const float* xp = x + j * xld;
        if (K0 == 0 && pf_next)
            for (int jj = 0; jj < JT; ++jj)
                for (long c = 0; c < RB; c += 16) __builtin_prefetch(xp + jj * xld + RB + c, 0, 2);
        if constexpr (KC * JT + KC + 1 <= NREG) {  // the chunk's R rows in registers, X streamed
            for (long g = 0; g < RB; g += L) {
                vf r[KC];
                for (int k = 0; k < KC; ++k) r[k] = *(const vf*)(R32 + (K0 + k) * RB + g);
                for (int jj = 0; jj < JT; ++jj) {
                    const vf xv = *(const vfu*)(xp + jj * xld + g);
                    for (int k = 0; k < KC; ++k) acc[k][jj] += r[k] * xv;
                }
            }
        } else {  // the JT rows of X in registers, R streamed
            for (long g = 0; g < RB; g += L) {
                vf xv[JT];
                for (int jj = 0; jj < JT; ++jj) xv[jj] = *(const vfu*)(xp + jj * xld + g);
                for (int k = 0; k < KC; ++k) {
                    const vf r = *(const vf*)(R32 + (K0 + k) * RB + g);
                    for (int jj = 0; jj < JT; ++jj) acc[k][jj] += r * xv[jj];
                }
            }
        }
        for (int jj = 0; jj < JT; ++jj)
            for (int k = 0; k < KC; ++k) Gacc[(j + jj) * K + K0 + k] = acc[k][jj];
    }
    for (; j < D; ++j) {
        vf acc[KC];
        for (int k = 0; k < KC; ++k) acc[k] = Gacc[j * K + K0 + k];
        const float* xp = x + j * xld;
        if (K0 == 0 && pf_next)
            for (long c = 0; c < RB; c += 16) __builtin_prefetch(xp + RB + c, 0, 2);
        for (long g = 0; g < RB; g += L) {
            const vf xv = *(const vfu*)(xp + g);
            for (int k = 0; k < KC; ++k) acc[k] += *(const vf*)(R32 + (K0 + k) * RB + g) * xv;
        }
        for (int k = 0; k < KC; ++k) Gacc[j * K + K0 + k] = acc[k];
    }
    if constexpr (K0 + KC < K) gradient<K, K0 + KC, KT, JT>(x, xld, D, RB, R32, Gacc, pf_next);
}

template <int K>
void run(const float* Xt, long ld, long D, long N, const float* V, const double* b, const int64_t* y,
         double Ntot, double* picked, double* G, double* gb) {
    constexpr int G1 = Tile<K>::G1;
    constexpr int TW = L * G1;  // rows per logit tile
    constexpr long JC = 64;     // features per logit sweep (pages touched per sweep: TLB reach)
    // Prefetch (measured): few classes (memory-bound) fetch the same tile of the next block with
    // each logit tile; more classes fetch the next tile, and the next block during the gradient.
    constexpr bool AHEAD = K <= 3;
    const long RB = std::max<long>(TW, (block_rows(D, K) + TW - 1) / TW * TW);

    auto Vt = aligned<float>(D * K);   // [D][K]
    auto L32 = aligned<float>(K * RB);   // [K][RB] logits
    auto R32 = aligned<float>(K * RB);   // [K][RB] residuals
    auto Z = aligned<double>(K * RB);    // [K][RB] softmax scratch
    auto Gacc = aligned<vf>(D * K);      // [D][K] lanes over rows
    auto tail = aligned<float>(D * RB);  // the last, partial block, zero-padded
    auto ytail = aligned<int64_t>(RB);
    for (long j = 0; j < D; ++j)
        for (int k = 0; k < K; ++k) Vt[j * K + k] = V[k * D + j];
    std::memset((void*)Gacc.get(), 0, sizeof(vf) * D * K);

    double bk[K];
    for (int k = 0; k < K; ++k) bk[k] = b[k];
    const vd vinvN = splatd(1.0 / Ntot);
    vd pick_acc = {};
    double logsum = 0.0;
    vd gb_acc[K];
    for (int k = 0; k < K; ++k) gb_acc[k] = vd{};
    long since_flush = 0;
    auto flush = [&]() {
        for (long j = 0; j < D; ++j)
            for (int k = 0; k < K; ++k) {
                G[k * D + j] += hsum(Gacc[j * K + k]);
                Gacc[j * K + k] = vf{};
            }
    };

    for (long r0 = 0; r0 < N; r0 += RB) {
        const long nb = std::min(RB, N - r0);
        const bool full = nb == RB;
        const float* x = Xt + r0;
        long xld = ld;
        const int64_t* yb = y + r0;
        if (!full) {
            for (long j = 0; j < D; ++j) {
                std::memcpy(tail.get() + j * RB, Xt + j * ld + r0, sizeof(float) * nb);
                std::memset(tail.get() + j * RB + nb, 0, sizeof(float) * (RB - nb));
            }
            for (long r = 0; r < RB; ++r) ytail[r] = r < nb ? y[r0 + r] : -1;
            x = tail.get(), xld = RB, yb = ytail.get();
        }
        // logits [K][RB] (float32), vectorised over rows
        for (long j0 = 0; j0 < D; j0 += JC) {
            const long j1 = std::min(D, j0 + JC);
            for (long t = 0; t < RB; t += TW) {
                vf acc[K][G1];
                for (int k = 0; k < K; ++k)
                    for (int g = 0; g < G1; ++g) acc[k][g] = j0 == 0 ? vf{} : *(const vf*)(L32.get() + k * RB + t + g * L);
                const float* xp = x + j0 * xld + t;
                const float* vp = Vt.get() + j0 * K;
                for (long j = j0; j < j1; ++j, xp += xld, vp += K) {
                    if (full) {
                        if constexpr (AHEAD)
                            for (int c = 0; c < TW; c += 16) __builtin_prefetch(xp + RB + c, 0, 2);
                        else
                            for (int c = 0; c < TW; c += 16) __builtin_prefetch(xp + TW + c, 0, 3);
                    }
                    vf xv[G1];
                    for (int g = 0; g < G1; ++g) xv[g] = *(const vfu*)(xp + g * L);
                    for (int k = 0; k < K; ++k) {
                        const vf vk = splat(vp[k]);
                        for (int g = 0; g < G1; ++g) acc[k][g] += vk * xv[g];
                    }
                }
                for (int k = 0; k < K; ++k)
                    for (int g = 0; g < G1; ++g) *(vf*)(L32.get() + k * RB + t + g * L) = acc[k][g];
            }
        }
        // float64 softmax: z = l + b − max (and the picked z), e = exp(z), R = (e/s − Y)/Ntot;
        // log s is summed as the log of the block's product of row sums (each s in [1, K]).
        for (long r = 0; r < RB; r += DL) {
            vd l[K];
            vd m = {};
            for (int k = 0; k < K; ++k) {
                l[k] = load_cvt(L32.get() + k * RB + r) + bk[k];
                m = k == 0 ? l[0] : vmax(m, l[k]);
            }
            const vl yv = *(const vlu*)(yb + r);
            vd zy = {};
            for (int k = 0; k < K; ++k) {
                const vd z = l[k] - m;
                zy = (yv == k) ? z : zy;  // zero on padded rows (label −1)
                *(vd*)(Z.get() + k * RB + r) = z;
            }
            pick_acc += zy;
        }
        for (long i = 0; i < K * RB; i += DL) *(vd*)(Z.get() + i) = vexp(*(const vd*)(Z.get() + i));
        vd prod = splatd(1.0);
        for (long r = 0; r < RB; r += DL) {
            vd s = *(const vd*)(Z.get() + r);
            for (int k = 1; k < K; ++k) s += *(const vd*)(Z.get() + k * RB + r);
            const vl yv = *(const vlu*)(yb + r);
            const vd inv = vinvN / s;
            const vl valid = yv >= 0;
            prod *= valid ? s : splatd(1.0);
            for (int k = 0; k < K; ++k) {
                vd R = *(const vd*)(Z.get() + k * RB + r) * inv - ((yv == k) ? vinvN : vd{});
                R = valid ? R : vd{};
                gb_acc[k] += R;
                store_cvt(R32.get() + k * RB + r, R);
            }
        }
        for (int i = 0; i < DL; ++i) logsum += std::log(prod[i]);
        // gradient, the block still in cache
        gradient<K, 0, Tile<K>::KT, Tile<K>::JT>(x, xld, D, RB, R32.get(), Gacc.get(), !AHEAD && full && r0 + 2 * RB <= N);
        since_flush += RB;
        if (since_flush >= FLUSH_ROWS) {
            flush();
            since_flush = 0;
        }
    }
    flush();
    double pk = -logsum;
    for (int i = 0; i < DL; ++i) pk += pick_acc[i];
    *picked += pk;
    for (int k = 0; k < K; ++k) {
        double s = 0.0;
        for (int i = 0; i < DL; ++i) s += gb_acc[k][i];
        gb[k] += s;
    }
}

#else
#define LAYERSCOPE_PROBE_SIMD 0

// Scalar path: the same blocks and arithmetic (float32 dots and products, float64 softmax and sums).
template <int K>
void run(const float* Xt, long ld, long D, long N, const float* V, const double* b, const int64_t* y,
         double Ntot, double* picked, double* G, double* gb) {
    const long RB = block_rows(D, K);
    auto Lg = aligned<float>(K * RB);
    auto R32 = aligned<float>(K * RB);
    const double invN = 1.0 / Ntot;
    double pk = 0.0;
    for (long r0 = 0; r0 < N; r0 += RB) {
        const long nb = std::min(RB, N - r0);
        for (int k = 0; k < K; ++k) {
            float* lk = Lg.get() + k * RB;
            for (long r = 0; r < nb; ++r) lk[r] = 0.0f;
            for (long j = 0; j < D; ++j) {
                const float v = V[k * D + j];
                const float* xr = Xt + j * ld + r0;
                for (long r = 0; r < nb; ++r) lk[r] += v * xr[r];
            }
        }
        for (long r = 0; r < nb; ++r) {
            double m = -INFINITY;
            for (int k = 0; k < K; ++k) m = std::max(m, (double)Lg[k * RB + r] + b[k]);
            double s = 0.0;
            for (int k = 0; k < K; ++k) s += std::exp((double)Lg[k * RB + r] + b[k] - m);
            const double ls = std::log(s);
            const int64_t yr = y[r0 + r];
            for (int k = 0; k < K; ++k) {
                const double lp = (double)Lg[k * RB + r] + b[k] - m - ls;
                if (k == yr) pk += lp;
                const double R = (std::exp(lp) - (k == yr ? 1.0 : 0.0)) * invN;
                gb[k] += R;
                R32[k * RB + r] = (float)R;
            }
        }
        for (int k = 0; k < K; ++k)
            for (long j = 0; j < D; ++j) {
                const float* xr = Xt + j * ld + r0;
                const float* rk = R32.get() + k * RB;
                float s = 0.0f;
                for (long r = 0; r < nb; ++r) s += rk[r] * xr[r];
                G[k * D + j] += s;
            }
    }
    *picked += pk;
}
#endif

// The objective's sums over N rows of Xt [D, N] (row stride ld ≥ N floats), added into picked [1],
// G [K, D] and gb [K]; labels y [N] in 0..K-1; 2 ≤ K ≤ MAX_CLASSES (checked by the caller).
inline void objective(const float* Xt, long ld, long D, long N, const float* V, const double* b, const int64_t* y,
                      int K, double Ntot, double* picked, double* G, double* gb) {
    switch (K) {
        case 2: return run<2>(Xt, ld, D, N, V, b, y, Ntot, picked, G, gb);
        case 3: return run<3>(Xt, ld, D, N, V, b, y, Ntot, picked, G, gb);
        case 4: return run<4>(Xt, ld, D, N, V, b, y, Ntot, picked, G, gb);
        case 5: return run<5>(Xt, ld, D, N, V, b, y, Ntot, picked, G, gb);
        case 6: return run<6>(Xt, ld, D, N, V, b, y, Ntot, picked, G, gb);
        case 7: return run<7>(Xt, ld, D, N, V, b, y, Ntot, picked, G, gb);
        case 8: return run<8>(Xt, ld, D, N, V, b, y, Ntot, picked, G, gb);
        default: return;
    }
}

}  // namespace layerscope_probe
