// layerscope fast Mamba mixer kernels, CPU: plain C++ on raw pointers (no torch types), bound to
// typed torch ops in fast_scan_ops.cpp. See models_store/fast_scan_cpu.py for the maths.
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <omp.h>

namespace layerscope_kernels {

constexpr int W = 16;  // lanes: inner channels d processed together (vectorised)

// exp(x) for x in [-87.3, 88] (clamped outside: exp(x < -87.3) gives 1.2e-38, not 0), max
// relative error 1.7e-7 (float) / 2e-16 (double); written so the compiler vectorises it (no libm
// call). Range reduction x = k ln2 + r, |r| <= ln2/2, with the rounding "magic" constant
// 1.5 * 2^23 + 127 whose low mantissa bits then hold k + 127, i.e. 2^k's exponent field.
inline float vexp(float x) {
    x = std::min(std::max(x, -87.3f), 88.0f);
    const float magic = 12582912.0f + 127.0f;
    const float t = x * 1.44269504088896341f + magic;
    const float k = t - magic;        // round(x / ln 2)
    float r = x - k * 0.693145751953125f;
    r = r - k * 1.428606765330187045e-06f;
    float q = 8.290314832e-03f;       // minimax 1 + r q(r) on [-ln2/2, ln2/2]
    q = q * r + 4.189793004e-02f;
    q = q * r + 1.666763620e-01f;
    q = q * r + 4.999914953e-01f;
    q = q * r + 9.999997072e-01f;
    uint32_t bits;
    std::memcpy(&bits, &t, sizeof(bits));
    bits <<= 23;                      // (k + 127) << 23
    float s;
    std::memcpy(&s, &bits, sizeof(s));
    return (1.0f + r * q) * s;
}

inline double vexp(double x) {
    x = std::min(std::max(x, -708.0), 709.0);
    const double magic = 6755399441055744.0 + 1023.0;  // 1.5 * 2^52 + 1023
    const double t = x * 1.4426950408889634074 + magic;
    const double k = t - magic;
    double r = x - k * 0.6931471803691238164901733;
    r = r - k * 1.9082149292705877000e-10;
    double p = 1.0 / 6227020800.0;               // Taylor to 1/13!
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t bits;
    std::memcpy(&bits, &t, sizeof(bits));
    bits <<= 52;                      // (k + 1023) << 52
    double s;
    std::memcpy(&s, &bits, sizeof(s));
    return p * s;
}

// exp(x) for x <= 0 (the SSM decays dt·A), same accuracy as vexp; one clamp instead of two.
inline float vexp_neg(float x) {
    x = std::max(x, -87.3f);
    const float magic = 12582912.0f + 127.0f;
    const float t = x * 1.44269504088896341f + magic;
    const float k = t - magic;
    float r = x - k * 0.693145751953125f;
    r = r - k * 1.428606765330187045e-06f;
    float q = 8.290314832e-03f;
    q = q * r + 4.189793004e-02f;
    q = q * r + 1.666763620e-01f;
    q = q * r + 4.999914953e-01f;
    q = q * r + 9.999997072e-01f;
    uint32_t bits;
    std::memcpy(&bits, &t, sizeof(bits));
    bits <<= 23;
    float s;
    std::memcpy(&s, &bits, sizeof(s));
    return (1.0f + r * q) * s;
}
inline double vexp_neg(double x) { return vexp(x); }

template <typename T> inline T vsigmoid(T v) { return T(1) / (T(1) + vexp(-v)); }

// torch's softplus (beta 1, threshold 20): v > 20 → v, else log1p(exp(v)); sg = its derivative
// (sigmoid(v), or 1 above the threshold). log1p(e) = 2 atanh(e / (2 + e)), e = exp(-|v|) <= 1,
// by its odd series in s = e / (2 + e) <= 1/3.
template <typename T>
inline void vsoftplus(T v, T& sp, T& sg) {
    const T e = vexp(-std::abs(v));
    const T s = e / (T(2) + e);
    const T s2 = s * s;
    constexpr int K = sizeof(T) == 4 ? 8 : 17;
    T p = T(1) / T(2 * K + 1);
    for (int k = K - 1; k >= 0; --k) p = p * s2 + T(1) / T(2 * k + 1);
    const T lp = T(2) * s * p;
    const bool big = v > T(20);
    sp = big ? v : std::max(v, T(0)) + lp;
    const T inv = T(1) / (T(1) + e);
    sg = big ? T(1) : (v >= T(0) ? inv : e * inv);
}

// Runs body(thread_id, lo, hi) over [0, n) split evenly on nthreads OpenMP threads. The
// library links libgomp.so.1, which resolves to the runtime torch already loaded, so these
// threads are torch's own pool (no oversubscription, no second spinning pool).
template <typename F>
void run_parallel(int64_t n, int nthreads, F&& body) {
    nthreads = std::max(1, std::min<int>(nthreads, static_cast<int>(std::max<int64_t>(n, 1))));
    if (nthreads == 1) { body(0, 0, n); return; }
#pragma omp parallel num_threads(nthreads)
    {
        const int i = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t lo = n * i / nt, hi = n * (i + 1) / nt;
        body(i, lo, hi);
    }
}

inline int n_workers(int64_t n, int nthreads) {
    return std::max(1, std::min<int>(nthreads, static_cast<int>(std::max<int64_t>(n, 1))));
}

// Copy rows t = 0..L-1 (row stride ld) of lanes d0..d0+W-1 into buf[L][W], zero past D.
template <typename T>
inline void load_block(const T* src, int64_t ld, int64_t L, int64_t D, int64_t d0, T* buf) {
    const int64_t nv = std::min<int64_t>(W, D - d0);
    for (int64_t t = 0; t < L; ++t) {
        const T* s = src + t * ld + d0;
        T* b = buf + t * W;
        for (int w = 0; w < W; ++w) b[w] = w < nv ? s[w] : T(0);
    }
}

template <typename T>
inline void store_block(T* dst, int64_t ld, int64_t L, int64_t D, int64_t d0, const T* buf) {
    const int64_t nv = std::min<int64_t>(W, D - d0);
    for (int64_t t = 0; t < L; ++t) {
        T* s = dst + t * ld + d0;
        const T* b = buf + t * W;
        for (int w = 0; w < nv; ++w) s[w] = b[w];
    }
}

// Load dt for one block; with softplus (raw dt), also its derivative into sg.
template <typename T>
inline void load_dt(const T* src, int64_t L, int64_t D, int64_t d0, bool softplus, T* ds, T* sg) {
    load_block(src, D, L, D, d0, ds);
    if (!softplus) return;
    const int64_t nv = std::min<int64_t>(W, D - d0);
    for (int64_t t = 0; t < L; ++t) {
#pragma omp simd
        for (int w = 0; w < W; ++w) {
            T sp, g;
            vsoftplus(ds[t * W + w], sp, g);
            ds[t * W + w] = w < nv ? sp : T(0);   // padded lanes keep dt = 0
            if (sg) sg[t * W + w] = g;
        }
    }
}

// A [D, N] → At [nblk][N][W] (zero-padded lanes; padded lanes also have x = dt = 0).
template <typename T>
std::vector<T> block_A(const T* A, int64_t D, int64_t N, int64_t nblk) {
    std::vector<T> At(nblk * N * W, T(0));
    for (int64_t d = 0; d < D; ++d)
        for (int64_t n = 0; n < N; ++n)
            At[((d / W) * N + n) * W + (d % W)] = A[d * N + n];
    return At;
}

// ---------------------------------------------------------------------------------------
// Causal depthwise conv (kernel k, left zero padding k-1) + bias (+ SiLU):
//   v[b,t,d] = bias[d] + sum_j w[d,j] * x[b, t-(k-1)+j, d];   out = act ? silu(v) : v
// x rows have stride ldx (x may be the first half of in_proj's [B, L, 2D] output).
// ---------------------------------------------------------------------------------------
// v[d] = bias[d] + sum_j w[j][d] * x[t-(k-1)+j][d] for one (b, t) row (vectorised over d).
template <typename T>
inline void conv_row(const T* xb, int64_t ldx, const T* wt, const T* bias, int64_t t, int64_t D, int64_t k,
                     T* v) {
    if (bias) {
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) v[d] = bias[d];
    } else {
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) v[d] = T(0);
    }
    for (int64_t j = std::max<int64_t>(0, (k - 1) - t); j < k; ++j) {
        const T* xs = xb + (t - (k - 1) + j) * ldx;
        const T* wj = wt + j * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) v[d] += wj[d] * xs[d];
    }
}

template <typename T>
void conv_fwd(const T* x, int64_t ldx, const T* w, const T* bias, T* out, int act,
              int64_t Bsz, int64_t L, int64_t D, int64_t k, int nthreads) {
    std::vector<T> wt(k * D);  // [k][D]
    for (int64_t d = 0; d < D; ++d) for (int64_t j = 0; j < k; ++j) wt[j * D + d] = w[d * k + j];
    run_parallel(Bsz * L, nthreads, [&](int, int64_t lo, int64_t hi) {
        for (int64_t bt = lo; bt < hi; ++bt) {
            const int64_t b = bt / L, t = bt % L;
            T* o = out + bt * D;
            conv_row(x + b * L * ldx, ldx, wt.data(), bias, t, D, k, o);
            if (act) {
#pragma omp simd
                for (int64_t d = 0; d < D; ++d) o[d] = o[d] * vsigmoid(o[d]);
            }
        }
    });
}

template <typename T>
void conv_bwd(const T* x, int64_t ldx, const T* w, const T* bias, const T* gout, int act,
              T* gx, int64_t ldgx, T* gw, T* gb,
              int64_t Bsz, int64_t L, int64_t D, int64_t k, int nthreads) {
    std::vector<T> wt(k * D);
    for (int64_t d = 0; d < D; ++d) for (int64_t j = 0; j < k; ++j) wt[j * D + d] = w[d * k + j];
    const int nth = n_workers(Bsz, nthreads);
    std::vector<std::vector<T>> part(nth, std::vector<T>((k + 1) * D, T(0)));  // gw^T [k][D], gb [D]
    run_parallel(Bsz, nth, [&](int tid, int64_t lo, int64_t hi) {
        std::vector<T> gv(L * D), v(D);
        T* gwt = part[tid].data();
        T* gbp = gwt + k * D;
        for (int64_t b = lo; b < hi; ++b) {
            const T* xb = x + b * L * ldx;
            const T* gb_out = gout + b * L * D;
            for (int64_t t = 0; t < L; ++t) {
                T* g = gv.data() + t * D;
                const T* go = gb_out + t * D;
                if (act) {
                    conv_row(xb, ldx, wt.data(), bias, t, D, k, v.data());
#pragma omp simd
                    for (int64_t d = 0; d < D; ++d) {
                        const T s = vsigmoid(v[d]);
                        g[d] = go[d] * s * (T(1) + v[d] * (T(1) - s));
                    }
                } else {
#pragma omp simd
                    for (int64_t d = 0; d < D; ++d) g[d] = go[d];
                }
#pragma omp simd
                for (int64_t d = 0; d < D; ++d) gbp[d] += g[d];
                for (int64_t j = std::max<int64_t>(0, (k - 1) - t); j < k; ++j) {
                    const T* xs = xb + (t - (k - 1) + j) * ldx;
                    T* gwj = gwt + j * D;
#pragma omp simd
                    for (int64_t d = 0; d < D; ++d) gwj[d] += g[d] * xs[d];
                }
            }
            // gx[s] = sum_j w[j] * gv[s + (k-1) - j]
            for (int64_t s = 0; s < L; ++s) {
                T* gxs = gx + (b * L + s) * ldgx;
#pragma omp simd
                for (int64_t d = 0; d < D; ++d) gxs[d] = T(0);
                for (int64_t j = std::max<int64_t>(0, s + (k - 1) - (L - 1)); j < k; ++j) {
                    const T* g = gv.data() + (s + (k - 1) - j) * D;
                    const T* wj = wt.data() + j * D;
#pragma omp simd
                    for (int64_t d = 0; d < D; ++d) gxs[d] += wj[d] * g[d];
                }
            }
        }
    });
    for (int64_t d = 0; d < D; ++d) {
        for (int64_t j = 0; j < k; ++j) {
            T s = 0;
            for (int i = 0; i < nth; ++i) s += part[i][j * D + d];
            gw[d * k + j] = s;
        }
        if (gb) {
            T s = 0;
            for (int i = 0; i < nth; ++i) s += part[i][k * D + d];
            gb[d] = s;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Selective scan + D skip + SiLU gate (per b, d, n; h_{-1} = 0):
//   h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t ;  y_t = sum_n C_t h_t
//   out_t = (y_t + Dskip * x_t) * silu(z_t)      (Dskip, z optional: out = y without them)
// A is [D, N] (Mamba) or, with SA ("scalar A", Mamba-2), [D]: one decay per channel.
// x rows have stride ldx; dt, out [B, L, D] contiguous; B, C rows of stride ldbc; z rows of
// stride ldz.
// ---------------------------------------------------------------------------------------
template <typename T, bool SA>
std::vector<T> block_decay(const T* A, int64_t D, int64_t N, int64_t nblk) {
    if (!SA) return block_A(A, D, N, nblk);
    std::vector<T> At(nblk * W, T(0));
    for (int64_t d = 0; d < D; ++d) At[d] = A[d];
    return At;
}

template <typename T, bool SA, int NC>  // NC: N known at compile time (0: runtime N)
void scan_fwd(const T* x, int64_t ldx, const T* dt, const T* A, const T* Bm, const T* Cm, int64_t ldbc,
              const T* Dsk, const T* z, int64_t ldz, T* out,
              int64_t Bsz, int64_t L, int64_t D, int64_t N_, bool dt_softplus, int nthreads) {
    const int64_t N = NC > 0 ? NC : N_;
    const int64_t nblk = (D + W - 1) / W;
    std::vector<T> At = block_decay<T, SA>(A, D, N, nblk);
    run_parallel(Bsz, nthreads, [&](int, int64_t lo, int64_t hi) {
        std::vector<T> xs(L * W), ds(L * W), zs(L * W), ys(L * W), hv(NC > 0 ? 0 : N * W);
        alignas(64) T hloc[NC > 0 ? NC * W : 1];
        T* h = NC > 0 ? hloc : hv.data();
        for (int64_t b = lo; b < hi; ++b) {
            const T* Bb = Bm + b * L * ldbc;
            const T* Cb = Cm + b * L * ldbc;
            for (int64_t j = 0; j < nblk; ++j) {
                const int64_t d0 = j * W;
                load_block(x + b * L * ldx, ldx, L, D, d0, xs.data());
                load_dt(dt + b * L * D, L, D, d0, dt_softplus, ds.data(), static_cast<T*>(nullptr));
                if (z) load_block(z + b * L * ldz, ldz, L, D, d0, zs.data());
                T dsk[W];
                for (int w = 0; w < W; ++w) dsk[w] = (Dsk && d0 + w < D) ? Dsk[d0 + w] : T(0);
                const T* a = At.data() + j * (SA ? 1 : N) * W;
                std::fill(h, h + N * W, T(0));
                for (int64_t t = 0; t < L; ++t) {
                    const T* dtt = ds.data() + t * W;
                    T du[W], acc[W], e1[W];
#pragma omp simd
                    for (int w = 0; w < W; ++w) {
                        du[w] = dtt[w] * xs[t * W + w];
                        acc[w] = T(0);
                        e1[w] = SA ? vexp_neg(dtt[w] * a[w]) : T(0);
                    }
#pragma GCC unroll 16
                    for (int64_t n = 0; n < N; ++n) {
                        const T bn = Bb[t * ldbc + n], cn = Cb[t * ldbc + n];
                        T* hn = h + n * W;
                        const T* an = a + (SA ? 0 : n * W);
#pragma omp simd
                        for (int w = 0; w < W; ++w) {
                            const T e = SA ? e1[w] : vexp_neg(dtt[w] * an[w]);
                            const T hv = e * hn[w] + du[w] * bn;
                            hn[w] = hv;
                            acc[w] += cn * hv;
                        }
                    }
                    T* yt = ys.data() + t * W;
                    if (z) {
                        const T* zt = zs.data() + t * W;
#pragma omp simd
                        for (int w = 0; w < W; ++w)
                            yt[w] = (acc[w] + dsk[w] * xs[t * W + w]) * zt[w] * vsigmoid(zt[w]);
                    } else {
#pragma omp simd
                        for (int w = 0; w < W; ++w) yt[w] = acc[w] + dsk[w] * xs[t * W + w];
                    }
                }
                store_block(out + b * L * D, D, L, D, d0, ys.data());
            }
        }
    });
}

template <typename T, bool SA, int NC>
void scan_bwd(const T* x, int64_t ldx, const T* dt, const T* A, const T* Bm, const T* Cm, int64_t ldbc,
              const T* Dsk, const T* z, int64_t ldz, const T* gout,
              T* gx, int64_t ldgx, T* gdt, T* gA, T* gB, T* gC, int64_t ldgbc, T* gDsk, T* gz, int64_t ldgz,
              int64_t Bsz, int64_t L, int64_t D, int64_t N_, bool dt_softplus, int nthreads) {
    const int64_t N = NC > 0 ? NC : N_;
    const int64_t nblk = (D + W - 1) / W;
    const int64_t NA = SA ? 1 : N;  // decays per lane
    std::vector<T> At = block_decay<T, SA>(A, D, N, nblk);
    const int nth = n_workers(Bsz, nthreads);
    // per thread: gA [nblk][NA][W], gDskip [nblk][W]
    std::vector<std::vector<T>> part(nth, std::vector<T>(nblk * (NA + 1) * W, T(0)));
    run_parallel(Bsz, nth, [&](int tid, int64_t lo, int64_t hi) {
        std::vector<T> xs(L * W), ds(L * W), zs(L * W), gos(L * W), gys(L * W), gxs(L * W), gds(L * W),
            gzs(L * W), ys(L * W), sgs(L * W);
        std::vector<T> hs((L + 1) * N * W), dAs(L * NA * W), ghv(NC > 0 ? 0 : N * W);
        alignas(64) T ghloc[NC > 0 ? NC * W : 1];
        T* gh = NC > 0 ? ghloc : ghv.data();
        std::vector<T> gBp(L * N * W), gCp(L * N * W);
        T* gAp = part[tid].data();
        T* gDp = gAp + nblk * NA * W;
        for (int64_t b = lo; b < hi; ++b) {
            const T* Bb = Bm + b * L * ldbc;
            const T* Cb = Cm + b * L * ldbc;
            std::fill(gBp.begin(), gBp.end(), T(0));
            std::fill(gCp.begin(), gCp.end(), T(0));
            for (int64_t j = 0; j < nblk; ++j) {
                const int64_t d0 = j * W;
                load_block(x + b * L * ldx, ldx, L, D, d0, xs.data());
                load_dt(dt + b * L * D, L, D, d0, dt_softplus, ds.data(), sgs.data());
                load_block(gout + b * L * D, D, L, D, d0, gos.data());
                if (z) load_block(z + b * L * ldz, ldz, L, D, d0, zs.data());
                T dsk[W];
                for (int w = 0; w < W; ++w) dsk[w] = (Dsk && d0 + w < D) ? Dsk[d0 + w] : T(0);
                const T* a = At.data() + j * NA * W;
                T* gAj = gAp + j * NA * W;
                T* gDj = gDp + j * W;
                // dLoss/dy = dLoss/dout * silu(z) (needs no y), so gC can be summed in the recompute.
                for (int64_t t = 0; t < L; ++t) {
                    const T* go = gos.data() + t * W;
                    T* gy = gys.data() + t * W;
                    if (z) {
                        const T* zt = zs.data() + t * W;
#pragma omp simd
                        for (int w = 0; w < W; ++w) gy[w] = go[w] * zt[w] * vsigmoid(zt[w]);
                    } else {
#pragma omp simd
                        for (int w = 0; w < W; ++w) gy[w] = go[w];
                    }
                }
                // Recompute: hs[t + 1] = h_t, hs[0] = 0; dAs[t] = exp(dt_t A); ys[t] = y_t;
                // gC partials += dLoss/dy_t * h_t.
                std::fill(hs.begin(), hs.begin() + N * W, T(0));
                for (int64_t t = 0; t < L; ++t) {
                    const T* dtt = ds.data() + t * W;
                    const T* gyt = gys.data() + t * W;
                    T du[W], acc[W];
#pragma omp simd
                    for (int w = 0; w < W; ++w) { du[w] = dtt[w] * xs[t * W + w]; acc[w] = T(0); }
                    if (SA) {
                        T* da = dAs.data() + t * W;
#pragma omp simd
                        for (int w = 0; w < W; ++w) da[w] = vexp_neg(dtt[w] * a[w]);
                    }
                    for (int64_t n = 0; n < N; ++n) {
                        const T bn = Bb[t * ldbc + n], cn = Cb[t * ldbc + n];
                        const T* hp = hs.data() + (t * N + n) * W;
                        T* hc = hs.data() + ((t + 1) * N + n) * W;
                        T* da = dAs.data() + (t * NA + (SA ? 0 : n)) * W;
                        const T* an = a + (SA ? 0 : n * W);
                        T* gcp = gCp.data() + (t * N + n) * W;
#pragma omp simd
                        for (int w = 0; w < W; ++w) {
                            T e;
                            if (SA) {
                                e = da[w];
                            } else {
                                e = vexp_neg(dtt[w] * an[w]);
                                da[w] = e;
                            }
                            const T hv = e * hp[w] + du[w] * bn;
                            hc[w] = hv;
                            acc[w] += cn * hv;
                            gcp[w] += gyt[w] * hv;
                        }
                    }
#pragma omp simd
                    for (int w = 0; w < W; ++w) ys[t * W + w] = acc[w];
                }
                // Gate and skip: out = (y + Dsk x) * silu(z).
                for (int64_t t = 0; t < L; ++t) {
                    const T* go = gos.data() + t * W;
                    const T* xt = xs.data() + t * W;
                    T* gy = gys.data() + t * W;
                    if (z) {
                        const T* zt = zs.data() + t * W;
                        T* gzt = gzs.data() + t * W;
#pragma omp simd
                        for (int w = 0; w < W; ++w) {
                            const T s = vsigmoid(zt[w]);
                            const T pre = ys[t * W + w] + dsk[w] * xt[w];
                            gzt[w] = go[w] * pre * s * (T(1) + zt[w] * (T(1) - s));
                            gDj[w] += gy[w] * xt[w];
                        }
                    } else {
#pragma omp simd
                        for (int w = 0; w < W; ++w) gDj[w] += gy[w] * xt[w];
                    }
                }
                // Reverse pass: gh = dLoss/dh_t accumulated from y_t and h_{t+1}.
                std::fill(gh, gh + N * W, T(0));
                for (int64_t t = L - 1; t >= 0; --t) {
                    const T* dtt = ds.data() + t * W;
                    const T* xt = xs.data() + t * W;
                    const T* gyt = gys.data() + t * W;
                    T du[W], gdu[W], gm[W];
#pragma omp simd
                    for (int w = 0; w < W; ++w) { du[w] = dtt[w] * xt[w]; gdu[w] = T(0); gm[w] = T(0); }
                    T gd[W];
#pragma omp simd
                    for (int w = 0; w < W; ++w) gd[w] = T(0);
                    for (int64_t n = 0; n < N; ++n) {
                        const T bn = Bb[t * ldbc + n], cn = Cb[t * ldbc + n];
                        const T* hp = hs.data() + (t * N + n) * W;
                        const T* da = dAs.data() + (t * NA + (SA ? 0 : n)) * W;
                        const T* an = a + (SA ? 0 : n * W);
                        T* ghn = gh + n * W;
                        T* gbp = gBp.data() + (t * N + n) * W;
                        T* gan = gAj + (SA ? 0 : n * W);
#pragma omp simd
                        for (int w = 0; w < W; ++w) {
                            const T g = ghn[w] + gyt[w] * cn;   // dLoss/dh_t
                            gbp[w] += g * du[w];
                            gdu[w] += g * bn;
                            const T m = g * hp[w] * da[w];       // dLoss/d(dt_t * A)
                            if (SA) {
                                gm[w] += m;
                            } else {
                                gd[w] += m * an[w];
                                gan[w] += m * dtt[w];
                            }
                            ghn[w] = g * da[w];                  // → dLoss/dh_{t-1}
                        }
                    }
#pragma omp simd
                    for (int w = 0; w < W; ++w) {
                        if (SA) {
                            gd[w] = gm[w] * a[w];
                            gAj[w] += gm[w] * dtt[w];
                        }
                        gxs[t * W + w] = gdu[w] * dtt[w] + gyt[w] * dsk[w];
                        const T gdv = gd[w] + gdu[w] * xt[w];
                        gds[t * W + w] = dt_softplus ? gdv * sgs[t * W + w] : gdv;
                    }
                }
                store_block(gx + b * L * ldgx, ldgx, L, D, d0, gxs.data());
                store_block(gdt + b * L * D, D, L, D, d0, gds.data());
                if (z && gz) store_block(gz + b * L * ldgz, ldgz, L, D, d0, gzs.data());
            }
            // gB, gC: sum the lanes (over d) of this batch row.
            for (int64_t t = 0; t < L; ++t)
                for (int64_t n = 0; n < N; ++n) {
                    T sb = 0, sc = 0;
                    const T* pb = gBp.data() + (t * N + n) * W;
                    const T* pc = gCp.data() + (t * N + n) * W;
                    for (int w = 0; w < W; ++w) { sb += pb[w]; sc += pc[w]; }
                    gB[(b * L + t) * ldgbc + n] = sb;
                    gC[(b * L + t) * ldgbc + n] = sc;
                }
        }
    });
    for (int64_t d = 0; d < D; ++d) {
        for (int64_t n = 0; n < NA; ++n) {
            T s = 0;
            for (int i = 0; i < nth; ++i) s += part[i][((d / W) * NA + n) * W + (d % W)];
            gA[d * NA + n] = s;
        }
        if (gDsk) {
            T s = 0;
            for (int i = 0; i < nth; ++i) s += part[i][nblk * NA * W + d];
            gDsk[d] = s;
        }
    }
}

}  // namespace layerscope_kernels
