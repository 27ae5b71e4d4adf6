"""Upstream FastReID's ``fastreid.utils.precision_bn``: recompute BatchNorm statistics over training
batches (precise BN, Wu & Johnson 2021), fvcore's implementation: ``update_bn_stats(model,
data_loader, num_iters=200)`` runs the model in training mode on ``num_iters`` batches and sets
each BatchNorm's running mean and variance to the averages over them (not the exponential moving
average of training); ``get_bn_modules(model)`` lists the BatchNorm modules in training mode."""

import warnings

with warnings.catch_warnings():
    # fvcore.nn scripts a loss with torch.jit.script when imported, which torch deprecates loudly
    warnings.simplefilter("ignore", FutureWarning)
    from fvcore.nn.precise_bn import get_bn_modules, update_bn_stats

__all__ = ["get_bn_modules", "update_bn_stats"]
