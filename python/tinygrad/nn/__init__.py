"""tinygrad.nn: layers (this file), optimizers (nn.optim), weight files and state dicts (nn.state), datasets (nn.datasets)."""
