"""The model on paper of issue 16 item 7 (bench/RESULTS.md, "sluice.ray
against tf.data service and Ray Data, and the model on paper"): from
measured per-batch costs, how fast N preparers feed a trainer, which bound
binds, how many preparer nodes a trainer needs and where the transfer
becomes the bound. Used by bench/scale/peers.py (against the measurement)
and bench/scale/model_sim.py (against the simulator).

Costs, in seconds: p per image to prepare (decode + transform, one
thread); per batch of B images, s at the preparer (copy + serialize into
the object store), t at the trainer (get + tensors), r in the object
store's own processes; `nbytes` bytes per batch.

  one node of C cores, N preparers (one thread each) on it:
      R = min(N / (p + s/B),  C / (p + (s + t + r)/B),  B / t)
      CPU per image p + (s + t + r)/B
  preparers on other nodes of c cores, the trainer behind a link of
  `link` bytes/s:
      R = min(N / (p + s/B),  nodes c / (p + s/B),  link B / nbytes,  B / t)
      a trainer consuming R needs R (p + s/B) preparer cores, R (p + s/B) / c
      nodes; the transfer binds from N* = link B / nbytes x (p + s/B)
      preparers on.
"""
import math


def per_image(p, s, batch):
    """Preparer seconds per image: its decode and its serialize in turn."""
    return p + s / batch


def model(p, tc, batch, n, cores):
    """The issue's model: predicted img/s of sluice in-process (n threads)
    and of n remote preparers on `cores` cores, and which bound binds.
    tc: {"s", "t", "r"} seconds per batch."""
    s, t, r = tc["s"] / batch, tc["t"] / batch, tc["r"] / batch
    local = min(n, cores) / p
    bounds = {"preparers": n / (p + s), "cores": cores / (p + s + t + r),
              "trainer": 1 / t if t > 0 else math.inf}
    which = min(bounds, key=bounds.get)
    return {"in_process": local, "remote": bounds[which], "bound": which,
            "bounds": bounds, "remote_over_in_process": bounds[which] / local,
            "remote_cpu_s_per_img": p + s + t + r}


def cross_node(p, tc, batch, nbytes, n, node_cores, per_node, link, demand=math.inf):
    """n preparers, per_node to a node of node_cores cores, on other nodes
    than the trainer's; the trainer behind a link of `link` bytes/s (0:
    unlimited) and consuming at most `demand` img/s. Predicted img/s and
    which bound binds."""
    pi = per_image(p, tc["s"], batch)
    nodes = math.ceil(n / per_node)
    bounds = {"preparers": n / pi, "nodes": nodes * node_cores / pi,
              "link": link * batch / nbytes if link > 0 else math.inf,
              "trainer": batch / tc["t"] if tc["t"] > 0 else math.inf,
              "demand": demand}
    which = min(bounds, key=bounds.get)
    return {"rate": bounds[which], "bound": which, "bounds": bounds}


def knee(p, tc, batch, nbytes, link):
    """Preparers (one thread, one core each) from which the link binds."""
    return link * batch / nbytes * per_image(p, tc["s"], batch)


def nodes_needed(p, tc, batch, rate, node_cores):
    """Preparer nodes of node_cores cores a trainer consuming `rate` needs."""
    return rate * per_image(p, tc["s"], batch) / node_cores
