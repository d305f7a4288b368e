// Typed torch ops over the kernels in fast_scan_kernels.h: torch.ops.layerscope.{conv_fwd,
// conv_bwd, scan_fwd, scan_bwd}. The schemas below name every argument and its type; each op
// checks dtypes, devices, shapes and row layouts and raises (RuntimeError) instead of reading
// out of bounds. Built and loaded by models_store/fast_scan_cpu.py.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "fast_scan_kernels.h"

namespace {

using at::Tensor;
namespace K = layerscope_kernels;

// The row stride of t [B, L, C] read as rows t[b, l] = base + (b L + l) ld with unit stride in C
// (a contiguous tensor, or a column slice of a wider one); fails for any other layout.
int64_t row_stride(const Tensor& t, const char* name) {
    TORCH_CHECK(t.dim() == 3, name, " must be [B, L, C], got ", t.dim(), " dims");
    const int64_t B = t.size(0), L = t.size(1), C = t.size(2);
    const int64_t ld = L > 1 ? t.stride(1) : (B > 1 ? t.stride(0) : C);
    TORCH_CHECK((C <= 1 || t.stride(2) == 1) && (L <= 1 || t.stride(1) == ld) && (B <= 1 || t.stride(0) == L * ld)
                    && ld >= C,
                name, " must have rows [B, L, C] with unit stride in C (strides ", t.strides(), ")");
    return ld;
}

void check_like(const Tensor& t, const Tensor& x, const char* name) {
    TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU, got ", t.device());
    TORCH_CHECK(t.scalar_type() == x.scalar_type(), name, " must be ", x.scalar_type(), " like x, got ",
                t.scalar_type());
}

void check_dense(const Tensor& t, const Tensor& x, const char* name, at::IntArrayRef shape) {
    check_like(t, x, name);
    TORCH_CHECK(t.sizes() == shape, name, " must have shape ", shape, ", got ", t.sizes());
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

void check_x(const Tensor& x) {
    TORCH_CHECK(x.device().is_cpu(), "x must be on the CPU, got ", x.device());
    TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
                "the fast-scan kernels take float32 or float64, got ", x.scalar_type());
}

void check_rows(const Tensor& t, const Tensor& x, const char* name, int64_t C) {
    check_like(t, x, name);
    TORCH_CHECK(t.dim() == 3 && t.size(0) == x.size(0) && t.size(1) == x.size(1) && t.size(2) == C, name,
                " must be [", x.size(0), ", ", x.size(1), ", ", C, "], got ", t.sizes());
}

template <typename T>
const T* cptr(const std::optional<Tensor>& t) {
    return t.has_value() ? t->data_ptr<T>() : nullptr;
}

// conv_fwd: causal depthwise conv of x [B, L, D] with w [D, k] (+ bias [D]) (+ SiLU if act).
Tensor conv_fwd(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, bool act) {
    check_x(x);
    const int64_t ldx = row_stride(x, "x"), B = x.size(0), L = x.size(1), D = x.size(2);
    TORCH_CHECK(w.dim() == 2 && w.size(0) == D, "w must be [D=", D, ", k], got ", w.sizes());
    check_dense(w, x, "w", w.sizes());
    if (bias) check_dense(*bias, x, "bias", {D});
    Tensor out = at::empty({B, L, D}, x.options());
    const int nth = at::get_num_threads();
    if (x.scalar_type() == at::kFloat)
        K::conv_fwd<float>(x.data_ptr<float>(), ldx, w.data_ptr<float>(), cptr<float>(bias), out.data_ptr<float>(),
                           act, B, L, D, w.size(1), nth);
    else
        K::conv_fwd<double>(x.data_ptr<double>(), ldx, w.data_ptr<double>(), cptr<double>(bias),
                            out.data_ptr<double>(), act, B, L, D, w.size(1), nth);
    return out;
}

// conv_bwd: writes dL/dx into gx (rows [B, L, D], e.g. a column slice of in_proj's gradient);
// returns (gw [D, k], gb [D]; gb is empty when there is no bias).
std::tuple<Tensor, Tensor> conv_bwd(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                                    const Tensor& gout, bool act, Tensor& gx) {
    check_x(x);
    const int64_t ldx = row_stride(x, "x"), B = x.size(0), L = x.size(1), D = x.size(2);
    TORCH_CHECK(w.dim() == 2 && w.size(0) == D, "w must be [D=", D, ", k], got ", w.sizes());
    check_dense(w, x, "w", w.sizes());
    if (bias) check_dense(*bias, x, "bias", {D});
    check_dense(gout, x, "gout", {B, L, D});
    check_rows(gx, x, "gx", D);
    const int64_t ldgx = row_stride(gx, "gx");
    Tensor gw = at::empty_like(w), gb = bias ? at::empty_like(*bias) : at::empty({0}, x.options());
    const int nth = at::get_num_threads();
    if (x.scalar_type() == at::kFloat)
        K::conv_bwd<float>(x.data_ptr<float>(), ldx, w.data_ptr<float>(), cptr<float>(bias), gout.data_ptr<float>(),
                           act, gx.data_ptr<float>(), ldgx, gw.data_ptr<float>(),
                           bias ? gb.data_ptr<float>() : nullptr, B, L, D, w.size(1), nth);
    else
        K::conv_bwd<double>(x.data_ptr<double>(), ldx, w.data_ptr<double>(), cptr<double>(bias),
                            gout.data_ptr<double>(), act, gx.data_ptr<double>(), ldgx, gw.data_ptr<double>(),
                            bias ? gb.data_ptr<double>() : nullptr, B, L, D, w.size(1), nth);
    return {gw, gb};
}

struct ScanShape {
    int64_t B, L, D, N, ldx, ldbc, ldz;
    bool scalar_a;
};

// Checks the scan's inputs: x [B, L, D] rows; dt [B, L, D]; A [D, N] or [D]; B, C [B, L, N] rows
// of one stride; Dskip [D]; z [B, L, D] rows.
ScanShape check_scan(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                     const std::optional<Tensor>& Dskip, const std::optional<Tensor>& z) {
    check_x(x);
    ScanShape s{};
    s.ldx = row_stride(x, "x");
    s.B = x.size(0), s.L = x.size(1), s.D = x.size(2);
    check_dense(dt, x, "dt", {s.B, s.L, s.D});
    TORCH_CHECK(Bm.dim() == 3, "B must be [B, L, N], got ", Bm.sizes());
    s.N = Bm.size(2);
    check_rows(Bm, x, "B", s.N);
    check_rows(Cm, x, "C", s.N);
    s.ldbc = row_stride(Bm, "B");
    TORCH_CHECK(row_stride(Cm, "C") == s.ldbc, "B and C must share one row stride");
    s.scalar_a = A.dim() == 1;
    if (s.scalar_a) check_dense(A, x, "A", {s.D});
    else check_dense(A, x, "A", {s.D, s.N});
    if (Dskip) check_dense(*Dskip, x, "Dskip", {s.D});
    s.ldz = 0;
    if (z) {
        check_rows(*z, x, "z", s.D);
        s.ldz = row_stride(*z, "z");
    }
    return s;
}

template <typename T>
void scan_fwd_t(const ScanShape& s, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                const Tensor& Cm, const std::optional<Tensor>& Dskip, const std::optional<Tensor>& z, bool sp,
                Tensor& out) {
    const int nth = at::get_num_threads();
    auto call = [&](auto sa, auto nc) {
        K::scan_fwd<T, decltype(sa)::value, decltype(nc)::value>(
            x.data_ptr<T>(), s.ldx, dt.data_ptr<T>(), A.data_ptr<T>(), Bm.data_ptr<T>(), Cm.data_ptr<T>(), s.ldbc,
            cptr<T>(Dskip), cptr<T>(z), s.ldz, out.data_ptr<T>(), s.B, s.L, s.D, s.N, sp, nth);
    };
    using std::integral_constant;
    if (s.N == 16) {
        if (s.scalar_a) call(std::true_type{}, integral_constant<int, 16>{});
        else call(std::false_type{}, integral_constant<int, 16>{});
    } else {
        if (s.scalar_a) call(std::true_type{}, integral_constant<int, 0>{});
        else call(std::false_type{}, integral_constant<int, 0>{});
    }
}

// scan_fwd: out [B, L, D] = (scan(x, dt, A, B, C) + Dskip x) silu(z) (softplus on dt first if asked).
Tensor scan_fwd(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                const std::optional<Tensor>& Dskip, const std::optional<Tensor>& z, bool dt_softplus) {
    const ScanShape s = check_scan(x, dt, A, Bm, Cm, Dskip, z);
    Tensor out = at::empty({s.B, s.L, s.D}, x.options());
    if (x.scalar_type() == at::kFloat) scan_fwd_t<float>(s, x, dt, A, Bm, Cm, Dskip, z, dt_softplus, out);
    else scan_fwd_t<double>(s, x, dt, A, Bm, Cm, Dskip, z, dt_softplus, out);
    return out;
}

template <typename T>
void scan_bwd_t(const ScanShape& s, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                const Tensor& Cm, const Tensor& gout, const std::optional<Tensor>& Dskip,
                const std::optional<Tensor>& z, Tensor& gx, int64_t ldgx, Tensor& gBC, int64_t ldg,
                std::optional<Tensor>& gz, int64_t ldgz, bool sp, Tensor& gdt, Tensor& gA, Tensor& gD) {
    const int nth = at::get_num_threads();
    T* gB = gBC.data_ptr<T>();
    T* gDp = Dskip ? gD.data_ptr<T>() : nullptr;
    T* gzp = gz ? gz->data_ptr<T>() : nullptr;
    auto call = [&](auto sa, auto nc) {
        K::scan_bwd<T, decltype(sa)::value, decltype(nc)::value>(
            x.data_ptr<T>(), s.ldx, dt.data_ptr<T>(), A.data_ptr<T>(), Bm.data_ptr<T>(), Cm.data_ptr<T>(), s.ldbc,
            cptr<T>(Dskip), cptr<T>(z), s.ldz, gout.data_ptr<T>(), gx.data_ptr<T>(), ldgx, gdt.data_ptr<T>(),
            gA.data_ptr<T>(), gB, gB + s.N, ldg, gDp, gzp, ldgz, s.B, s.L, s.D, s.N, sp, nth);
    };
    using std::integral_constant;
    if (s.N == 16) {
        if (s.scalar_a) call(std::true_type{}, integral_constant<int, 16>{});
        else call(std::false_type{}, integral_constant<int, 16>{});
    } else {
        if (s.scalar_a) call(std::true_type{}, integral_constant<int, 0>{});
        else call(std::false_type{}, integral_constant<int, 0>{});
    }
}

// scan_bwd: gradients of scan_fwd for gout [B, L, D]. Writes dL/dx into gx (rows [B, L, D]),
// dL/dB then dL/dC into gBC (rows [B, L, 2N]), dL/dz into gz (rows [B, L, D], given iff z is);
// returns (gdt [B, L, D] (w.r.t. the dt passed in), gA (A's shape), gDskip [D], empty without Dskip).
std::tuple<Tensor, Tensor, Tensor> scan_bwd(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                                            const Tensor& Cm, const Tensor& gout, const std::optional<Tensor>& Dskip,
                                            const std::optional<Tensor>& z, Tensor& gx, Tensor& gBC,
                                            std::optional<Tensor> gz, bool dt_softplus) {
    const ScanShape s = check_scan(x, dt, A, Bm, Cm, Dskip, z);
    check_dense(gout, x, "gout", {s.B, s.L, s.D});
    check_rows(gx, x, "gx", s.D);
    check_rows(gBC, x, "gBC", 2 * s.N);
    const int64_t ldgx = row_stride(gx, "gx"), ldg = row_stride(gBC, "gBC");
    TORCH_CHECK(gz.has_value() == z.has_value(), "gz must be given exactly when z is");
    int64_t ldgz = 0;
    if (gz) {
        check_rows(*gz, x, "gz", s.D);
        ldgz = row_stride(*gz, "gz");
    }
    Tensor gdt = at::empty({s.B, s.L, s.D}, x.options()), gA = at::empty_like(A);
    Tensor gD = Dskip ? at::empty_like(*Dskip) : at::empty({0}, x.options());
    if (x.scalar_type() == at::kFloat)
        scan_bwd_t<float>(s, x, dt, A, Bm, Cm, gout, Dskip, z, gx, ldgx, gBC, ldg, gz, ldgz, dt_softplus, gdt, gA, gD);
    else
        scan_bwd_t<double>(s, x, dt, A, Bm, Cm, gout, Dskip, z, gx, ldgx, gBC, ldg, gz, ldgz, dt_softplus, gdt, gA,
                           gD);
    return {gdt, gA, gD};
}

}  // namespace

TORCH_LIBRARY(layerscope, m) {
    m.def("conv_fwd(Tensor x, Tensor w, Tensor? bias, bool act) -> Tensor");
    m.def("conv_bwd(Tensor x, Tensor w, Tensor? bias, Tensor gout, bool act, Tensor(a!) gx) -> (Tensor, Tensor)");
    m.def("scan_fwd(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? Dskip, Tensor? z, "
          "bool dt_softplus) -> Tensor");
    m.def("scan_bwd(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor gout, Tensor? Dskip, Tensor? z, "
          "Tensor(a!) gx, Tensor(b!) gBC, Tensor(c!)? gz, bool dt_softplus) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(layerscope, CPU, m) {
    m.impl("conv_fwd", &conv_fwd);
    m.impl("conv_bwd", &conv_bwd);
    m.impl("scan_fwd", &scan_fwd);
    m.impl("scan_bwd", &scan_bwd);
}
