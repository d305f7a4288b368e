// A harness for science/probes/csrc/probe_objective_kernel.h without torch: random problems, the
// sums printed, so tests/test_probe_onepass_paths.py can hold the SIMD build and the scalar one equal.
#include "probe_objective_kernel.h"
#include <cstdio>
#include <random>
#include <vector>
int main() {
    std::mt19937 g(1); std::normal_distribution<float> n(0, 1);
    for (int K = 2; K <= 8; ++K) for (long D : {1L, 37L, 160L}) for (long N : {7L, 1001L, 3000L}) {
        long ld = N + 3;
        std::vector<float> X(D * ld), V(K * D); std::vector<double> b(K); std::vector<int64_t> y(N);
        for (auto& x : X) x = n(g); for (auto& v : V) v = 0.2f * n(g); for (auto& c : b) c = n(g);
        for (auto& t : y) t = g() % K;
        double p = 0; std::vector<double> G(K * D, 0), gb(K, 0);
        layerscope_probe::objective(X.data(), ld, D, N, V.data(), b.data(), y.data(), K, (double)N, &p, G.data(), gb.data());
        double gs = 0; for (double v : G) gs += v * v;
        printf("%d %ld %ld %.12e %.12e %.12e\n", K, D, N, p, gs, gb[0]);
    }
}
