// The typed torch op over probe_objective_kernel.h: torch.ops.layerscope_probe.objective. It checks
// dtypes, devices, shapes and layouts and raises (RuntimeError) instead of reading out of bounds.
// Built and loaded by science/probes/onepass.py.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "probe_objective_kernel.h"

namespace {

using at::Tensor;

void check(const Tensor& t, at::ScalarType dtype, at::IntArrayRef shape, const char* name) {
    TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU, got ", t.device());
    TORCH_CHECK(t.scalar_type() == dtype, name, " must be ", dtype, ", got ", t.scalar_type());
    TORCH_CHECK(t.sizes() == shape, name, " must have shape ", shape, ", got ", t.sizes());
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

// Adds one evaluation's sums over the rows of Xt [D, N] (unit stride along N, rows one stride
// apart: a column slice of a wider matrix is read in place) into picked [], G [K, D], gb [K].
void objective(const Tensor& Xt, const Tensor& V, const Tensor& b, const Tensor& y, double Ntot,
               Tensor& picked, Tensor& G, Tensor& gb) {
    TORCH_CHECK(Xt.dim() == 2, "Xt must be [D, N], got ", Xt.dim(), " dims");
    const int64_t D = Xt.size(0), N = Xt.size(1);
    TORCH_CHECK(Xt.device().is_cpu() && Xt.scalar_type() == at::kFloat, "Xt must be float32 on the CPU, got ",
                Xt.scalar_type(), " on ", Xt.device());
    TORCH_CHECK(N <= 1 || Xt.stride(1) == 1, "Xt must have unit stride along its rows (strides ", Xt.strides(), ")");
    const int64_t ld = D > 1 ? Xt.stride(0) : N;
    TORCH_CHECK(ld >= N, "Xt's row stride ", ld, " is shorter than its rows (", N, ")");
    TORCH_CHECK(V.dim() == 2, "V must be [K, D], got ", V.dim(), " dims");
    const int64_t K = V.size(0);
    TORCH_CHECK(K >= 2 && K <= layerscope_probe::MAX_CLASSES, "K must be 2..", layerscope_probe::MAX_CLASSES,
                " classes, got ", K);
    TORCH_CHECK(Ntot > 0, "Ntot must be positive, got ", Ntot);
    check(V, at::kFloat, {K, D}, "V");
    check(b, at::kDouble, {K}, "b");
    check(y, at::kLong, {N}, "y");
    check(picked, at::kDouble, {}, "picked");
    check(G, at::kDouble, {K, D}, "G");
    check(gb, at::kDouble, {K}, "gb");
    if (N == 0 || D == 0) return;
    const int64_t* yp = y.data_ptr<int64_t>();
    for (int64_t r = 0; r < N; ++r)
        TORCH_CHECK(yp[r] >= 0 && yp[r] < K, "y must be labels in 0..", K - 1, ", got ", yp[r], " at ", r);
    layerscope_probe::objective(Xt.data_ptr<float>(), ld, D, N, V.data_ptr<float>(), b.data_ptr<double>(), yp,
                                static_cast<int>(K), Ntot, picked.data_ptr<double>(), G.data_ptr<double>(),
                                gb.data_ptr<double>());
}

bool simd() { return LAYERSCOPE_PROBE_SIMD; }

}  // namespace

TORCH_LIBRARY(layerscope_probe, m) {
    m.def("objective(Tensor Xt, Tensor V, Tensor b, Tensor y, float Ntot, Tensor(a!) picked, Tensor(b!) G, "
          "Tensor(c!) gb) -> ()");
    m.def("simd() -> bool", &simd);  // whether the SIMD path was compiled (else the scalar one)
}

TORCH_LIBRARY_IMPL(layerscope_probe, CPU, m) { m.impl("objective", &objective); }
