// A chunk of rows read back from disk, made into the layout the probe kernel reads, in one pass:
//   out[j, i] = X[row(i), j] − centre[j]   X [*, D] row-major, out [D, m] row-major (float32),
//   row(i) = rows[i] (the selected rows' positions), or i where rows is null
// — the same float32 subtraction as torch's index_select, X.sub_(centre) and X.T.contiguous(), so
// the same bits, in one pass and without torch's strided transpose copy (~3 GB/s on the CPUs
// measured: BENCHMARKS.md "Lab scale"). Tiles of 8 rows × 8 features, transposed in registers
// (AVX2); a scalar path otherwise.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace layerscope_probe {

inline const float* row_of(const float* X, long D, const int64_t* rows, long i) {
    return X + (rows ? rows[i] : i) * D;
}

inline void centred_transpose_scalar(const float* X, long m, long D, const int64_t* rows, const float* c, float* out,
                                     long i0, long i1, long j0, long j1) {
    for (long i = i0; i < i1; ++i) {
        const float* x = row_of(X, D, rows, i);
        for (long j = j0; j < j1; ++j) out[j * m + i] = x[j] - c[j];
    }
}

#if defined(__AVX2__)
// rows i..i+7 of features j..j+7, centred, transposed in registers, stored as features j..j+7 of rows i..i+7
inline void centred_tile8(const float* const* x, long m, const float* c, float* out, long i, long j) {
    const __m256 cj = _mm256_loadu_ps(c + j);
    __m256 r[8];
    for (int k = 0; k < 8; ++k) r[k] = _mm256_sub_ps(_mm256_loadu_ps(x[k] + j), cj);
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    float* o = out + j * m + i;
    _mm256_storeu_ps(o + 0 * m, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(o + 1 * m, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(o + 2 * m, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(o + 3 * m, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(o + 4 * m, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(o + 5 * m, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(o + 6 * m, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(o + 7 * m, _mm256_permute2f128_ps(s3, s7, 0x31));
}
#endif

inline void centred_transpose(const float* X, long m, long D, const int64_t* rows, const float* c, float* out) {
#if defined(__AVX2__)
    // RT rows at a time (two tiles: a whole 64-byte line of each output row written together)
    constexpr long RT = 16;
    const long mT = m / RT * RT, D8 = D / 8 * 8;
    const float* x[RT];
    for (long i = 0; i < mT; i += RT) {
        for (long k = 0; k < RT; ++k) x[k] = row_of(X, D, rows, i + k);
        for (long j = 0; j < D8; j += 8)
            for (long t = 0; t < RT; t += 8) centred_tile8(x + t, m, c, out, i + t, j);
        centred_transpose_scalar(X, m, D, rows, c, out, i, i + RT, D8, D);  // the last features of these rows
    }
    centred_transpose_scalar(X, m, D, rows, c, out, mT, m, 0, D);  // the last rows
#else
    centred_transpose_scalar(X, m, D, rows, c, out, 0, m, 0, D);
#endif
}

}  // namespace layerscope_probe
