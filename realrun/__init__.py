"""Real multi-process training on torch.distributed / DDP with compctl's controllers."""
