// A whole probe fit in one call: the flat L-BFGS of science/probes/lbfgs.py (torch.optim.LBFGS's
// iteration: two-loop recursion, history m, torch's strong-Wolfe line search with cubic
// interpolation) around the folded evaluation of science/probes/kernel_objective.py, with the
// solver's stopping rule (science/probes/solver.py: the run ends at the first point evaluated whose
// standardised gradient has max |g| ≤ tol). Python ran ~25 small torch operations and the line
// search's bookkeeping around each kernel call (~0.6 ms an evaluation, BENCHMARKS.md "Lab scale",
// seventh pass); here the loop is C++ and each operation one ATen call.
//
// Bit for bit the Python loop's numbers: every vector operation is the ATen op Python calls (dot,
// add_ with alpha, mm, addmm, sum, …), every scalar the same IEEE double operation in the same
// order, without contraction into fused multiply-adds (the pragma below); a step length carries
// whether Python held it as a number or a 0-dim tensor, because `number / tensor` is
// `reciprocal(tensor) · number` in torch (Tensor.__rtruediv__), one rounding apart from `a / b`;
// and the line search's square root is torch's (`Tensor.sqrt` on float64 is not correctly rounded
// on this build: 1 in ~80 results is one unit in the last place off libm's `std::sqrt`).
// tests/test_probe_lbfgs_compiled.py holds the two loops equal.
//
// Sources: Nocedal & Wright 2006, Numerical Optimization, Alg. 7.4 (two-loop recursion) and
// 3.5–3.6 (strong-Wolfe line search); torch/optim/lbfgs.py (torch 2.13: _cubic_interpolate,
// _strong_wolfe, LBFGS.step).
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <deque>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "probe_objective_kernel.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

namespace layerscope_probe {

// A step length as Python held it: the same double, and whether it was a 0-dim tensor.
struct Step {
    double v;
    bool tensor;
};
inline Step operator-(Step a, Step b) { return {a.v - b.v, a.tensor || b.tensor}; }
inline Step operator+(Step a, Step b) { return {a.v + b.v, a.tensor || b.tensor}; }
inline Step scaled(double c, Step a) { return {c * a.v, a.tensor}; }
// Python's built-ins on two values: max keeps the first unless the second is greater, min unless
// it is smaller (which object is kept decides the kind).
inline Step py_max(Step a, Step b) { return b.v > a.v ? b : a; }
inline Step py_min(Step a, Step b) { return b.v < a.v ? b : a; }
inline double py_max(double a, double b) { return b > a ? b : a; }
inline double py_min(double a, double b) { return b < a ? b : a; }

inline double scalar(const at::Tensor& t) { return t.item<double>(); }

struct StopRun {};  // the evaluated point meets the solver's criterion: the run ends there

// The folded evaluation (science/probes/kernel_objective.py, KernelObjective.__call__), with the
// solver's criterion (science/probes/solver.py, minimise's closure): F·loss and F·∇θ at θ.
class FoldedObjective {
   public:
    FoldedObjective(const at::Tensor& Xt, const at::Tensor& y, double Ntot, int64_t n, at::Tensor maps,
                    std::optional<at::Tensor> P, std::optional<at::Tensor> grad_map, at::Tensor inv_std,
                    at::Tensor MT, double lam, double scale, double tol, int K)
        : Xt_(Xt), y_(y), Ntot_(Ntot), n_(n), maps_(std::move(maps)), P_(std::move(P)),
          grad_map_(std::move(grad_map)), inv_std_(std::move(inv_std)), MT_(std::move(MT)), lam_(lam),
          scale_(scale), tol_(tol), K_(K), D_(Xt.size(0)) {
        const auto f64 = at::TensorOptions().dtype(at::kDouble);
        picked_ = at::zeros({}, f64);
        G_ = at::zeros({K_, D_}, f64);
        gb_ = at::zeros({K_}, f64);
    }

    // (F · loss, F · ∇θ [K·D + K]); counts the evaluation; throws StopRun where max |g| ≤ tol.
    std::pair<double, at::Tensor> operator()(const at::Tensor& th) {
        const int64_t K = K_, D = D_;
        const at::Tensor WV = at::matmul(th.slice(0, 0, K * D).view({K, D}), maps_);  // [K, 2D]
        const at::Tensor W = WV.slice(1, 0, D);                                         // [K, D]
        picked_.zero_();
        G_.zero_();
        gb_.zero_();
        const at::Tensor raw = P_ ? at::matmul(WV.slice(1, D), *P_) : WV.slice(1, D);
        const at::Tensor V = raw.to(at::kFloat).contiguous();  // [K, D] raw weights
        const at::Tensor b = th.slice(0, K * D);
        objective(Xt_.data_ptr<float>(), D > 1 ? Xt_.stride(0) : Xt_.size(1), D, Xt_.size(1), V.data_ptr<float>(),
                  b.data_ptr<double>(), y_.data_ptr<int64_t>(), static_cast<int>(K), Ntot_,
                  picked_.data_ptr<double>(), G_.data_ptr<double>(), gb_.data_ptr<double>());
        const at::Tensor g = grad_map_ ? at::addmm(W, G_, *grad_map_, lam_) : G_.mul_(inv_std_).add_(W, lam_);
        at::Tensor grad = at::empty({K * D + K}, th.options());
        at::Tensor grad_w = grad.slice(0, 0, K * D).view({K, D});
        at::mm_out(grad_w, g, MT_);
        grad.slice(0, K * D).copy_(gb_);
        grad.mul_(scale_);
        const double loss = -scalar(picked_) / static_cast<double>(n_) + 0.5 * lam_ * scalar(W.pow(2).sum());
        gmax = py_max(scalar(g.abs().max()), scalar(gb_.abs().max()));
        evals += 1;
        if (gmax <= tol_) throw StopRun{};
        return {loss * scale_, grad};
    }

    int64_t evals = 0;
    double gmax = 0.0;

   private:
    at::Tensor Xt_, y_;
    double Ntot_;
    int64_t n_;
    at::Tensor maps_;
    std::optional<at::Tensor> P_, grad_map_;
    at::Tensor inv_std_, MT_;
    double lam_, scale_, tol_;
    int64_t K_, D_;
    at::Tensor picked_, G_, gb_;
};

// torch's LBFGS state, carried from one step (segment) to the next.
struct LbfgsState {
    int64_t n_iter = 0;
    at::Tensor d;
    Step t{0.0, false};
    std::deque<at::Tensor> old_dirs, old_stps;
    std::deque<double> ro;
    double H_diag = 1.0;
    at::Tensor prev_flat_grad;
    double prev_loss = 0.0;
};

// The evaluations the loop makes: θ → (F·loss, F·∇θ), remembering the last point evaluated.
class Evaluated {
   public:
    explicit Evaluated(FoldedObjective& f) : f_(f) {}
    std::pair<double, at::Tensor> operator()(const at::Tensor& point) {
        last = point;
        return f_(point);
    }
    at::Tensor last;

   private:
    FoldedObjective& f_;
};

// The L-BFGS direction at flat_grad (updates the history): torch's step, first block.
inline at::Tensor direction(LbfgsState& st, const at::Tensor& flat_grad, int64_t history_size) {
    if (st.n_iter == 1) {
        st.old_dirs.clear();
        st.old_stps.clear();
        st.ro.clear();
        st.H_diag = 1.0;
        return flat_grad.neg();
    }
    at::Tensor y = flat_grad.sub(st.prev_flat_grad);
    at::Tensor s = st.d.mul(st.t.v);
    const double ys = scalar(y.dot(s));
    if (ys > 1e-10) {
        if (static_cast<int64_t>(st.old_dirs.size()) == history_size) {
            st.old_dirs.pop_front();
            st.old_stps.pop_front();
            st.ro.pop_front();
        }
        const double yy = scalar(y.dot(y));
        st.old_dirs.push_back(std::move(y));
        st.old_stps.push_back(std::move(s));
        st.ro.push_back(1.0 / ys);
        st.H_diag = ys / yy;
    }
    const size_t n = st.old_dirs.size();
    std::vector<double> al(n);
    at::Tensor q = flat_grad.neg();
    for (size_t k = n; k-- > 0;) {
        al[k] = scalar(st.old_stps[k].dot(q)) * st.ro[k];
        q.add_(st.old_dirs[k], -al[k]);
    }
    at::Tensor r = at::mul(q, st.H_diag);
    for (size_t k = 0; k < n; ++k) {
        const double be = scalar(st.old_dirs[k].dot(r)) * st.ro[k];
        r.add_(st.old_stps[k], al[k] - be);
    }
    return r;
}

// torch's _cubic_interpolate: the minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2),
// within bounds (or between x1 and x2).
inline Step cubic_interpolate(Step x1, double f1, double g1, Step x2, double f2, double g2,
                              const Step* bounds = nullptr) {
    Step lo = bounds ? bounds[0] : (x1.v <= x2.v ? x1 : x2);
    Step hi = bounds ? bounds[1] : (x1.v <= x2.v ? x2 : x1);
    const Step dx = x1 - x2;
    const double num = 3 * (f1 - f2);
    const double d1 = g1 + g2 - (dx.tensor ? (1.0 / dx.v) * num : num / dx.v);
    const double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0) {
        const double d2 = scalar(at::scalar_tensor(d2_square, at::kDouble).sqrt());  // torch's, not libm's (below)
        Step min_pos;
        if (x1.v <= x2.v)
            min_pos = {x2.v - (x2.v - x1.v) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2)), true};
        else
            min_pos = {x1.v - (x1.v - x2.v) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2)), true};
        return py_min(py_max(min_pos, lo), hi);
    }
    const Step sum = lo + hi;
    return {sum.v / 2.0, sum.tensor};
}

struct LineSearch {
    double f;
    at::Tensor g;
    Step t;
    int64_t evals;
};

// torch's _strong_wolfe (c1 = 1e-4, c2 = 0.9, tolerance_change = 1e-9), trial points x + t·d.
inline LineSearch strong_wolfe(Evaluated& obj, const at::Tensor& x, Step t, const at::Tensor& d, double f,
                               const at::Tensor& g_in, double gtd, int64_t max_ls) {
    const double c1 = 1e-4, c2 = 0.9, tolerance_change = 1e-9;
    const double d_norm = scalar(d.abs().max());
    const at::Tensor g = g_in.clone(at::MemoryFormat::Contiguous);
    auto trial = [&](Step step) { return obj(x.add(d, step.v)); };
    auto [f_new, g_new] = trial(t);
    int64_t ls_func_evals = 1;
    double gtd_new = scalar(g_new.dot(d));

    Step t_prev{0.0, false};
    double f_prev = f, gtd_prev = gtd;
    at::Tensor g_prev = g;
    bool done = false;
    int64_t ls_iter = 0;
    std::vector<Step> bracket;
    std::vector<double> bracket_f, bracket_gtd;
    std::vector<at::Tensor> bracket_g;
    while (ls_iter < max_ls) {
        if (f_new > (f + c1 * t.v * gtd) || (ls_iter > 1 && f_new >= f_prev)) {
            bracket = {t_prev, t};
            bracket_f = {f_prev, f_new};
            bracket_g = {g_prev, g_new.clone(at::MemoryFormat::Contiguous)};
            bracket_gtd = {gtd_prev, gtd_new};
            break;
        }
        if (std::abs(gtd_new) <= -c2 * gtd) {
            bracket = {t};
            bracket_f = {f_new};
            bracket_g = {g_new};
            done = true;
            break;
        }
        if (gtd_new >= 0) {
            bracket = {t_prev, t};
            bracket_f = {f_prev, f_new};
            bracket_g = {g_prev, g_new.clone(at::MemoryFormat::Contiguous)};
            bracket_gtd = {gtd_prev, gtd_new};
            break;
        }
        const Step bounds[2] = {t + scaled(0.01, t - t_prev), scaled(10, t)};
        const Step tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds);
        t_prev = tmp;
        f_prev = f_new;
        g_prev = g_new.clone(at::MemoryFormat::Contiguous);
        gtd_prev = gtd_new;
        std::tie(f_new, g_new) = trial(t);
        ls_func_evals += 1;
        gtd_new = scalar(g_new.dot(d));
        ls_iter += 1;
    }
    if (ls_iter == max_ls) {
        bracket = {Step{0.0, false}, t};
        bracket_f = {f, f_new};
        bracket_g = {g, g_new};
    }

    bool insuf_progress = false;
    size_t low_pos = bracket_f.front() <= bracket_f.back() ? 0 : 1, high_pos = 1 - low_pos;
    while (!done && ls_iter < max_ls) {
        if (std::abs(bracket[1].v - bracket[0].v) * d_norm < tolerance_change) break;
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]);
        const Step bmax = py_max(bracket[0], bracket[1]), bmin = py_min(bracket[0], bracket[1]);
        const Step eps = scaled(0.1, bmax - bmin);
        if (py_min(bmax.v - t.v, t.v - bmin.v) < eps.v) {
            if (insuf_progress || t.v >= bmax.v || t.v <= bmin.v) {
                t = std::abs(t.v - bmax.v) < std::abs(t.v - bmin.v) ? bmax - eps : bmin + eps;
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        std::tie(f_new, g_new) = trial(t);
        ls_func_evals += 1;
        gtd_new = scalar(g_new.dot(d));
        ls_iter += 1;
        if (f_new > (f + c1 * t.v * gtd) || f_new >= bracket_f[low_pos]) {
            bracket[high_pos] = t;
            bracket_f[high_pos] = f_new;
            bracket_g[high_pos] = g_new.clone(at::MemoryFormat::Contiguous);
            bracket_gtd[high_pos] = gtd_new;
            low_pos = bracket_f[0] <= bracket_f[1] ? 0 : 1;
            high_pos = 1 - low_pos;
        } else {
            if (std::abs(gtd_new) <= -c2 * gtd) {
                done = true;
            } else if (gtd_new * (bracket[high_pos].v - bracket[low_pos].v) >= 0) {
                bracket[high_pos] = bracket[low_pos];
                bracket_f[high_pos] = bracket_f[low_pos];
                bracket_g[high_pos] = bracket_g[low_pos];
                bracket_gtd[high_pos] = bracket_gtd[low_pos];
            }
            bracket[low_pos] = t;
            bracket_f[low_pos] = f_new;
            bracket_g[low_pos] = g_new.clone(at::MemoryFormat::Contiguous);
            bracket_gtd[low_pos] = gtd_new;
        }
    }
    return {bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals};
}

// One torch LBFGS.step from x (loss and gradient known there): at most max_iter iterations and
// max_eval evaluations (counting the start's). Gradient test off (tolerance_grad = 0).
inline void segment(Evaluated& obj, at::Tensor& x, double& loss, at::Tensor& flat_grad, LbfgsState& st,
                    int64_t max_iter, int64_t max_eval, int64_t history_size, double tolerance_change) {
    int64_t current_evals = 1;
    if (scalar(flat_grad.abs().max()) <= 0.0) return;
    int64_t n_iter = 0;
    while (n_iter < max_iter) {
        n_iter += 1;
        st.n_iter += 1;
        const at::Tensor d = direction(st, flat_grad, history_size);
        if (!st.prev_flat_grad.defined())
            st.prev_flat_grad = flat_grad.clone(at::MemoryFormat::Contiguous);
        else
            st.prev_flat_grad.copy_(flat_grad);
        st.prev_loss = loss;
        const Step t{st.n_iter == 1 ? py_min(1.0, 1.0 / scalar(flat_grad.abs().sum())) : 1.0, false};
        const double gtd = scalar(flat_grad.dot(d));
        st.d = d;
        st.t = t;
        if (gtd > -tolerance_change) break;
        LineSearch ls = strong_wolfe(obj, x, t, d, loss, flat_grad, gtd, max_eval - current_evals);
        loss = ls.f;
        flat_grad = ls.g;
        st.t = ls.t;
        x = x.add(d, ls.t.v);
        current_evals += ls.evals;
        if (n_iter == max_iter || current_evals >= max_eval) break;
        if (scalar(flat_grad.abs().max()) <= 0.0) break;
        if (scalar(d.mul(ls.t.v).abs().max()) <= tolerance_change) break;
        if (std::abs(loss - st.prev_loss) < tolerance_change) break;
    }
}

struct FitResult {
    at::Tensor x;
    int64_t n_iter;
    bool stopped;
};

// science/probes/lbfgs.py's lbfgs(): segments until max_iter iterations in all, or a segment
// ended early restarts + 1 times; each segment may make 1.25 × its iterations + 25 evaluations.
inline FitResult lbfgs(FoldedObjective& f, const at::Tensor& x0, int64_t max_iter, int64_t history_size,
                       double tolerance_change, int64_t restarts) {
    LbfgsState st;
    Evaluated obj(f);
    at::Tensor x = x0.clone();
    try {
        auto [loss, flat_grad] = obj(x);
        int64_t early_stops = 0;
        while (st.n_iter < max_iter && early_stops <= restarts) {
            const int64_t done = st.n_iter, budget = max_iter - done;
            segment(obj, x, loss, flat_grad, st, budget, static_cast<int64_t>(budget * 1.25) + 25, history_size,
                    tolerance_change);
            if (st.n_iter - done < budget) early_stops += 1;
        }
    } catch (const StopRun&) {
        return {obj.last, st.n_iter, true};
    }
    return {x, st.n_iter, false};
}

}  // namespace layerscope_probe

#if defined(__clang__)
#pragma clang fp contract(fast)  // the build's -ffp-contract=fast (models_store/compiled_ops.py)
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
