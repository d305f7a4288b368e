// The typed torch ops over probe_objective_kernel.h and probe_lbfgs.h:
// torch.ops.layerscope_probe.objective (one evaluation's sums), .lbfgs_fit (a whole fit) and
// .centred_transpose (a chunk of rows on disk in the kernel's layout). They
// check dtypes, devices, shapes and layouts and raise (RuntimeError) instead of reading out of
// bounds. Built and loaded by science/probes/onepass.py.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "centred_transpose.h"
#include "probe_lbfgs.h"
#include "probe_objective_kernel.h"

namespace {

using at::Tensor;

void check(const Tensor& t, at::ScalarType dtype, at::IntArrayRef shape, const char* name) {
    TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU, got ", t.device());
    TORCH_CHECK(t.scalar_type() == dtype, name, " must be ", dtype, ", got ", t.scalar_type());
    TORCH_CHECK(t.sizes() == shape, name, " must have shape ", shape, ", got ", t.sizes());
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

// Xt [D, N] float32 on the CPU, unit stride along N; returns its row stride.
int64_t check_rows(const Tensor& Xt) {
    TORCH_CHECK(Xt.dim() == 2, "Xt must be [D, N], got ", Xt.dim(), " dims");
    const int64_t D = Xt.size(0), N = Xt.size(1);
    TORCH_CHECK(Xt.device().is_cpu() && Xt.scalar_type() == at::kFloat, "Xt must be float32 on the CPU, got ",
                Xt.scalar_type(), " on ", Xt.device());
    TORCH_CHECK(N <= 1 || Xt.stride(1) == 1, "Xt must have unit stride along its rows (strides ", Xt.strides(), ")");
    const int64_t ld = D > 1 ? Xt.stride(0) : N;
    TORCH_CHECK(ld >= N, "Xt's row stride ", ld, " is shorter than its rows (", N, ")");
    return ld;
}

void check_labels(const Tensor& y, int64_t N, int64_t K) {
    check(y, at::kLong, {N}, "y");
    const int64_t* yp = y.data_ptr<int64_t>();
    for (int64_t r = 0; r < N; ++r)
        TORCH_CHECK(yp[r] >= 0 && yp[r] < K, "y must be labels in 0..", K - 1, ", got ", yp[r], " at ", r);
}

// Adds one evaluation's sums over the rows of Xt [D, N] (unit stride along N, rows one stride
// apart: a column slice of a wider matrix is read in place) into picked [], G [K, D], gb [K].
void objective(const Tensor& Xt, const Tensor& V, const Tensor& b, const Tensor& y, double Ntot,
               Tensor& picked, Tensor& G, Tensor& gb) {
    const int64_t ld = check_rows(Xt);
    const int64_t D = Xt.size(0), N = Xt.size(1);
    TORCH_CHECK(V.dim() == 2, "V must be [K, D], got ", V.dim(), " dims");
    const int64_t K = V.size(0);
    TORCH_CHECK(K >= 2 && K <= layerscope_probe::MAX_CLASSES, "K must be 2..", layerscope_probe::MAX_CLASSES,
                " classes, got ", K);
    TORCH_CHECK(Ntot > 0, "Ntot must be positive, got ", Ntot);
    check(V, at::kFloat, {K, D}, "V");
    check(b, at::kDouble, {K}, "b");
    check(picked, at::kDouble, {}, "picked");
    check(G, at::kDouble, {K, D}, "G");
    check(gb, at::kDouble, {K}, "gb");
    check_labels(y, N, K);
    if (N == 0 || D == 0) return;
    layerscope_probe::objective(Xt.data_ptr<float>(), ld, D, N, V.data_ptr<float>(), b.data_ptr<double>(),
                                y.data_ptr<int64_t>(),
                                static_cast<int>(K), Ntot, picked.data_ptr<double>(), G.data_ptr<double>(),
                                gb.data_ptr<double>());
}

// A whole fit (probe_lbfgs.h) from theta0 [K·D + K]: returns (theta, iterations, evaluations,
// whether the run stopped at a point meeting tol, max |g| at the last point evaluated).
std::tuple<Tensor, int64_t, int64_t, bool, double> lbfgs_fit(
    const Tensor& Xt, const Tensor& y, double Ntot, int64_t n, const Tensor& maps, const std::optional<Tensor>& P,
    const std::optional<Tensor>& grad_map, const Tensor& inv_std, const Tensor& MT, double lam, double scale,
    const Tensor& theta0, double tol, int64_t max_iter, int64_t history_size, double tolerance_change,
    int64_t restarts) {
    check_rows(Xt);
    const int64_t D = Xt.size(0), N = Xt.size(1);
    TORCH_CHECK(D >= 1 && N >= 1, "Xt must have rows and features, got ", Xt.sizes());
    TORCH_CHECK(theta0.dim() == 1 && theta0.numel() % (D + 1) == 0, "theta0 must be [K·D + K] for D = ", D,
                ", got ", theta0.sizes());
    const int64_t K = theta0.numel() / (D + 1);
    TORCH_CHECK(K >= 2 && K <= layerscope_probe::MAX_CLASSES, "K must be 2..", layerscope_probe::MAX_CLASSES,
                " classes, got ", K);
    TORCH_CHECK(Ntot > 0 && n > 0, "Ntot and n must be positive, got ", Ntot, " and ", n);
    TORCH_CHECK(max_iter >= 0 && history_size >= 1 && restarts >= 0,
                "max_iter ≥ 0, history_size ≥ 1 and restarts ≥ 0, got ", max_iter, ", ", history_size, ", ", restarts);
    check(theta0, at::kDouble, {K * D + K}, "theta0");
    check(maps, at::kDouble, {D, 2 * D}, "maps");
    check(inv_std, at::kDouble, {D}, "inv_std");
    check(MT, at::kDouble, {D, D}, "MT");
    TORCH_CHECK(P.has_value() == grad_map.has_value(), "P and grad_map go together");
    if (P) {
        check(*P, at::kDouble, {D, D}, "P");
        check(*grad_map, at::kDouble, {D, D}, "grad_map");
    }
    check_labels(y, N, K);
    at::AutoDispatchBelowADInplaceOrView no_autograd;  // the fit's tensors need no graph
    layerscope_probe::FoldedObjective f(Xt, y, Ntot, n, maps, P, grad_map, inv_std, MT, lam, scale, tol,
                                        static_cast<int>(K));
    const auto run = layerscope_probe::lbfgs(f, theta0, max_iter, history_size, tolerance_change, restarts);
    return {run.x, run.n_iter, f.evals, run.stopped, f.gmax};
}

// (X[rows] − centre [D])ᵀ → a new [D, m] float32 tensor (centred_transpose.h): X [n, D], rows [m]
// int64 positions in 0..n-1 (absent: every row, m = n).
Tensor centred_transpose(const Tensor& X, const Tensor& centre, const std::optional<Tensor>& rows) {
    TORCH_CHECK(X.dim() == 2, "X must be [n, D], got ", X.dim(), " dims");
    const int64_t n = X.size(0), D = X.size(1);
    check(X, at::kFloat, {n, D}, "X");
    check(centre, at::kFloat, {D}, "centre");
    const int64_t m = rows ? rows->numel() : n;
    const int64_t* rp = nullptr;
    if (rows) {
        check(*rows, at::kLong, {m}, "rows");
        rp = rows->data_ptr<int64_t>();
        for (int64_t i = 0; i < m; ++i)
            TORCH_CHECK(rp[i] >= 0 && rp[i] < n, "rows must be positions in 0..", n - 1, ", got ", rp[i], " at ", i);
    }
    Tensor out = at::empty({D, m}, X.options());
    if (m > 0 && D > 0)
        layerscope_probe::centred_transpose(X.data_ptr<float>(), m, D, rp, centre.data_ptr<float>(),
                                            out.data_ptr<float>());
    return out;
}

bool simd() { return LAYERSCOPE_PROBE_SIMD; }

}  // namespace

TORCH_LIBRARY(layerscope_probe, m) {
    m.def("objective(Tensor Xt, Tensor V, Tensor b, Tensor y, float Ntot, Tensor(a!) picked, Tensor(b!) G, "
          "Tensor(c!) gb) -> ()");
    m.def("lbfgs_fit(Tensor Xt, Tensor y, float Ntot, int n, Tensor maps, Tensor? P, Tensor? grad_map, "
          "Tensor inv_std, Tensor MT, float lam, float scale, Tensor theta0, float tol, int max_iter, "
          "int history_size, float tolerance_change, int restarts) -> (Tensor, int, int, bool, float)");
    m.def("centred_transpose(Tensor X, Tensor centre, Tensor? rows) -> Tensor");
    m.def("simd() -> bool", &simd);  // whether the SIMD path was compiled (else the scalar one)
}

TORCH_LIBRARY_IMPL(layerscope_probe, CPU, m) {
    m.impl("objective", &objective);
    m.impl("lbfgs_fit", &lbfgs_fit);
    m.impl("centred_transpose", &centred_transpose);
}
