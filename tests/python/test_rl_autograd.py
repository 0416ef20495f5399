"""The RL scheduler's PPO loss and gradient (src/sched/ppo.c, by hand in C)
against PyTorch autograd on identical weights and inputs.

The C side is reached through the extension's private
sluice._sluice._ppo_test_loss (the engine's internal sl__ppo_test_loss, which
libsluice.so does not export). The network and the loss are written again
here in plain torch, from docs/POLICY.md, in float64.
"""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

N_IN, KNOBS, ACTS = 24, 3, 3


def lib():
    """f(params, h, obs, act, mask, logp_old, adv, ret, hp, grad) -> loss,
    grad filled, as the old ctypes hook was called."""
    _sluice = pytest.importorskip("sluice._sluice",
                                  reason="sluice module not built")

    def f(params, n_in, h, obs, act, mask, logp_old, adv, ret, n, hp, grad):
        assert len(adv) == n
        loss, g = _sluice._ppo_test_loss(
            np.ascontiguousarray(params, np.float64), n_in, h,
            np.ascontiguousarray(obs, np.float64),
            np.ascontiguousarray(act, np.uint8),
            np.ascontiguousarray(mask, np.uint8),
            np.ascontiguousarray(logp_old, np.float64),
            np.ascontiguousarray(adv, np.float64),
            np.ascontiguousarray(ret, np.float64), tuple(hp))
        grad[:] = g
        return loss
    return f


def n_params(h):
    return h * N_IN + h + h * h + h + 9 * h + 9 + h + 1


def unflatten(w, h):
    """The flat parameter layout of src/sched/mlp.h."""
    shapes = [(h, N_IN), (h,), (h, h), (h,), (9, h), (9,), (1, h), (1,)]
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(w[at:at + n].view(*s))
        at += n
    return out


def torch_loss(w, h, obs, act, mask, logp_old, adv, ret, clip, vf, ent):
    W1, b1, W2, b2, Wp, bp, Wv, bv = unflatten(w, h)
    h1 = torch.tanh(obs @ W1.T + b1)
    h2 = torch.tanh(h1 @ W2.T + b2)
    logits = (h2 @ Wp.T + bp).view(-1, KNOBS, ACTS)
    value = (h2 @ Wv.T + bv).view(-1)
    m = mask.view(-1, KNOBS, ACTS).bool()
    # a finite "minus infinity": exp gives exactly 0, and autograd stays
    # finite through p * log p (with -inf it would be 0 * inf = nan)
    z = logits.masked_fill(~m, -1e300)
    logp_all = torch.log_softmax(z, dim=-1)
    p = logp_all.exp()
    logp = logp_all.gather(-1, act.view(-1, KNOBS, 1).long()).squeeze(-1)
    logp = logp.sum(-1)
    # entropy over allowed actions only (0 * -inf would be nan)
    plogp = torch.where(m, p * logp_all, torch.zeros_like(p))
    entropy = -plogp.sum(-1).sum(-1)
    ratio = torch.exp(logp - logp_old)
    s1 = ratio * adv
    s2 = torch.clamp(ratio, 1 - clip, 1 + clip) * adv
    pi_loss = -torch.min(s1, s2).mean()
    v_loss = 0.5 * ((value - ret) ** 2).mean()
    return pi_loss + vf * v_loss - ent * entropy.mean()


@pytest.mark.parametrize("seed,h,n", [(0, 64, 16), (1, 16, 5), (2, 32, 33)])
def test_loss_and_gradient_match_autograd(seed, h, n):
    f = lib()
    rng = np.random.default_rng(seed)
    P = n_params(h)
    w = rng.normal(0, 0.3, P)
    obs = rng.normal(0, 1, (n, N_IN))
    mask = (rng.random((n, KNOBS, ACTS)) < 0.7).astype(np.uint8)
    mask[:, :, 1] = 1  # "stay" is always allowed
    act = np.empty((n, KNOBS), np.uint8)
    for i in range(n):
        for k in range(KNOBS):
            act[i, k] = rng.choice(np.flatnonzero(mask[i, k]))
    adv = rng.normal(0, 1, n)
    ret = rng.normal(0, 1, n)
    clip, vf, ent = 0.2, 0.5, 0.03
    # logp_old: the current logp shifted so ratios fall in and out of the
    # clip range, clear of its kinks (where the derivative is undefined)
    wt = torch.tensor(w)
    with torch.no_grad():
        W1, b1, W2, b2, Wp, bp, _, _ = unflatten(wt, h)
        hh = torch.tanh(torch.tanh(torch.tensor(obs) @ W1.T + b1) @ W2.T + b2)
        z = (hh @ Wp.T + bp).view(-1, KNOBS, ACTS)
        z = z.masked_fill(~torch.tensor(mask).bool(), float("-inf"))
        lp = torch.log_softmax(z, -1).gather(
            -1, torch.tensor(act).long().view(-1, KNOBS, 1)).sum((-1, -2))
    ratio = rng.uniform(0.6, 1.5, n)
    ratio[np.abs(ratio - 0.8) < 0.02] = 0.9
    ratio[np.abs(ratio - 1.2) < 0.02] = 1.1
    logp_old = lp.numpy() - np.log(ratio)

    obs_c = np.ascontiguousarray(obs, np.float64)
    act_c = np.ascontiguousarray(act, np.uint8)
    mask_c = np.ascontiguousarray(mask.reshape(n, -1), np.uint8)
    hp = np.array([clip, vf, ent], np.float64)
    grad = np.zeros(P)
    wc = np.ascontiguousarray(w)
    lo = np.ascontiguousarray(logp_old)
    loss_c = f(wc, N_IN, h, obs_c,
               act_c, mask_c,
               lo, adv,
               ret, n, hp,
               grad)

    wt = torch.tensor(w, requires_grad=True)
    loss_t = torch_loss(wt, h, torch.tensor(obs), torch.tensor(act),
                        torch.tensor(mask), torch.tensor(logp_old),
                        torch.tensor(adv), torch.tensor(ret), clip, vf, ent)
    loss_t.backward()
    g_t = wt.grad.numpy()
    assert np.isfinite(loss_c)
    assert abs(loss_c - loss_t.item()) < 1e-10 * max(1, abs(loss_c))
    err = np.abs(grad - g_t)
    assert err.max() < 1e-10, (err.argmax(), grad[err.argmax()],
                               g_t[err.argmax()])
    # Not a trivial agreement: every block of parameters has gradient.
    assert np.count_nonzero(g_t) > 0.9 * P


def test_a_wrong_gradient_would_be_caught():
    """The same comparison with one weight changed on the C side only must
    disagree: the test can fail."""
    f = lib()
    h, n = 8, 4
    rng = np.random.default_rng(5)
    P = n_params(h)
    w = rng.normal(0, 0.3, P)
    obs = rng.normal(0, 1, (n, N_IN))
    mask = np.ones((n, 9), np.uint8)
    act = np.ones((n, KNOBS), np.uint8)
    adv, ret, lo = rng.normal(0, 1, n), rng.normal(0, 1, n), np.zeros(n)
    hp = np.array([0.2, 0.5, 0.01])
    grad = np.zeros(P)
    w2 = w.copy()
    w2[3] += 0.1
    f(w2, N_IN, h, obs,
      act, mask,
      lo, adv,
      ret, n, hp,
      grad)
    wt = torch.tensor(w, requires_grad=True)
    torch_loss(wt, h, torch.tensor(obs), torch.tensor(act), torch.tensor(mask),
               torch.tensor(lo), torch.tensor(adv), torch.tensor(ret),
               0.2, 0.5, 0.01).backward()
    assert np.abs(grad - wt.grad.numpy()).max() > 1e-6


def test_hook_is_not_exported_from_the_shared_library():
    """The test hook reaches Python through the extension only: the release
    library does not export it."""
    import ctypes
    path = os.environ.get("SL_LIB")
    if not path:
        pytest.skip("SL_LIB (libsluice.so) not given")
    assert not hasattr(ctypes.CDLL(path), "sl__ppo_test_loss")


def test_bad_sizes_are_refused():
    _sluice = pytest.importorskip("sluice._sluice",
                                  reason="sluice module not built")
    h, n = 8, 2
    w = np.zeros(n_params(h))
    ok = dict(obs=np.zeros((n, N_IN)), act=np.ones((n, KNOBS), np.uint8),
              mask=np.ones((n, 9), np.uint8), lo=np.zeros(n),
              adv=np.zeros(n), ret=np.zeros(n))
    loss, g = _sluice._ppo_test_loss(w, N_IN, h, ok["obs"], ok["act"],
                                     ok["mask"], ok["lo"], ok["adv"],
                                     ok["ret"], (0.2, 0.5, 0.01))
    assert np.isfinite(loss) and g.shape == w.shape
    with pytest.raises(ValueError):
        _sluice._ppo_test_loss(w, N_IN, h, ok["obs"][:1], ok["act"],
                               ok["mask"], ok["lo"], ok["adv"], ok["ret"],
                               (0.2, 0.5, 0.01))
    # A weight vector of the wrong length: NaN, not a read past its end.
    loss, _ = _sluice._ppo_test_loss(w[:-1], N_IN, h, ok["obs"], ok["act"],
                                     ok["mask"], ok["lo"], ok["adv"],
                                     ok["ret"], (0.2, 0.5, 0.01))
    assert np.isnan(loss)
